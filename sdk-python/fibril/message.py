"""The delivered message of the asyncio client and its settle operations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import _proto as proto
from ._common import MsgFields, to_ms
from .errors import NotAckableError

if TYPE_CHECKING:
    from .client import Client


@dataclass(frozen=True, slots=True)
class Msg(MsgFields):
    """A message delivered by :meth:`Client.consume`, :meth:`Client.fetch` or
    :meth:`Client.subscribe`.

    Durable deliveries carry an ack handle and must be settled with exactly one of
    :meth:`ack`, :meth:`nack` or :meth:`reject` (optionally after
    :meth:`in_progress` calls); unsettled ones are delivered again when their
    lease expires or the connection closes.
    """

    _client: Client | None = field(default=None, repr=False, compare=False)

    @property
    def delivery_count(self) -> int:
        """How many times this message has been delivered (1 on the first delivery)."""
        return self.handle.attempt if self.handle is not None else 1

    def _handle(self) -> str:
        if self.handle is None or self._client is None:
            raise NotAckableError(f"message on {self.subject!r} has no ack handle")
        return str(self.handle)

    async def ack(self) -> None:
        """Acknowledges the message: it is done and never delivered again.

        Blocks until the server answers. Acking twice with the same handle is fine.

        Raises:
            NotAckableError: The message came from a plain subscription.
            StaleHandleError: (generated) The lease expired and it was redelivered.
            ConnectionClosedError: The connection dropped before the answer.
        """
        h = self._handle()
        assert self._client is not None
        await self._client._settle(proto.encode_ack([h]))

    async def nack(self, *, delay: float | None = None) -> None:
        """Negatively acknowledges the message: deliver it again after ``delay`` seconds.

        Args:
            delay: Seconds before redelivery (None = the server's default, at once).

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused (for example a stale handle).
        """
        h = self._handle()
        assert self._client is not None
        await self._client._settle(proto.encode_nack(h, to_ms(delay, "delay")))

    async def reject(self) -> None:
        """Rejects the message: it goes to the group's dead-letter topic, never redelivered here.

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused.
        """
        h = self._handle()
        assert self._client is not None
        await self._client._settle(proto.encode_reject(h))

    async def in_progress(self, *, extend: float | None = None) -> None:
        """Tells the server work is still going on: extends the lease.

        Args:
            extend: New lease length in seconds from now (None = the group's lease).

        Raises:
            NotAckableError: The message came from a plain subscription.
            FibrilError: The server refused (for example the lease already expired).
        """
        h = self._handle()
        assert self._client is not None
        await self._client._settle(proto.encode_extend(h, to_ms(extend, "extend")))
