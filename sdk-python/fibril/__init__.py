"""Fibril: a Python client for the Fibril message broker.

Asyncio first::

    import fibril

    async with fibril.connect("nats://127.0.0.1:4222") as c:
        pos = await c.publish("orders", b"hello", key="customer-7")
        async for msg in c.consume("orders", "billing", max_in_flight=32):
            msg.ack_async()  # batched with its burst; `await msg.ack()` waits until durable

A blocking client (the same client run on a loop thread) is in :mod:`fibril.sync`.
"""

from ._common import Position, Reconnect
from ._proto import Handle
from .client import Client, connect
from .errors import (
    ClientClosedError,
    ConnectionClosedError,
    CorruptMessageError,
    FibrilError,
    NotAckableError,
    ProtocolError,
    TimedOutError,
    TLSError,
)
from .message import Msg
from .subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    "Client",
    "ClientClosedError",
    "ConnectionClosedError",
    "CorruptMessageError",
    "FibrilError",
    "Handle",
    "Msg",
    "NotAckableError",
    "Position",
    "ProtocolError",
    "Reconnect",
    "Subscription",
    "TLSError",
    "TimedOutError",
    "connect",
]
