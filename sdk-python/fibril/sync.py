"""The blocking Fibril client, for scripts and thread-based code.

It is the asyncio client (:class:`fibril.Client`) run on a private event loop
in a daemon thread: every method hands its asyncio twin to that loop and blocks
until it ends, so both clients share one implementation of the protocol,
reconnect, keepalive, push credit and shutdown. No asyncio knowledge is needed.

Example::

    from fibril.sync import connect

    with connect("nats://127.0.0.1:4222") as c:
        c.publish("jobs", b"work")
        for msg in c.consume("jobs", "workers", max_in_flight=8):
            handle(msg.data)
            msg.ack()

A ``Client`` may be shared by threads: calls from many threads are pipelined
on its one connection. Close it (or use ``with``) to stop its thread.
"""

from __future__ import annotations

import concurrent.futures
import ssl
import threading
from collections.abc import Coroutine, Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from . import client as _aclient
from ._common import Data, Duration, HeadersArg, Position, Reconnect, publish_frame
from ._loop import LoopThread
from ._sync_sub import Msg, Subscription, wrap
from .errors import ClientClosedError, TimedOutError

T = TypeVar("T")

__all__ = ["Client", "Msg", "Subscription", "connect"]

_DEFAULT: Any = object()  # "the client's timeout" (None means no limit)


async def _confirm(ac: _aclient.Client, frame: bytes) -> Position | None:
    return await (await ac._publish_frame(frame))


