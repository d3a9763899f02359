"""Push subscriptions of the asyncio client (``consume`` and ``subscribe``)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from . import _proto as proto
from ._common import msg_fields
from ._errbase import FibrilError
from .errors import CorruptMessageError
from .message import Msg

if TYPE_CHECKING:
    from .client import Client


def make_msg(frame: proto.Msg, client: Client) -> Msg:
    """Builds a :class:`Msg` from a frame.

    Raises:
        CorruptMessageError: The frame failed its CRC check.
    """
    f = msg_fields(frame)
    return Msg(f.subject, f.data, f.headers, f.header_pairs, f.reply, f.handle, f.crc, client)


class Subscription:
    """A push subscription: a durable group (``consume``) or a plain subject (``subscribe``).

    Iterate with ``async for`` (leaving the loop unsubscribes, except when it
    ends with :class:`CorruptMessageError`: then iterate again to go on) or call
    :meth:`next`. Deliveries buffered when it closes are handed back (NACK).
    The subscription survives reconnects: it is renewed on the new connection,
    and deliveries buffered from the old one are dropped (the server releases
    their leases when a connection closes, so they come again).
    """

    def __init__(self, client: Client, subject: str, group: str | None, max_in_flight: int | None) -> None:
        self._client = client
        self.subject = subject
        self.group = group
        self.max_in_flight = max_in_flight
        self.sid = ""
        self._queue: collections.deque[proto.Msg] = collections.deque()
        # Several tasks may wait in next() at once (a worker pool on one
        # subscription): each delivery wakes one, closing wakes all.
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._started = False
        self._closed = False
        self._error: FibrilError | None = None

    def sub_frame(self) -> bytes:
        """Returns the SUB frame of this subscription."""
        return proto.encode_sub(self.subject, self.sid, queue=self.group, max_inflight=self.max_in_flight)

    def sub_answer(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """Returns a future for the answer to a renewed SUB; a refusal ends the subscription."""
        fut: asyncio.Future[Any] = loop.create_future()

        def done(f: asyncio.Future[Any]) -> None:
            if f.cancelled():
                return
            e = f.exception()
            if isinstance(e, FibrilError) and not e.retriable:
                self._end(e)

        fut.add_done_callback(done)
        return fut

    async def start(self) -> Subscription:
        """Sends the SUB and waits for the server's answer (idempotent).

        Raises:
            FibrilError: The server refused the subscription.
        """
        if not self._started:
            self._started = True
            await self._client._subscribe(self)
        return self

    async def next(self) -> Msg:
        """Waits for and returns the next delivery.

        Raises:
            StopAsyncIteration: The subscription or the client was closed.
            CorruptMessageError: A delivery failed its CRC check (it was handed
                back with NACK); the subscription goes on.
            FibrilError: The subscription ended with this error (for example the
                connection dropped with reconnect off).
        """
        await self.start()
        while not self._queue:
            if self._error is not None:
                raise self._error
            if self._closed:
                raise StopAsyncIteration
            w: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(w)
            try:
                await w
            except BaseException:
                if self._queue:
                    self._wake()  # cancelled after being woken: pass the delivery on
                raise
            finally:
                if not w.done():
                    w.cancel()
                try:
                    self._waiters.remove(w)
                except ValueError:
                    pass
        frame = self._queue.popleft()
        try:
            return make_msg(frame, self._client)
        except CorruptMessageError:
            self._client._stray(frame)
            raise

    def __aiter__(self) -> AsyncIterator[Msg]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Msg]:
        keep = False
        try:
            while True:
                try:
                    msg = await self.next()
                except StopAsyncIteration:
                    return
                except CorruptMessageError:
                    keep = True  # the loop ends, the subscription goes on: iterate again
                    raise
                yield msg
        finally:
            if not keep:
                await self.close()

    async def __aenter__(self) -> Subscription:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Unsubscribes and hands buffered deliveries back to the server. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake(all=True)
        queued, self._queue = list(self._queue), collections.deque()
        for f in queued:
            self._client._stray(f)
        if self._started:
            await self._client._unsubscribe(self)

    # called by the client -------------------------------------------------

    def _push(self, frame: proto.Msg) -> None:
        if self._closed:
            self._client._stray(frame)
            return
        self._queue.append(frame)
        self._wake()

    def _connection_lost(self) -> None:
        # Leases of the old connection are released by the server; the
        # messages will be delivered again on the renewed subscription.
        self._queue = collections.deque(f for f in self._queue if proto.parse_handle(f.reply or "") is None)

    def _end(self, err: FibrilError | None) -> None:
        self._closed = True
        if err is not None and self._error is None:
            self._error = err
        self._wake(all=True)

    def _wake(self, *, all: bool = False) -> None:
        for w in list(self._waiters):
            if not w.done():
                w.set_result(None)
                if not all:
                    return
