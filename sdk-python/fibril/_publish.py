"""Publish verbs of the asyncio client (SPEC.md 7.5): encode, take a window
token, send, and hand back the confirm.

Kept apart from ``client`` so that file stays about the connection; the methods
are mixed into :class:`fibril.Client`, which provides the state declared here.
A publish holds its window token until its future is done, whether it is on
the wire, waiting to be replayed after a drop, or parked after ``not_leader``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from ._common import KIND_PUB, Data, Duration, HeadersArg, Position, publish_frame
from ._errbase import FibrilError
from ._requests import Request
from .errors import ClientClosedError


class _Publish:
    """Publish methods; need the client's ``_submit`` and the state below."""

    _crc: bool
    _max_payload: int
    _closed: bool
    _close_error: FibrilError | None
    _window: asyncio.Semaphore | None

    async def _submit(self, req: Request) -> None:
        raise NotImplementedError  # provided by Client

    async def publish_async(
        self,
        subject: str,
        data: Data,
        *,
        key: str | bytes | None = None,
        headers: HeadersArg = None,
        msg_id: str | None = None,
        ttl: Duration | None = None,
        delay: Duration | None = None,
        deliver_at: datetime | None = None,
    ) -> asyncio.Future[Position | None]:
        """Sends a publish and returns a future of its confirm (pipelined publishing).

        Blocks only while the publish window (INFO ``max_unconfirmed``) is full or
        the socket is backed up, so one task can keep many confirms outstanding.

        Args:
            subject: Destination subject (no wildcards).
            data: Body; str is encoded as UTF-8.
            key: Partition key (sent as header ``Fibril-Key``).
            headers: Extra headers.
            msg_id: Producer message id (header ``Nats-Msg-Id``): stored once
                within the topic's duplicate window; a repeat is confirmed with
                the first one's Position, ``duplicate`` set.
            ttl: Time to live (seconds or a timedelta; header ``Nats-TTL``, on
                a topic created with ``allow_msg_ttl=True``): past it a group
                drops the message or dead-letters it (its ``on_expiry``).
            delay: Hold the message back from every group this long after it
                is stored (seconds or a timedelta; header ``Fibril-Delay``, on
                a topic created with ``allow_msg_delay=True``).
            deliver_at: Hold it back until this timezone-aware time (header
                ``Fibril-Deliver-At``).

        Returns:
            A future resolving to the :class:`Position` (or None when no durable
            topic captured the subject), or failing with the server's error.

        Raises:
            ValueError: Bad subject/headers, or larger than the server's max_payload.
            ClientClosedError: The client is closed.
        """
        frame = publish_frame(
            subject, data, key=key, headers=headers, msg_id=msg_id, crc=self._crc, max_payload=self._max_payload, ttl=ttl, delay=delay, deliver_at=deliver_at
        )
        return await self._publish_frame(frame)

    async def _publish_frame(self, frame: bytes) -> asyncio.Future[Position | None]:
        """Sends a validated PUB/HPUB frame; :meth:`publish_async` without the encoding."""
        if self._closed:
            raise self._close_error or ClientClosedError("client closed")
        window = self._window
        assert window is not None, "publish before connect"
        await window.acquire()
        fut: asyncio.Future[Position | None] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda _f: window.release())
        try:
            await self._submit(Request(frame, fut, KIND_PUB, retry=True))
        except BaseException:
            if not fut.done():
                fut.cancel()
            raise
        return fut

    async def publish(
        self,
        subject: str,
        data: Data,
        *,
        key: str | bytes | None = None,
        headers: HeadersArg = None,
        msg_id: str | None = None,
        ttl: Duration | None = None,
        delay: Duration | None = None,
        deliver_at: datetime | None = None,
    ) -> Position | None:
        """Publishes one message and waits for its confirm.

        Many tasks may publish at once; their publishes are pipelined.

        Args:
            subject: Destination subject (no wildcards).
            data: Body; str is encoded as UTF-8.
            key: Partition key (header ``Fibril-Key``): same key, same partition.
            headers: Extra headers.
            msg_id: Producer message id (header ``Nats-Msg-Id``): stored once
                within the topic's duplicate window; a repeat is confirmed with
                the first one's Position, ``duplicate`` set.
            ttl: Time to live (seconds or a timedelta; header ``Nats-TTL``, on
                a topic created with ``allow_msg_ttl=True``): past it a group
                drops the message or dead-letters it (its ``on_expiry``).
            delay: Hold the message back from every group this long after it
                is stored (seconds or a timedelta; header ``Fibril-Delay``, on
                a topic created with ``allow_msg_delay=True``).
            deliver_at: Hold it back until this timezone-aware time (header
                ``Fibril-Deliver-At``).

        Returns:
            Where the message was stored, or None when no durable topic captured
            the subject (it reached only plain subscribers, or nobody).

        Raises:
            ValueError: Bad subject/headers or oversized message.
            FibrilError: The server refused it (for example a full topic).
            ClientClosedError: The client was closed before the confirm.
        """
        fut = await self.publish_async(subject, data, key=key, headers=headers, msg_id=msg_id, ttl=ttl, delay=delay, deliver_at=deliver_at)
        return await fut