class Client:
    """A blocking connection to a Fibril server. Create it with :func:`connect`.

    Every method blocks the calling thread only; the connection lives on the
    client's own loop thread, which also reconnects and answers keepalives
    while no method is running.
    """

    def __init__(self, loop: LoopThread, aclient: _aclient.Client, timeout: float | None) -> None:
        self._loop = loop
        self._ac = aclient
        self._timeout = timeout
        # The publish window on the callers' side (the asyncio client has its
        # own, as large): publish_async blocks here, not on the loop.
        self._window = threading.BoundedSemaphore(aclient.max_unconfirmed)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = _DEFAULT) -> T:
        return self._loop.run(coro, self._timeout if timeout is _DEFAULT else timeout)

    # ------------------------------------------------------------------
    # lifecycle

    @property
    def server_info(self) -> dict[str, Any]:
        """The latest INFO fields of the server (a copy)."""
        return self._ac.server_info

    @property
    def servers(self) -> list[str]:
        """The server list as URLs without credentials: given, then discovered."""
        return self._ac.servers

    @property
    def server_url(self) -> str:
        """The URL (without credentials) of the server connected to, or last tried."""
        return self._ac.server_url

    @property
    def is_connected(self) -> bool:
        """True while a connection is up and usable (False while reconnecting or closed)."""
        return self._ac.is_connected

    @property
    def connects(self) -> int:
        """Number of successful connects (1 after connect; grows on every reconnect)."""
        return self._ac.connects

    @property
    def max_unconfirmed(self) -> int:
        """The publish window: how many publishes may await their confirm at once."""
        return self._ac.max_unconfirmed

    def close(self) -> None:
        """Closes the client and stops its thread.

        Waits (up to ``drain_timeout``) for answers to everything already sent,
        then closes the connection: subscriptions end (iterators stop, blocked
        :meth:`Subscription.next` calls raise StopIteration) and calls still
        waiting fail with ClientClosedError. Idempotent; safe from any thread.
        """
        if self._loop.stopped:
            return
        try:
            self._run(self._ac.close(), None)
        except Exception:
            pass  # closing anyway; close() itself never fails
        finally:
            self._loop.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> None:
        """Round-trips a PING; when it returns, every earlier command was answered.

        Raises:
            ConnectionClosedError: The connection dropped first.
            TimedOutError: No answer within ``timeout``.
        """
        self._run(self._ac.ping())

    # ------------------------------------------------------------------
    # publish

    def publish(
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

        While the client reconnects the publish waits (up to ``timeout``) and
        is sent on the new connection; an unconfirmed one is sent again after a
        drop, so it may be stored twice (set ``msg_id``).

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
            Where it was stored, or None when no durable topic captured it.

        Raises:
            ValueError: Bad subject/headers or oversized message.
            FibrilError: The server refused it.
            TimedOutError: No confirm within ``timeout`` (it may still be stored).
            ClientClosedError: The client was closed first.
        """
        return self._run(self._ac.publish(subject, data, key=key, headers=headers, msg_id=msg_id, ttl=ttl, delay=delay, deliver_at=deliver_at))

    def publish_async(
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
    ) -> concurrent.futures.Future[Position | None]:
        """Sends a publish and returns a future of its confirm (pipelined publishing).

        Blocks only while the publish window (INFO ``max_unconfirmed``) is full.
        The future cannot be cancelled (the publish is on its way); its
        ``result()`` is the :class:`Position` or None, or raises the server's error.

        Raises:
            ValueError: Bad subject/headers or oversized message.
            TimedOutError: The window stayed full for ``timeout``.
            ClientClosedError: The client is closed.
        """
        # Encoded (and so validated) here, so bad arguments raise at once; the
        # send is handed to the loop without waiting for it, so one thread can
        # keep the whole window in flight.
        ac = self._ac
        frame = publish_frame(
            subject, data, key=key, headers=headers, msg_id=msg_id, crc=ac._crc, max_payload=ac._max_payload, ttl=ttl, delay=delay, deliver_at=deliver_at
        )
        if self._loop.stopped:
            raise ClientClosedError("client closed")
        if not self._window.acquire(timeout=self._timeout):
            raise TimedOutError(f"the publish window stayed full for {self._timeout} s")
        try:
            fut = self._loop.submit(_confirm(ac, frame))
        except BaseException:
            self._window.release()
            raise
        fut.add_done_callback(lambda _f: self._window.release())
        return fut

    # ------------------------------------------------------------------
    # consume

    def consume(self, topic: str, group: str, *, max_in_flight: int | None = None) -> Subscription:
        """Consumes a durable group with push delivery (SUB with credit).

        Use as ``for msg in c.consume(...)`` (leaving the loop unsubscribes) or
        ``with c.consume(...) as sub`` and ``sub.next(timeout=...)``. Settle
        every delivery with ``msg.ack()``, ``nack()`` or ``reject()``.

        Args:
            topic: Durable topic name.
            group: Consumer group (created on first use if the server allows).
            max_in_flight: Most unsettled deliveries at once (None = server default).

        Returns:
            A :class:`Subscription`; the SUB is sent when iteration (or ``with``) starts.

        Raises:
            ValueError: Bad topic or group name.
        """
        return Subscription(self, self._ac.consume(topic, group, max_in_flight=max_in_flight))

    def subscribe(self, subject: str, *, queue: str | None = None) -> Subscription:
        """Subscribes to a subject with plain NATS semantics (no acks, no durability).

        Args:
            subject: Subject filter (wildcards allowed).
            queue: Optional queue group.

        Raises:
            ValueError: Bad subject.
        """
        return Subscription(self, self._ac.subscribe(subject, queue=queue))

    def fetch(self, topic: str, group: str, max_messages: int = 1, wait: Duration = 0.0) -> list[Msg]:
        """Pulls up to ``max_messages`` ready messages, waiting up to ``wait`` seconds for the first.

        Raises:
            CorruptMessageError: A delivery failed its CRC check (the batch is
                handed back with NACK, none is returned).
            FibrilError: The server refused.
            TimedOutError: No answer within ``wait`` plus ``timeout`` (deliveries
                that arrive later are handed back).
        """
        secs = wait.total_seconds() if isinstance(wait, timedelta) else wait
        t = None if self._timeout is None else self._timeout + max(secs, 0.0)
        msgs = self._run(self._ac.fetch(topic, group, max_messages, wait), t)
        return [wrap(m, self) for m in msgs]

    def ack(self, msgs: Iterable[Msg]) -> None:
        """Acknowledges many messages in as few ACK lines as fit (pipelined).

        Raises:
            NotAckableError: One of them has no handle.
            FibrilError: The server refused one of them.
        """
        self._run(self._ac.ack([m._parts()[1] for m in msgs]))

    # ------------------------------------------------------------------
    # manage (SPEC.md section 10); options as in fibril.Client

    def create_topic(self, name: str, **config: Any) -> Any:
        """Creates a durable topic; options as in :meth:`fibril.Client.create_topic`."""
        return self._run(self._ac.create_topic(name, **config))

    def topic_info(self, name: str) -> Any:
        """Returns the JSON info of a topic."""
        return self._run(self._ac.topic_info(name))

    def list_topics(self) -> Any:
        """Returns the JSON list of topics."""
        return self._run(self._ac.list_topics())

    def delete_topic(self, name: str) -> Any:
        """Deletes a topic and its data."""
        return self._run(self._ac.delete_topic(name))

    def requeue(self, topic: str, **options: Any) -> Any:
        """Moves dead letters back; options as in :meth:`fibril.Client.requeue`."""
        return self._run(self._ac.requeue(topic, **options))

    def create_group(self, topic: str, group: str, **config: Any) -> Any:
        """Creates a consumer group; options as in :meth:`fibril.Client.create_group`."""
        return self._run(self._ac.create_group(topic, group, **config))

    def group_info(self, topic: str, group: str) -> Any:
        """Returns the JSON info of a group."""
        return self._run(self._ac.group_info(topic, group))

    def list_groups(self, topic: str) -> Any:
        """Returns the JSON list of a topic's groups."""
        return self._run(self._ac.list_groups(topic))

    def delete_group(self, topic: str, group: str) -> Any:
        """Deletes a consumer group."""
        return self._run(self._ac.delete_group(topic, group))


def connect(
    url: str | None = None,
    *,
    servers: Iterable[str] | str | None = None,
    discover: bool = True,
    name: str | None = None,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
    tls: bool | ssl.SSLContext | None = None,
    crc: bool = True,
    reconnect: bool | Reconnect = True,
    connect_timeout: float = 5.0,
    drain_timeout: float = 5.0,
    ping_interval: float = 30.0,
    max_pings_out: int = 2,
    not_leader_timeout: float = 10.0,
    timeout: float | None = 30.0,
) -> Client:
    """Connects and performs the Fibril handshake; returns a blocking :class:`Client`.

    Options are those of :func:`fibril.connect` plus ``timeout``; servers,
    discovery and failover work as described there (SPEC.md 11.1).

    Args:
        url: ``nats://host:port`` (also ``fibril://``, ``tls://``); credentials
            may be in the URL. Several servers: comma-separated URLs, tried in
            order. Default ``nats://127.0.0.1:4222``.
        servers: The servers as a list of URLs (instead of ``url``).
        discover: Add the servers INFO ``connect_urls`` names to the list
            (once each, up to 64 in all).
        reconnect: Reconnect after a drop (True, False or a :class:`fibril.Reconnect`),
            trying the next server, backing off after each full pass over the
            list; the first connect is a single pass, never retried.
        connect_timeout: Seconds allowed for TCP connect plus handshake.
        drain_timeout: Seconds ``close`` waits for outstanding answers.
        ping_interval: Seconds between keepalive PINGs on a quiet connection.
        max_pings_out: Silent intervals tolerated before the connection is dropped.
        not_leader_timeout: Seconds a publish answered ``not_leader`` is sent
            again (50 ms doubling to 1 s) before it raises NotLeaderError; a
            ``timeout`` that ends first raises TimedOutError instead.
        timeout: Seconds any blocking request (publish, ack, management, ...)
            waits for its answer, reconnect time included; None = no limit.
            ``Subscription.next`` takes its own timeout.

    Raises:
        ValueError: A bad option, or a bad or empty server address.
        ConnectionClosedError: No server can be reached (with several, the
            message names each address tried).
        FibrilError: The server refused the CONNECT (for example bad credentials).
    """
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive (or None)")
    loop = LoopThread("fibril-sync")

    async def open_client() -> _aclient.Client:
        # Built on the loop thread: its asyncio objects belong to that loop.
        c = _aclient.Client(
            url,
            servers=servers,
            discover=discover,
            name=name,
            token=token,
            user=user,
            password=password,
            tls=tls,
            crc=crc,
            reconnect=reconnect,
            connect_timeout=connect_timeout,
            drain_timeout=drain_timeout,
            ping_interval=ping_interval,
            max_pings_out=max_pings_out,
            not_leader_timeout=not_leader_timeout,
        )
        await c._start()
        return c

    try:
        ac = loop.run(open_client())
    except BaseException:
        loop.stop()
        raise
    return Client(loop, ac, timeout)
