"""One TCP (or TLS) connection of the asyncio client: an asyncio.Protocol that
feeds the sans-I/O parser and coalesces writes.

A ``_Conn`` knows nothing of requests or subscriptions: it hands parsed events
and its own loss to its owner (the ``Client``) through two callbacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from . import _proto as proto
from ._errbase import FibrilError
from .errors import ConnectionClosedError


class _Conn(asyncio.Protocol):
    """An asyncio protocol around :class:`fibril._proto.Parser`.

    Writes are gathered in a list and flushed once per event-loop iteration, so
    many pipelined publishes cost one ``send`` syscall.
    """

    def __init__(
        self,
        parser: proto.Parser,
        on_events: Callable[[_Conn, list[proto.Event]], None],
        on_lost: Callable[[_Conn, FibrilError], None],
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.parser = parser
        self._on_events = on_events
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.info: asyncio.Future[proto.Info] = self.loop.create_future()
        self.error: FibrilError | None = None  # a fatal -ERR or parse error seen
        self.dead = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._paused = False
        self._drain: list[asyncio.Future[None]] = []
        #: Incremented on every read; the keepalive compares it between ticks.
        self.reads = 0

    # asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.dead:
            return
        self.reads += 1
        try:
            events = self.parser.feed(data)
        except proto.ProtocolError as e:
            # Frames before the violation are still answers: hand them over,
            # then drop the connection (the stream cannot be resynchronised).
            self._on_events(self, e.events)
            self.error = e
            self.abort()
            return
        for ev in events:
            if isinstance(ev, proto.Info) and not self.info.done():
                self.info.set_result(ev)
        self._on_events(self, events)

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.mark_dead(exc)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drainers()

    # owner API ------------------------------------------------------------

    def mark_dead(self, exc: BaseException | None = None) -> None:
        """Marks the connection lost (idempotent) and tells the owner once."""
        if self.dead:
            return
        self.dead = True
        err = self.error
        if err is None:
            err = ConnectionClosedError(f"connection lost: {exc}" if exc else "connection closed by server")
        if not self.info.done():
            self.info.set_exception(err)
            self.info.exception()  # retrieved: nobody may be waiting any more
        self._wake_drainers()
        if self.transport is not None:
            self.transport.abort()
        self._on_lost(self, err)

    def abort(self) -> None:
        """Closes the connection at once and reports its loss."""
        if self.transport is not None:
            self.transport.abort()
        self.mark_dead(None)

    def write(self, frame: bytes) -> None:
        """Queues ``frame``; it is sent at the end of this loop iteration."""
        if self.dead:
            return
        self._out.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hands every queued frame to the transport now."""
        self._flush_scheduled = False
        if not self._out or self.dead or self.transport is None:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self.transport.write(data)

    async def drain(self) -> None:
        """Waits while the transport's write buffer is above its high-water mark."""
        while self._paused and not self.dead:
            f: asyncio.Future[None] = self.loop.create_future()
            self._drain.append(f)
            await f

    def _wake_drainers(self) -> None:
        ws, self._drain = self._drain, []
        for f in ws:
            if not f.done():
                f.set_result(None)
