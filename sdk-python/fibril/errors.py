"""Errors raised by the Fibril SDK.

Every error is a :class:`FibrilError` with a stable ``code``. Wire errors map to
the classes generated from the spec's error table (``_errors_gen``, regenerate
with ``python tools/gen_errors.py``); the classes below are raised by the client
itself and never travel on the wire.
"""

from __future__ import annotations

from ._errbase import FibrilError
from ._errors_gen import *  # noqa: F403 - the generated classes are the public error API
from ._errors_gen import ERRORS, NATS_TEXTS
from ._errors_gen import __all__ as _GENERATED
from ._proto import Err, ProtocolError


class ConnectionClosedError(FibrilError):
    """The connection dropped (or was never up) while the request was pending.

    Whether the server acted on the request is unknown; it may be retried.
    """

    code = "connection_closed"
    retriable = True


class ClientClosedError(FibrilError):
    """The client was closed; no further requests are possible."""

    code = "client_closed"


class CorruptMessageError(FibrilError):
    """A delivered message failed its CRC check; its data is never returned.

    Durable deliveries that fail the check are negatively acknowledged so the
    server delivers them again.
    """

    code = "corrupt_message"
    retriable = True


class TLSError(FibrilError):
    """The TLS handshake failed (for example the server certificate is not trusted)."""

    code = "tls_error"


class NotAckableError(FibrilError):
    """The message has no ack handle (it came from a plain, non-durable subscription)."""

    code = "not_ackable"


def error_from_wire(err: Err) -> FibrilError:
    """Returns the typed error for a ``-ERR`` line.

    Args:
        err: The parsed -ERR frame.

    Returns:
        An instance of the generated class for its code (or its NATS text), or a
        plain :class:`FibrilError` carrying the unknown code.
    """
    cls = NATS_TEXTS.get(err.text.lower())
    if cls is not None:
        return cls(err.text)
    if err.code is not None:
        cls = ERRORS.get(err.code)
        if cls is not None:
            return cls(err.message)
        if "_" in err.code:
            return FibrilError(err.message, code=err.code)
    return FibrilError(err.text, code="unknown")


__all__ = [
    "FibrilError",
    "ProtocolError",
    "ConnectionClosedError",
    "ClientClosedError",
    "CorruptMessageError",
    "NotAckableError",
    "TLSError",
    "error_from_wire",
    *_GENERATED,
]
