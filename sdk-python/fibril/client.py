"""The asyncio Fibril client: connect, publish, consume, fetch, manage.

The connection runs in Fibril mode (``"fibril": 1`` in CONNECT): every command is
answered exactly once, in order, so the client keeps one FIFO of pending
requests and matches each answer to its head. MSG/HMSG for subscriptions, server
PINGs and INFO updates are the only unsolicited frames.

Servers and failover (SPEC.md 11.1): the client holds a list of servers
(``_servers.ServerList``: those given, then those INFO's ``connect_urls``
names) and connects to the first that completes the handshake. When the
connection drops it tries the next one, wrapping around, and backs off after
each full pass over the list. Unconfirmed publishes stay queued and are sent
again on the next connection before anything else, in their original order;
then subscriptions are renewed and waiting POLLs sent again. Other pending
requests (acks, management) fail with :class:`ConnectionClosedError` because
whether the server acted on them is unknown. A publish whose confirm arrived is
durable on the server and is never sent again, so nothing confirmed is lost; an
unconfirmed one may be stored twice (at least once; once with a message id).
A publish answered ``not_leader`` is parked and sent again on the same
connection after a short backoff, holding its place in the publish window.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Awaitable, Generator, Iterable
from typing import Any

from . import _proto as proto
from ._common import (
    CLIENT_MAX_LINE,
    DEFAULT_MAX_UNCONFIRMED,
    KIND_JSON,
    KIND_PLAIN,
    KIND_POLL,
    KIND_PUB,
    PAYLOAD_SLACK,
    Duration,
    Reconnect,
    ack_frames,
    connect_options,
    json_answer,
    max_control_line,
    poll_frame,
    position_from,
    tls_context,
)
from ._acks import AckQueue
from ._conn import _Conn
from ._errbase import FibrilError
from ._manage import _Manage
from ._publish import _Publish
from ._requests import Request, not_leader_wait
from ._servers import ServerList, endpoint_url, no_server_error, parse_servers, refused_for_good
from .errors import ClientClosedError, ConnectionClosedError, ProtocolError, TLSError, error_from_wire
from .message import Msg
from .subscription import Subscription, make_msg

_PLAIN, _PUB, _POLL, _JSON = KIND_PLAIN, KIND_PUB, KIND_POLL, KIND_JSON


async def _done() -> None:
    return None


class Client(_Publish, _Manage):
    """A connection to a Fibril server, failing over between the servers of
    its list (:attr:`servers`). Create it with :func:`connect`.

    All methods must be called from the event loop that connected it.
    """

    def __init__(
        self,
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
    ) -> None:
        if ping_interval <= 0 or max_pings_out < 1:
            raise ValueError("ping_interval must be positive and max_pings_out at least 1")
        if not not_leader_timeout >= 0:
            raise ValueError("not_leader_timeout must not be negative")
        self._ping_interval = ping_interval
        self._max_pings_out = max_pings_out
        self._not_leader_timeout = not_leader_timeout
        self._servers = ServerList(parse_servers(url, servers), discover=discover)
        #: Index in _servers of the server connected to (or last tried).
        self._current = -1
        self._endpoint = self._servers[0]
        self._tls_arg = tls
        self._name = name
        self._token = token
        self._user = user
        self._password = password
        self._crc = crc
        if isinstance(reconnect, bool):
            reconnect = Reconnect(enabled=reconnect)
        self._reconnect = reconnect
        self._connect_timeout = connect_timeout
        self._drain_timeout = drain_timeout
        self._info: dict[str, Any] = {}
        self._conn: _Conn | None = None
        self._pending: collections.deque[Request] = collections.deque()
        self._resend: collections.deque[Request] = collections.deque()
        #: Publishes answered not_leader, waiting out their backoff (in order).
        self._parked: dict[Request, asyncio.TimerHandle] = {}
        self._subs: dict[str, Subscription] = {}
        self._acks = AckQueue(self._send_ack, lambda: max_control_line(self._info))
        self._next_sid = 0
        self._window: asyncio.Semaphore | None = None
        self._max_payload = proto.DEFAULT_MAX_PAYLOAD
        self._connected = asyncio.Event()
        self._opening = False
        self._closed = False
        self._close_error: FibrilError | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._keepalive_task: asyncio.Task[None] | None = None
        #: Number of successful connects (1 after connect; grows on reconnect).
        self.connects = 0

    # ------------------------------------------------------------------
    # lifecycle

    @property
    def server_info(self) -> dict[str, Any]:
        """The latest INFO fields of the server (a copy)."""
        return dict(self._info)

    @property
    def servers(self) -> list[str]:
        """The server list, as URLs without credentials: the addresses given,
        then those learnt from INFO ``connect_urls`` (at most 64 in all)."""
        return self._servers.urls()

    @property
    def server_url(self) -> str:
        """The URL (without credentials) of the server connected to, or last tried."""
        return endpoint_url(self._endpoint)

    @property
    def is_connected(self) -> bool:
        """True while a connection is up and usable."""
        return self._connected.is_set() and not self._closed

    @property
    def max_unconfirmed(self) -> int:
        """The publish window: how many publishes may await their confirm at once."""
        return int(self._info.get("max_unconfirmed") or DEFAULT_MAX_UNCONFIRMED)

    async def _start(self) -> None:
        # One pass, no backoff: the first connect is never retried, so
        # configuration errors surface at once.
        tried: list[tuple[str, FibrilError]] = []
        for i in self._servers.pass_after(-1):
            try:
                await self._open(i)
                return
            except FibrilError as e:
                tried.append((endpoint_url(self._servers[i]), e))
        err = no_server_error(tried)
        if len(tried) == 1:
            raise err
        raise err from tried[-1][1]

    async def _open(self, index: int) -> None:
        """Connects to server ``index`` of the list and replays the session on it.

        Raises:
            ConnectionClosedError: Unreachable, timed out or lost during the handshake.
            TLSError: The TLS handshake failed.
            FibrilError: The server refused the CONNECT or is not a Fibril server.
        """
        loop = asyncio.get_running_loop()
        # Management answers are single JSON lines of any length: the client
        # is lenient about line length (the server's limit protects the server).
        parser = proto.Parser(max_control_line=CLIENT_MAX_LINE, max_json_line=CLIENT_MAX_LINE)
        conn = _Conn(parser, self._on_events, self._on_lost)
        self._opening = True
        self._current = index
        ep = self._endpoint = self._servers[index]
        tls = tls_context(self._tls_arg, ep)
        try:
            await asyncio.wait_for(loop.create_connection(lambda: conn, ep.host, ep.port), self._connect_timeout)
            self._conn = conn
            info = await asyncio.wait_for(asyncio.shield(conn.info), self._connect_timeout)
            self._info = dict(info.fields)
            if not self._info.get("fibril"):
                raise ProtocolError("the server does not speak the Fibril protocol (no fibril in INFO)")
            self._servers.learn(self._info.get("connect_urls"), ep)
            self._max_payload = int(self._info.get("max_payload") or proto.DEFAULT_MAX_PAYLOAD)
            # Slack for headers the server adds (dead-letter headers) to a maximal body.
            parser.max_payload = self._max_payload + PAYLOAD_SLACK
            use_tls = tls is not None or bool(self._info.get("tls_required"))
            if use_tls:
                ctx = tls or ssl.create_default_context()
                assert conn.transport is not None
                t = await asyncio.wait_for(
                    loop.start_tls(conn.transport, conn, ctx, server_hostname=ep.host), self._connect_timeout
                )
                if t is None:
                    raise ConnectionClosedError("TLS handshake failed")
                conn.transport = t
            opts = connect_options(
                name=self._name,
                token=self._token,
                user=self._user,
                password=self._password,
                crc=self._crc,
                tls=use_tls,
                endpoint=ep,
            )
            # The server parses the next frame in CRC mode right after CONNECT;
            # nothing it sends before our CONNECT is a MSG, so flip now.
            parser.crc = self._crc
            fut: asyncio.Future[Any] = loop.create_future()
            self._write_req(conn, Request(proto.encode_connect(opts), fut))
            await asyncio.wait_for(asyncio.shield(fut), self._connect_timeout)
            if self._window is None:
                self._window = asyncio.Semaphore(self.max_unconfirmed)
            # Unconfirmed publishes first, in their original order (SPEC.md
            # 11.1), then the subscriptions, then waiting POLLs: a POLL holds
            # back every later answer while it waits.
            polls = [r for r in self._resend if r.kind == _POLL]
            for r in self._resend:
                if r.kind != _POLL:
                    self._write_req(conn, r)
            self._resend.clear()
            for sub in list(self._subs.values()):
                self._write_req(conn, Request(sub.sub_frame(), sub.sub_answer(loop)))
            for r in polls:
                self._write_req(conn, r)
        except BaseException as e:
            conn.abort()
            if isinstance(e, asyncio.TimeoutError):
                raise ConnectionClosedError(f"connect to {ep.host}:{ep.port} timed out") from None
            if isinstance(e, ssl.SSLError):
                raise TLSError(f"TLS with {ep.host}:{ep.port}: {e}") from e
            if isinstance(e, OSError):
                raise ConnectionClosedError(f"connect to {ep.host}:{ep.port}: {e}") from e
            raise
        finally:
            self._opening = False
        if conn.dead:
            raise ConnectionClosedError("connection lost during handshake")
        self.connects += 1
        self._connected.set()
        if self._keepalive_task is not None:
            self._keepalive_task.cancel()
        self._keepalive_task = loop.create_task(self._keepalive(conn))

    async def _keepalive(self, conn: _Conn) -> None:
        # A connection that stops delivering bytes without closing (a dead
        # peer, a silent network) is only noticed by asking: PING when idle,
        # and drop it after max_pings_out silent intervals so reconnect starts.
        # A waiting POLL legitimately holds back every answer, so silence does
        # not count while one is pending.
        missed = 0
        seen = conn.reads
        while not conn.dead and conn is self._conn:
            await asyncio.sleep(self._ping_interval)
            if conn.dead or conn is not self._conn:
                return
            if conn.reads != seen:
                seen, missed = conn.reads, 0
                continue
            if not any(r.kind == _POLL for r in self._pending):
                missed += 1
                if missed > self._max_pings_out:
                    conn.error = ConnectionClosedError(
                        f"stale connection: no answer to {self._max_pings_out} PINGs"
                    )
                    conn.abort()
                    return
            self._fire(proto.PING)

    async def close(self) -> None:
        """Closes the client.

        Waits (up to ``drain_timeout``) for answers to everything already sent,
        then closes the connection. Subscriptions end; iterators stop. Idempotent.
        """
        if self._closed:
            return
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        if self.is_connected and self._conn is not None:
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._write_req(self._conn, Request(proto.PING, fut))
            try:
                await asyncio.wait_for(fut, self._drain_timeout)
            except (FibrilError, asyncio.TimeoutError):
                pass
        self._shutdown(ClientClosedError("client closed"), graceful=True)

    def _shutdown(self, err: FibrilError, *, graceful: bool = False) -> None:
        self._closed = True
        for t in (self._keepalive_task, self._reconnect_task):
            if t is not None and t is not asyncio.current_task():
                t.cancel()
        self._close_error = err
        conn, self._conn = self._conn, None
        pending = list(self._parked) + list(self._pending) + list(self._resend)
        for timer in self._parked.values():
            timer.cancel()
        self._parked.clear()
        self._pending.clear()
        self._resend.clear()
        for r in pending:
            r.fail(err)
        self._acks.fail_all(err)
        if conn is not None:
            conn.abort()
        for sub in list(self._subs.values()):
            sub._end(None if graceful else err)
        self._subs.clear()
        self._connected.set()  # wake waiters; they see _closed

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------
    # events from the connection

    def _on_events(self, conn: _Conn, events: list[proto.Event]) -> None:
        if conn is not self._conn:
            return
        pending = self._pending
        for ev in events:
            if isinstance(ev, proto.ParseError):
                if ev.frame is None:
                    continue  # a frame we cannot use was skipped; nothing answers it
                ev = ev.frame  # failed its CRC check: deliver it to be refused and handed back
            if isinstance(ev, proto.Msg):
                if ev.sid == "0":
                    if pending and pending[0].kind == _POLL:
                        pending[0].msgs.append(ev)
                    else:
                        self._stray(ev)
                else:
                    sub = self._subs.get(ev.sid)
                    if sub is not None:
                        sub._push(ev)
                    else:
                        self._stray(ev)
            elif isinstance(ev, proto.Ok):
                if not pending:
                    continue  # unsolicited +OK: nothing to answer
                req = pending.popleft()
                try:
                    if req.kind == _PUB:
                        req.resolve(position_from(ev.arg))
                    elif req.kind == _POLL:
                        n = int(ev.arg) if ev.arg.isdigit() else -1
                        if n != len(req.msgs):
                            raise ProtocolError(f"POLL answered +OK {ev.arg!r} after {len(req.msgs)} messages")
                        if req.future is not None and req.future.done():
                            # The caller gave up (cancelled, timed out): hand the
                            # deliveries back now rather than let their leases run.
                            for f in req.msgs:
                                self._stray(f)
                        req.resolve(req.msgs)
                    elif req.kind == _JSON:
                        req.resolve(json_answer(ev.arg))
                    else:
                        req.resolve(ev.arg)
                except ProtocolError as e:
                    req.fail(e)
            elif isinstance(ev, proto.Err):
                err = error_from_wire(ev)
                if err.fatal:
                    # Not an answer (SPEC.md 4): the server closes next. Drop
                    # the connection now; pending requests fail with this error
                    # (or, for publishes, are replayed after reconnect).
                    conn.error = err
                    conn.abort()
                    return
                elif pending:
                    req = pending.popleft()
                    if req.kind == _PUB and err.code == "not_leader":
                        self._park(conn, req, err)
                    else:
                        req.fail(err)
            elif isinstance(ev, proto.Ping):
                conn.write(proto.PONG)
            elif isinstance(ev, proto.Pong):
                if pending:
                    pending.popleft().resolve(None)
            elif isinstance(ev, proto.Info):
                self._info.update(ev.fields)
                self._servers.learn(ev.fields.get("connect_urls"), self._endpoint)

    def _park(self, conn: _Conn, req: Request, err: FibrilError) -> None:
        """Holds a publish answered not_leader and sends it again on ``conn``
        after its backoff (SPEC.md 11.1, 50 ms doubling to 1 s), or fails it
        with ``err`` once ``not_leader_timeout`` has passed since its first
        not_leader answer. It keeps its publish-window token meanwhile, so
        parked publishes are bounded by ``max_unconfirmed``."""
        if req.given_up:
            return  # its window token is already back
        wait = not_leader_wait(req, conn.loop.time(), self._not_leader_timeout)
        if wait is None:
            req.fail(err)
            return
        self._parked[req] = conn.loop.call_later(wait, self._unpark, conn, req)

    def _unpark(self, conn: _Conn, req: Request) -> None:
        if self._parked.pop(req, None) is None:
            return  # moved to _resend by a loss, or failed by close
        if req.given_up:
            return
        if conn is self._conn:
            self._write_req(conn, req)
        else:
            self._resend.append(req)  # not reached: a loss moves parked ones first

    def _stray(self, frame: proto.Msg) -> None:
        # A durable delivery nobody wants any more (closed subscription, POLL
        # that was given up): hand it back at once rather than let its lease run.
        h = proto.parse_handle(frame.reply) if frame.reply else None
        if h is not None:
            self._fire(proto.encode_nack(str(h)))

    def _stray_handle(self, handle: str) -> None:
        """Hands back a delivery by its (valid) handle, not waiting for the answer."""
        self._fire(proto.encode_nack(handle))

    def _on_lost(self, conn: _Conn, err: FibrilError) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._connected.clear()
        self._acks.fail_all(err)
        # Parked publishes were sent before those still pending: they go first.
        for timer in self._parked.values():
            timer.cancel()
        keep = [r for r in self._parked if not r.given_up]
        self._parked.clear()
        keep += [r for r in self._pending if r.retry and not r.given_up]
        for r in self._pending:
            if not r.retry:
                r.fail(err)
            r.msgs.clear()
        self._pending.clear()
        keep.extend(self._resend)
        self._resend = collections.deque(keep)
        for sub in self._subs.values():
            sub._connection_lost()
        if self._closed or self._opening:
            return
        if not self._reconnect.enabled:
            self._shutdown(err)
            return
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_loop(err))

    async def _reconnect_loop(self, err: FibrilError) -> None:
        # A pass tries every server once, starting after the one lost; the
        # backoff grows per failed pass, not per server (SPEC.md 11.1).
        passes = 0
        while not self._closed:
            await asyncio.sleep(self._reconnect.delay(passes))
            tried: list[tuple[str, FibrilError]] = []
            for i in self._servers.pass_after(self._current):
                if self._closed:
                    return
                try:
                    await self._open(i)
                    return
                except FibrilError as e:
                    tried.append((endpoint_url(self._servers[i]), e))
                except OSError as e:
                    tried.append((endpoint_url(self._servers[i]), ConnectionClosedError(str(e))))
            if self._closed:
                return
            err = no_server_error(tried)
            if all(refused_for_good(e) for _, e in tried):
                # Every server refused for good (credentials, TLS trust, not
                # a Fibril server): retrying cannot help.
                self._shutdown(err)
                return
            passes += 1
            if self._reconnect.max_attempts is not None and passes >= self._reconnect.max_attempts:
                self._shutdown(err)
                return

    # ------------------------------------------------------------------
    # requests

    def _write_req(self, conn: _Conn, req: Request) -> None:
        if self._acks:
            self._acks.flush()  # acks queued earlier go first: they were issued first
        conn.write(req.frame)
        self._pending.append(req)

    def _send_ack(self, frame: bytes) -> asyncio.Future[Any]:
        """Writes one ACK line of the ack queue; returns the future of its answer."""
        conn = self._conn
        if self._closed:
            raise self._close_error or ClientClosedError("client closed")
        if conn is None or not self._connected.is_set():
            # The old connection's leases are released: those messages come again.
            raise ConnectionClosedError("not connected: the delivery will come again")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        conn.write(frame)
        self._pending.append(Request(frame, fut))
        return fut

    def _fire(self, frame: bytes) -> None:
        """Sends a request whose answer nobody awaits (best effort)."""
        if self._conn is not None and self._connected.is_set():
            self._write_req(self._conn, Request(frame, None))

    async def _submit(self, req: Request) -> None:
        while True:
            if self._closed:
                raise self._close_error or ClientClosedError("client closed")
            conn = self._conn
            if conn is None or not self._connected.is_set():
                await self._connected.wait()
                continue
            self._write_req(conn, req)
            await conn.drain()
            return

    async def _call(self, frame: bytes, kind: int = _PLAIN, *, retry: bool = False) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._submit(Request(frame, fut, kind, retry))
        return await fut

    async def _settle(self, frame: bytes) -> None:
        await self._call(frame)

    async def ping(self) -> None:
        """Round-trips a PING; when it returns, every earlier command was answered.

        Raises:
            ConnectionClosedError: The connection dropped first.
        """
        await self._call(proto.PING)

    # ------------------------------------------------------------------
    # consume

    def _new_sid(self) -> str:
        self._next_sid += 1
        return str(self._next_sid)

    def consume(self, topic: str, group: str, *, max_in_flight: int | None = None) -> Subscription:
        """Consumes a durable group with push delivery.

        Use as ``async for msg in c.consume(...)`` (leaving the loop ends the
        subscription) or ``async with c.consume(...) as sub`` with ``await sub.next()``.

        Args:
            topic: Durable topic name.
            group: Consumer group (created on first use if the server allows).
            max_in_flight: Most unsettled deliveries at once (None = server default).

        Returns:
            A :class:`Subscription`; the SUB is sent when iteration starts.
        """
        proto.validate_subject(topic)
        proto.validate_group(group)
        return Subscription(self, topic, group, max_in_flight)

    def subscribe(self, subject: str, *, queue: str | None = None) -> Subscription:
        """Subscribes to a subject with plain NATS semantics (no acks, no durability).

        Args:
            subject: Subject filter (wildcards allowed).
            queue: Optional queue group.
        """
        proto.validate_subject(subject, wildcards=True)
        return Subscription(self, subject, queue, None)

    async def _subscribe(self, sub: Subscription) -> str:
        sid = self._new_sid()
        self._subs[sid] = sub
        sub.sid = sid
        try:
            await self._call(sub.sub_frame())
        except BaseException:
            self._subs.pop(sid, None)
            raise
        return sid

    def _unsubscribe(self, sub: Subscription) -> Awaitable[None]:
        """Writes the UNSUB of ``sub`` now (when connected) and returns what
        waits for its answer."""
        if self._subs.pop(sub.sid, None) is None or not self.is_connected or self._conn is None:
            return _done()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._write_req(self._conn, Request(proto.encode_unsub(sub.sid), fut))

        async def answered() -> None:
            try:
                await fut
            except FibrilError:
                pass  # the connection went away: the subscription went with it

        return answered()

    async def fetch(self, topic: str, group: str, max_messages: int = 1, wait: Duration = 0.0) -> list[Msg]:
        """Pulls up to ``max_messages`` ready messages (POLL).

        Waits up to ``wait`` seconds for the first message, then returns what is
        ready. While it waits, answers to later commands on this connection wait
        too (answers are in order).

        Returns:
            The deliveries (possibly none), each to be settled.

        Raises:
            CorruptMessageError: A delivery failed its CRC check; all deliveries of
                this batch were handed back (NACK) and none is returned.
            FibrilError: The server refused (unknown topic, ...).
        """
        frames: list[proto.Msg] = await self._call(
            poll_frame(topic, group, max_messages, wait), _POLL, retry=True
        )
        try:
            return [make_msg(f, self) for f in frames]
        except FibrilError:
            for f in frames:
                self._stray(f)
            raise

    async def ack(self, msgs: Iterable[Msg]) -> None:
        """Acknowledges many messages with as few ACK lines as the server's
        control-line limit allows (pipelined).

        Raises:
            NotAckableError: One of them has no handle.
            FibrilError: The server refused one of them.
        """
        handles = [m._handle() for m in msgs]
        frames = ack_frames(handles, max_control_line(self._info))
        # Pipelined: every line is sent before the first answer is awaited.
        futs = [asyncio.ensure_future(self._call(f)) for f in frames]
        if futs:
            results = await asyncio.gather(*futs, return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    raise r


class _Connect:
    """What :func:`connect` returns: awaitable and an async context manager."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._go().__await__()

    async def _go(self) -> Client:
        await self._client._start()
        return self._client

    async def __aenter__(self) -> Client:
        return await self._go()

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()


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
) -> _Connect:
    """Connects to a Fibril server, or to the first of several that answers.

    Use ``async with connect(url) as c:`` or ``c = await connect(url)`` (then
    ``await c.close()``).

    Servers and failover (SPEC.md 11.1): the addresses are tried in order and
    the first to complete the handshake is used; when none does, the error
    names each address tried. With ``discover`` the ``connect_urls`` of every
    INFO (the client addresses of a cluster's nodes) are added to the end of
    the list, once each, up to 64 addresses in all; they take the scheme, TLS
    and credentials of the URL connected with. After a drop the client tries
    the next server, wrapping around, and backs off (``reconnect``) after
    each full pass over the list. Unconfirmed publishes are sent again first,
    in order, so a confirmed publish is never lost and an unconfirmed one may
    be stored twice (at least once); with a ``msg_id`` it is stored once
    within the topic's duplicate window.

    Args:
        url: ``nats://host:port`` (also ``fibril://``, ``tls://``); credentials
            may be in the URL (``user:pass@`` or ``token@``). Several servers:
            comma-separated URLs (``"nats://a:4222,nats://b:4222"``). Default
            ``nats://127.0.0.1:4222``.
        servers: The servers as a list of URLs (instead of ``url``), each
            with the rules of ``url``.
        discover: Add the servers INFO ``connect_urls`` names to the list.
        name: Connection name shown by the server.
        token: Auth token.
        user: User name (with ``password``).
        password: Password.
        tls: True or an SSLContext to use TLS (``tls://`` implies True).
        crc: Checksum every message both ways (CRC-32).
        reconnect: Reconnect after a drop (True, False or a :class:`Reconnect`).
        connect_timeout: Seconds allowed for TCP connect plus handshake.
        drain_timeout: Seconds ``close`` waits for outstanding answers.
        ping_interval: Seconds between keepalive PINGs on a quiet connection.
        max_pings_out: Silent intervals tolerated before the connection is
            considered dead and dropped (then reconnect starts).
        not_leader_timeout: Seconds a publish answered ``not_leader`` (a
            cluster electing a partition's leader) is sent again, on the same
            connection after a backoff of 50 ms doubling to 1 s, counted from
            its first such answer; then it raises
            :class:`~fibril.errors.NotLeaderError` (retriable). 0 = never
            resend. Other commands answered ``not_leader`` raise it at once.

    Raises:
        ValueError: A bad option, or a bad or empty server address.
        ConnectionClosedError: No server can be reached (the first connect is
            a single pass over the list, not retried); with several servers
            its message names each address and what went wrong there.
        FibrilError: The only server given refused the CONNECT (for example
            bad credentials).
    """
    return _Connect(
        Client(
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
    )
