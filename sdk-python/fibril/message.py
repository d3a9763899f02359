"""The delivered message of the asyncio client and its settle operations."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import _proto as proto
from ._common import Duration, MsgFields, to_ms
from .errors import NotAckableError

if TYPE_CHECKING:
    from .client import Client


@dataclass(frozen=True, slots=True)
class Msg(MsgFields):
    """A message delivered by :meth:`Client.consume`, :meth:`Client.fetch` or
    :meth:`Client.subscribe`.

    Durable deliveries carry an ack handle and must be settled with exactly one of
    :meth:`ack_async` / :meth:`ack`, :meth:`nack` or :meth:`reject` (optionally
    after :meth:`in_progress` calls); unsettled ones are delivered again when
    their lease expires or the connection closes.
    """

    _client: Client | None = field(default=None, repr=False, compare=False)
    # [settle called, settle answered +OK]: mutable state of a frozen value
    _st: list[bool] = field(default_factory=lambda: [False, False], repr=False, compare=False)

    @property
    def delivery_count(self) -> int:
        """How many times this message has been delivered (1 on the first delivery)."""
        h = self.handle
        return h.attempt if h is not None else 1

    @property
    def settling(self) -> bool:
        """True once ack, nack or reject was called on this message (answered or not)."""
        return self._st[0]

    @property
    def settled(self) -> bool:
        """True once the server answered an ack, nack or reject of this message with +OK."""
        return self._st[1]

    def _handle(self) -> str:
        if self._client is None or not self._durable():
            raise NotAckableError(f"message on {self.subject!r} has no ack handle")
        return self.reply  # type: ignore[return-value]  # a handle is the reply

    def ack_async(self) -> asyncio.Future[None]:
        """Acknowledges the message without waiting: the fast path.

        The ACK is queued and written with the other acks of the same burst as
        one line when the event loop next runs (or before the next command),
        so a consumer acking message by message sends one command per burst
        and never waits for the server's commit. Await the returned future (or
        call :meth:`ack`) to wait until the ack is durable; an ack that fails
        and is never awaited is reported by asyncio ("exception was never
        retrieved").

        Returns:
            A future resolving to None once the server committed the ack, or
            failing with its error (:class:`StaleHandleError` when the lease
            expired and the message was redelivered, :class:`ConnectionClosedError`
            when the connection dropped first: the message comes again).

        Raises:
            NotAckableError: The message came from a plain subscription.
        """
        h = self._handle()
        st = self._st
        st[0] = True
        assert self._client is not None
        return self._client._acks.add(h, st)

    async def ack(self) -> None:
        """Acknowledges the message and waits until the server has committed it
        (durable). ``await msg.ack()`` is ``await msg.ack_async()``; acks of
        concurrent tasks still share ACK lines.

        Raises:
            NotAckableError: The message came from a plain subscription.
            StaleHandleError: (generated) The lease expired and it was redelivered.
            ConnectionClosedError: The connection dropped before the answer.
        """
        await self.ack_async()

    async def nack(self, *, delay: Duration | None = None) -> None:
        """Negatively acknowledges the message: deliver it again after ``delay``.

        Args:
            delay: Seconds (or a timedelta) before redelivery (None = at once).

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused (for example a stale handle).
        """
        h = self._handle()
        self._st[0] = True
        assert self._client is not None
        await self._client._settle(proto.encode_nack(h, to_ms(delay, "delay")))
        self._st[1] = True

    async def reject(self) -> None:
        """Rejects the message: it goes to the group's dead-letter topic, never redelivered here.

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused.
        """
        h = self._handle()
        self._st[0] = True
        assert self._client is not None
        await self._client._settle(proto.encode_reject(h))
        self._st[1] = True

    async def in_progress(self, *, extend: Duration | None = None) -> None:
        """Tells the server work is still going on: extends the lease.

        Args:
            extend: New lease length from now, seconds or a timedelta (None =
                the group's lease).

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused (for example the lease already expired).
        """
        h = self._handle()
        assert self._client is not None
        await self._client._settle(proto.encode_extend(h, to_ms(extend, "extend")))
