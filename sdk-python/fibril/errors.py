"""Errors raised by the Fibril SDK.

Every error is a :class:`FibrilError` with a stable ``code``. Wire errors map to
the classes generated from the spec's error table (``_errors_gen``, regenerate
with ``python tools/gen_errors.py``); the classes below are raised by the client
itself and never travel on the wire.
"""

from __future__ import annotations

from ._errbase import FibrilError
from ._errors_gen import *  # noqa: F403 - the generated classes are the public error API
from ._errors_gen import ERRORS, TABLE
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


class TimedOutError(FibrilError, TimeoutError):
    """A blocking call of :mod:`fibril.sync` waited longer than its timeout.

    Also a builtin :class:`TimeoutError`. For a request (publish, ack, ...)
    whether the server acted on it is unknown, as for a dropped connection; the
    client stays usable and a late answer is discarded.
    """

    code = "timed_out"
    retriable = True


def _is_code_word(w: str) -> bool:
    return bool(w) and all(c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in w)


def map_err_text(text: str) -> tuple[str, str]:
    """Maps a -ERR text to ``(code, detail)`` by the rule of SPEC.md section 7.8.

    (1) A first word that is a code of the table is the code; the detail is the
    rest after the table text and an optional ``:``. (2) Else the first row, in
    table order, whose NATS text is a case-insensitive prefix of the text; the
    detail is the rest. (3) Else a first word made of ``a-z 0-9 _`` is an
    (unknown) code with the rest as detail. (4) Else ``unknown``, the whole text
    as detail. Surrounding spaces and one pair of single quotes are stripped.
    """
    t = text.strip()
    if len(t) >= 2 and t[0] == "'" and t[-1] == "'":
        t = t[1:-1].strip()
    word, _, rest = t.partition(" ")
    rest = rest.strip()
    if word in ERRORS:
        table_text = next(tt for c, tt, _ in TABLE if c == word)
        if table_text and rest.startswith(table_text):
            rest = rest[len(table_text) :].lstrip()
            if rest.startswith(":"):
                rest = rest[1:]
        return word, rest.strip()
    low = t.lower()
    for code, _, nats in TABLE:
        if nats and low.startswith(nats.lower()):
            return code, t[len(nats) :].strip()
    if _is_code_word(word):
        return word, rest
    return "unknown", t


def error_from_wire(err: Err) -> FibrilError:
    """Returns the typed error for a ``-ERR`` line.

    Args:
        err: The parsed -ERR frame.

    Returns:
        An instance of the generated class for its code (SPEC.md 7.8 mapping),
        or a plain :class:`FibrilError` carrying an unknown code. ``message`` is
        the text without the code, ``detail`` the context after the table text.
    """
    code, detail = map_err_text(err.text)
    word, _, rest = err.text.partition(" ")
    message = rest if word == code else err.text
    cls = ERRORS.get(code)
    if cls is not None:
        return cls(message, detail=detail)
    return FibrilError(message, code=code, detail=detail)


__all__ = [
    "FibrilError",
    "ProtocolError",
    "ConnectionClosedError",
    "ClientClosedError",
    "CorruptMessageError",
    "NotAckableError",
    "TLSError",
    "TimedOutError",
    "error_from_wire",
    "map_err_text",
    *_GENERATED,
]
