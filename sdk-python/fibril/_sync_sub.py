"""Deliveries and push subscriptions of the blocking client (:mod:`fibril.sync`).

Each is a thin blocking face of its asyncio counterpart (:class:`fibril.Msg`,
:class:`fibril.Subscription`): every method runs the asyncio one on the
client's loop thread, so settling, crediting, renewal after reconnect and
hand-back on close behave exactly as in the asyncio client.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import message as _amessage
from . import subscription as _asubscription
from ._common import MsgFields
from .errors import ClientClosedError, CorruptMessageError, NotAckableError

if TYPE_CHECKING:
    from .sync import Client


@dataclass(frozen=True, slots=True)
class Msg(MsgFields):
    """A delivery of :meth:`Client.fetch`, :meth:`Client.consume` or
    :meth:`Client.subscribe`; each settle method blocks until the server answers.

    Durable deliveries carry an ack handle and must be settled with exactly one
    of :meth:`ack`, :meth:`nack` or :meth:`reject` (optionally after
    :meth:`in_progress` calls); unsettled ones come again when their lease
    expires or the connection closes. Any thread may settle it.
    """

    _client: Client | None = field(default=None, repr=False, compare=False)
    _msg: _amessage.Msg | None = field(default=None, repr=False, compare=False)

    @property
    def delivery_count(self) -> int:
        """How many times this message has been delivered (1 on the first delivery)."""
        h = self.handle
        return h.attempt if h is not None else 1

    def _parts(self) -> tuple[Client, _amessage.Msg]:
        if self._client is None or self._msg is None or not self._durable():
            raise NotAckableError(f"message on {self.subject!r} has no ack handle")
        return self._client, self._msg

    def ack(self) -> None:
        """Acknowledges the message: it is done and never delivered again.

        Raises:
            NotAckableError: The message came from a plain subscription.
            StaleHandleError: (generated) The lease expired and it was redelivered.
            ConnectionClosedError: The connection dropped before the answer.
            TimedOutError: No answer within the client's ``timeout``.
        """
        c, m = self._parts()
        c._run(m.ack())

    def nack(self, *, delay: float | None = None) -> None:
        """Asks for redelivery after ``delay`` seconds (None = at once).

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused (for example a stale handle).
        """
        c, m = self._parts()
        c._run(m.nack(delay=delay))

    def reject(self) -> None:
        """Dead-letters the message (the group's dead-letter topic), never redelivered here.

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused.
        """
        c, m = self._parts()
        c._run(m.reject())

    def in_progress(self, *, extend: float | None = None) -> None:
        """Extends the lease (by ``extend`` seconds from now, None = the group's lease).

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused (for example the lease already expired).
        """
        c, m = self._parts()
        c._run(m.in_progress(extend=extend))


def wrap(m: _amessage.Msg, client: Client) -> Msg:
    """Returns the blocking face of an asyncio delivery."""
    return Msg(m.subject, m.data, m.headers, m.header_pairs, m.reply, m.crc, client, m)


async def _next_or_none(sub: _asubscription.Subscription) -> _amessage.Msg | None:
    # StopAsyncIteration must not cross the thread boundary as an exception
    # (a future refuses StopIteration and friends); None means "ended".
    try:
        return await sub.next()
    except StopAsyncIteration:
        return None


class Subscription:
    """A blocking push subscription: a durable group (:meth:`Client.consume`)
    or a plain subject (:meth:`Client.subscribe`).

    Iterate with ``for msg in sub`` (leaving the loop unsubscribes, except when
    it ends with :class:`CorruptMessageError`: then iterate again to go on), or
    use ``with ... as sub`` and :meth:`next` with an optional timeout. Several
    threads may call :meth:`next` on one subscription (a worker pool): each
    delivery goes to one of them. It survives reconnects (renewed on the new
    connection; deliveries buffered from the old one are dropped and come
    again). Buffered deliveries are handed back (NACK) when it closes.
    """

    def __init__(self, client: Client, sub: _asubscription.Subscription) -> None:
        self._client = client
        self._sub = sub

    @property
    def subject(self) -> str:
        """The topic (``consume``) or subject filter (``subscribe``)."""
        return self._sub.subject

    @property
    def group(self) -> str | None:
        """The consumer group (``consume``) or queue group (``subscribe``), if any."""
        return self._sub.group

    @property
    def max_in_flight(self) -> int | None:
        """Most unsettled deliveries at once (None = the server's default)."""
        return self._sub.max_in_flight

    def start(self) -> Subscription:
        """Sends the SUB and waits for the server's answer (idempotent).

        Raises:
            FibrilError: The server refused the subscription.
            TimedOutError: No answer within the client's ``timeout``.
        """
        self._client._run(self._sub.start())
        return self

    def next(self, timeout: float | None = None) -> Msg:
        """Blocks until the next delivery and returns it (subscribing first if needed).

        Args:
            timeout: Seconds to wait (None = until a delivery or the end).

        Raises:
            StopIteration: The subscription or the client was closed.
            TimedOutError: Nothing arrived within ``timeout`` (the subscription goes on).
            CorruptMessageError: A delivery failed its CRC check (it was handed
                back with NACK); the subscription goes on.
            FibrilError: The subscription ended with this error (for example the
                connection dropped with reconnect off).
        """
        if self._client._loop.stopped:
            raise StopIteration
        try:
            m = self._client._run(_next_or_none(self._sub), timeout=timeout)
        except ClientClosedError:
            raise StopIteration from None
        if m is None:
            raise StopIteration
        return wrap(m, self._client)

    def __iter__(self) -> Generator[Msg, None, None]:
        return self._iterate()

    def _iterate(self) -> Generator[Msg, None, None]:
        keep = False
        try:
            while True:
                try:
                    msg = self.next()
                except StopIteration:
                    return
                except CorruptMessageError:
                    keep = True  # the loop ends, the subscription goes on: iterate again
                    raise
                yield msg
        finally:
            if not keep:
                self.close()

    def __enter__(self) -> Subscription:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Unsubscribes and hands buffered deliveries back to the server.

        Idempotent; does nothing once the client is closed (that ended it).
        Threads blocked in :meth:`next` see StopIteration.
        """
        if self._client._loop.stopped:
            return
        try:
            self._client._run(self._sub.close())
        except ClientClosedError:
            pass
