"""Push subscriptions of the asyncio client (``consume`` and ``subscribe``)."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import _proto as proto
from ._common import _EMPTY, Duration, msg_fields, to_ms
from ._errbase import FibrilError
from .errors import CorruptMessageError
from .message import Msg

if TYPE_CHECKING:
    from .client import Client

_log = logging.getLogger("fibril")


def make_msg(frame: proto.Msg, client: Client) -> Msg:
    """Builds a :class:`Msg` from a frame.

    Raises:
        CorruptMessageError: The frame failed its CRC check.
        ProtocolError: The header block is malformed.
    """
    if frame.header is None and frame.crc_ok:  # the common case, without the MsgFields step
        return Msg(frame.subject, frame.payload, _EMPTY, (), frame.reply, frame.crc, client, [False, False])
    f = msg_fields(frame)
    return Msg(f.subject, f.data, f.headers, f.header_pairs, f.reply, f.crc, client, [False, False])


#: What Subscription.run calls for each message.
Handler = Callable[[Msg], Awaitable[object]]


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
        if not self._started:
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

    async def run(
        self,
        handler: Handler,
        *,
        concurrency: int = 1,
        nack_delay: Duration | None = None,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> None:
        """Runs ``handler`` for every message until the subscription closes:
        the handler-style consumer (Go's ``Consume``).

        A message the handler did not settle is acked when it returns (with
        :meth:`Msg.ack_async`: batched, never waiting for the server's commit)
        and nacked (after ``nack_delay``) when it raises. Every ack is answered
        before ``run`` returns. To stop, call :meth:`close` (from a signal
        handler, say): no new message is handed out, buffered ones go back to
        the server at once, running handlers finish. Cancelling the task that
        runs ``run`` cancels the running handlers too; their messages are
        handed back.

        Args:
            handler: ``async def handler(msg)``; raise to have it nacked.
            concurrency: How many handlers run at once.
            nack_delay: Redelivery delay after a handler raised (seconds or a
                timedelta; None = at once).
            on_error: Receives what does not stop consuming: handler
                exceptions, failed acks, corrupt deliveries (default: logged
                on the ``fibril`` logger).

        Raises:
            ValueError: ``concurrency`` < 1 or a bad ``nack_delay``.
            FibrilError: The subscription ended with this error.
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        delay_ms = to_ms(nack_delay, "nack_delay")
        report = on_error or (lambda e: _log.warning("fibril: consumer error: %r", e))
        acks: set[asyncio.Future[None]] = set()

        def acked(f: asyncio.Future[None]) -> None:
            acks.discard(f)
            if not f.cancelled() and f.exception() is not None:
                report(f.exception())  # type: ignore[arg-type]

        async def worker() -> None:
            while True:
                try:
                    msg = await self.next()
                except StopAsyncIteration:
                    return
                except CorruptMessageError as e:
                    report(e)  # already handed back
                    continue
                try:
                    await handler(msg)
                except asyncio.CancelledError:
                    if not msg.settling and msg._durable():
                        self._client._stray_handle(msg.reply)  # type: ignore[arg-type]
                    raise
                except Exception as e:
                    report(e)
                    if not msg.settling and msg._durable():
                        try:
                            await msg.nack(delay=None if delay_ms is None else delay_ms / 1000)
                        except FibrilError as ne:
                            report(ne)
                    continue
                if not msg.settling and msg._durable():
                    f = msg.ack_async()
                    acks.add(f)
                    f.add_done_callback(acked)

        await self.start()
        tasks = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.close()
            if acks:
                await asyncio.wait(list(acks))
        if self._error is not None:
            raise self._error

    def __aiter__(self) -> AsyncIterator[Msg]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Msg]:
        keep = False
        try:
            while True:
                queue = self._queue
                if queue and not self._closed:
                    frame = queue[0]
                    if frame.header is None and frame.crc_ok:  # next() without its coroutine
                        queue.popleft()
                        yield make_msg(frame, self._client)
                        continue
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
        # UNSUB is written before the hand-backs (NACKs), so the server does
        # not push them to this subscription again; what it pushes meanwhile
        # is handed back by _push.
        unsub = self._client._unsubscribe(self) if self._started else None
        queued, self._queue = list(self._queue), collections.deque()
        for f in queued:
            self._client._stray(f)
        if unsub is not None:
            await unsub

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
