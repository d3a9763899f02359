"""Management verbs of the asyncio client (SPEC.md section 10): TOPIC and GROUP.

Kept apart from ``client`` so that file stays about the connection; the methods
are mixed into :class:`fibril.Client`. Answers are the server's JSON objects as
dicts (SPEC.md 10.1 and 10.2 give their fields).
"""

from __future__ import annotations

import warnings
from datetime import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from ._common import KIND_JSON as _JSON
from ._common import Duration, group_config, to_ms, topic_config, ttl_ms
from ._errors_gen import GroupExistsError, TopicExistsError
from ._encode import encode_manage
from ._wire import validate_subject


class _Manage:
    """TOPIC/GROUP methods; needs the client's ``_call``."""

    async def _call(self, frame: bytes, kind: int = 0, *, retry: bool = False) -> Any:
        raise NotImplementedError  # provided by Client

    async def create_topic(
        self,
        name: str,
        *,
        subjects: Iterable[str] | None = None,
        partitions: int | None = None,
        replicas: int | None = None,
        durability: str | None = None,
        retention: str | None = None,
        max_age: Duration | None = None,
        max_bytes: int | None = None,
        max_msgs: int | None = None,
        max_unsettled_msgs: int | None = None,
        max_unsettled_bytes: int | None = None,
        full_policy: str | None = None,
        compression: str | None = None,
        duplicate_window: Duration | None = None,
        duplicate_max_ids: int | None = None,
        message_ttl: Duration | None = None,
        allow_msg_ttl: bool | None = None,
        allow_msg_delay: bool | None = None,
        config: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        max_age_ms: int | None = None,
    ) -> Any:
        """Creates a durable topic (``TOPIC CREATE``); unset options take the
        server's defaults (SPEC.md 10.1). Creating it again with the same
        configuration is allowed; with another one it raises TopicExistsError,
        unless ``exist_ok``.

        Args:
            name: Topic name (a subject without wildcards).
            subjects: Filters capturing publishes (default ``[name]``).
            partitions: Partition count (1..4096).
            replicas: Nodes holding each partition in a cluster; leave it
                out for every node (3 or 5; 1 on a single node).
            durability: ``sync``, ``group`` or ``none``.
            retention: ``workqueue`` or ``limits``.
            max_age: Oldest messages removed after this age (seconds or a
                timedelta).
            max_bytes: Oldest messages removed above this size.
            max_msgs: Oldest messages removed above this count.
            max_unsettled_msgs: Most messages not yet settled by the slowest group.
            max_unsettled_bytes: Same, in bytes.
            full_policy: ``block`` or ``reject`` at the unsettled limits.
            compression: Codec of the topic's sealed segments on disk: ``none``
                (default), ``s2`` or ``zstd``. Fixed at creation; messages
                read back the same either way.
            duplicate_window: How long a publish's ``msg_id`` is remembered
                (seconds or a timedelta; default 2 minutes, 0 turns
                de-duplication off): a repeat within it is not stored again.
            duplicate_max_ids: Most ids a partition remembers (default
                100000); past it the oldest is forgotten early.
            message_ttl: How long a message stays deliverable without its own
                TTL (seconds or a timedelta; default forever).
            allow_msg_ttl: Publishes may set their own TTL (``ttl=``, header
                ``Nats-TTL``).
            allow_msg_delay: Publishes may hold a message back (``delay=``,
                ``deliver_at=``).
            config: More fields sent as they are (a server newer than this SDK);
                the named options above win over the same keys here.
            exist_ok: When the topic exists with another configuration, return
                its info instead of raising TopicExistsError.
            max_age_ms: Deprecated: ``max_age`` in milliseconds.

        Returns:
            The topic's info (JSON object as a dict).

        Raises:
            ValueError: The name is not a valid topic name.
            FibrilError: The server refused (``topic_overlap``, ``invalid_config``, ...).
        """
        validate_subject(name)
        if max_age_ms is not None:
            warnings.warn("max_age_ms= is deprecated: use max_age= (seconds or a timedelta)", DeprecationWarning, 2)
            max_age = max_age_ms / 1000
        cfg = dict(config or {})
        cfg |= topic_config(
            subjects=subjects, partitions=partitions, replicas=replicas, durability=durability, retention=retention,
            max_age_ms=to_ms(max_age, "max_age"), max_bytes=max_bytes, max_msgs=max_msgs,
            max_unsettled_msgs=max_unsettled_msgs, max_unsettled_bytes=max_unsettled_bytes, full_policy=full_policy,
            compression=compression, duplicate_window_ms=to_ms(duplicate_window, "duplicate_window"),
            duplicate_max_ids=duplicate_max_ids,
            message_ttl_ms=None if message_ttl is None else ttl_ms(message_ttl),
            allow_msg_ttl=allow_msg_ttl,
            allow_msg_delay=allow_msg_delay,
        )
        try:
            return await self._call(encode_manage("TOPIC", "CREATE", name, config=cfg), _JSON)
        except TopicExistsError:
            if not exist_ok:
                raise
            return await self.topic_info(name)

    async def topic_info(self, name: str) -> Any:
        """Returns the JSON info of a topic (``TOPIC INFO``)."""
        return await self._call(encode_manage("TOPIC", "INFO", name), _JSON)

    async def list_topics(self) -> Any:
        """Returns the JSON list of topics (``TOPIC LIST``)."""
        return await self._call(encode_manage("TOPIC", "LIST"), _JSON)

    async def delete_topic(self, name: str) -> Any:
        """Deletes a topic and its data (``TOPIC DELETE``)."""
        return await self._call(encode_manage("TOPIC", "DELETE", name), _JSON)

    async def requeue(
        self,
        topic: str,
        *,
        max: int | None = None,
        filter: Iterable[str] | None = None,
        from_seq: int | None = None,
        to_seq: int | None = None,
        to: str | None = None,
    ) -> Any:
        """Moves dead letters of ``topic`` back to the topics that capture their
        original subjects (``TOPIC REQUEUE``, SPEC.md section 10).

        Args:
            topic: The dead-letter topic.
            max: The most messages moved (default 1000, at most 100000).
            filter: Subject filters on the original subject (none: any).
            from_seq: The lowest offset, in every partition.
            to_seq: The highest offset, in every partition.
            to: A topic to publish them to (default: the one that captures each
                original subject now; the way back for a deleted topic's dead
                letters).

        Returns:
            ``{"topic": ..., "requeued": n}``, with ``"error"`` saying why it
            stopped at a message it could not move (that one stays).
        """
        cfg = {
            "max": max,
            "filter": None if filter is None else list(filter),
            "from_seq": from_seq,
            "to_seq": to_seq,
            "to": to,
        }
        cfg = {k: v for k, v in cfg.items() if v is not None}
        return await self._call(encode_manage("TOPIC", "REQUEUE", topic, config=cfg or None), _JSON)

    async def create_group(
        self,
        topic: str,
        group: str,
        *,
        start: str | None = None,
        start_seq: int | None = None,
        start_time: datetime | str | None = None,
        lease: Duration | None = None,
        backoff: Iterable[Duration] | None = None,
        filter: Iterable[str] | None = None,
        ordered: str | None = None,
        on_expiry: str | None = None,
        max_deliveries: int | None = None,
        dead_letter: str | None = None,
        config: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        lease_ms: int | None = None,
    ) -> Any:
        """Creates a consumer group (``GROUP CREATE``).

        Args:
            topic: Topic name.
            group: Group name.
            start: ``earliest`` (default), ``new``, ``seq`` or ``time``.
            start_seq: With ``start="seq"`` (implied when given alone): the
                offset where the group starts in every partition (SPEC.md 10.2).
            start_time: With ``start="time"`` (implied when given alone): the
                group starts at the first message stored at or after this time
                (a timezone-aware datetime, or an RFC 3339 string).
            lease: Lease of a delivery before it is redelivered (seconds or a
                timedelta).
            backoff: Redelivery delays (seconds or timedeltas) after a NACK
                without a delay or an expired lease, by delivery count (the
                last repeats; at most 32).
            filter: Subject filters (wildcards allowed): the group receives
                only the messages whose subject matches one (at most 64).
            ordered: ``"partition"``: one message out at a time per partition,
                in offset order (the next only once the one before is
                settled); ``"key"``: the same per ``Fibril-Key`` (the
                ``key=`` of a publish), keys in parallel, messages without a
                key unordered; ``"none"`` (default): in parallel.
            on_expiry: What the group does with a message whose TTL ran out
                before delivery: ``"drop"`` (default) or ``"dead_letter"``.
            max_deliveries: Deliveries before a message is dead-lettered.
            dead_letter: Dead-letter topic (default ``$DLQ.<topic>.<group>``).
            config: More fields sent as they are (``nats_ack``, newer ones); the
                named options above win over the same keys here.
            exist_ok: When the group exists with another configuration, return
                its info instead of raising GroupExistsError.
            lease_ms: Deprecated: ``lease`` in milliseconds.
        """
        if lease_ms is not None:
            warnings.warn("lease_ms= is deprecated: use lease= (seconds or a timedelta)", DeprecationWarning, 2)
            lease = lease_ms / 1000
        cfg = dict(config or {})
        cfg |= group_config(
            start=start,
            start_seq=start_seq,
            start_time=start_time,
            lease_ms=to_ms(lease, "lease"),
            backoff_ms=None if backoff is None else [to_ms(d, "backoff") or 0 for d in backoff],
            filter=None if filter is None else list(filter),
            ordered=ordered,
            on_expiry=on_expiry,
            max_deliveries=max_deliveries,
            dead_letter=dead_letter,
        )
        try:
            return await self._call(encode_manage("GROUP", "CREATE", topic, group, config=cfg), _JSON)
        except GroupExistsError:
            if not exist_ok:
                raise
            return await self.group_info(topic, group)

    async def group_info(self, topic: str, group: str) -> Any:
        """Returns the JSON info of a group (``GROUP INFO``)."""
        return await self._call(encode_manage("GROUP", "INFO", topic, group), _JSON)

    async def list_groups(self, topic: str) -> Any:
        """Returns the JSON list of a topic's groups (``GROUP LIST``)."""
        return await self._call(encode_manage("GROUP", "LIST", topic), _JSON)

    async def delete_group(self, topic: str, group: str) -> Any:
        """Deletes a consumer group (``GROUP DELETE``)."""
        return await self._call(encode_manage("GROUP", "DELETE", topic, group), _JSON)
