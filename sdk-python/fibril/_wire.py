"""Wire-level value rules of SPEC.md: subjects, group names, ack handles, header
blocks, settle bodies, numbers. Pure functions, no I/O.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._errbase import FibrilError

CRLF = b"\r\n"
HEADER_VERSION = b"NATS/1.0"

#: Largest count argument (SUB max-inflight, UNSUB max-msgs, POLL max).
MAX_COUNT = 2147483647
#: Largest milliseconds argument (wait-ms, delay-ms, EXTEND ms).
MAX_MILLIS = 4294967295

#: Header carrying the partition key of a published message.
HEADER_KEY = "Fibril-Key"
#: Header carrying the producer's message id (de-duplication; NATS's name).
HEADER_MSG_ID = "Nats-Msg-Id"


class ProtocolError(FibrilError):
    """The peer sent bytes that break the wire grammar; the connection is unusable.

    Attributes:
        wire_code: The error-table code of the violation (``bad_frame``,
            ``max_payload``, ``max_control_line``, ``invalid_connect``, ...).
        events: Events of the frames parsed before the violation, in order.
    """

    code = "protocol_error"
    fatal = True

    def __init__(self, message: str = "", *, wire_code: str = "bad_frame") -> None:
        super().__init__(message)
        self.wire_code = wire_code
        #: Events of the frames parsed before the violation (set by the parser).
        self.events: list[Any] = []


# ---------------------------------------------------------------------------
# Subjects and names (SPEC.md section 6)

# Subject bytes are 0x21-0x7E or >= 0x80: no space, tab, control character or DEL.
_SUBJECT_BAD = re.compile(rb"[\x00-\x20\x7f]")
_GROUP_RE = re.compile(rb"[A-Za-z0-9_-]{1,255}")


@functools.lru_cache(maxsize=4096)
def subject_error(subject: bytes, *, wildcards: bool) -> str | None:
    """Returns the error code for a subject, or None when it is valid.

    Args:
        subject: The subject bytes.
        wildcards: Whether the context allows ``*`` and ``>`` tokens.

    Results are cached (subjects repeat; this runs for every frame).

    Returns:
        ``invalid_subject`` (syntax), ``wildcard_not_allowed`` (a well-formed
        wildcard where none may be), or None.
    """
    if not subject or _SUBJECT_BAD.search(subject):
        return "invalid_subject"
    if not subject.isascii():
        try:
            subject.decode("utf-8")  # names must round-trip byte for byte
        except UnicodeDecodeError:
            return "invalid_subject"
    toks = subject.split(b".")
    wild = False
    last = len(toks) - 1
    for i, t in enumerate(toks):
        if not t:
            return "invalid_subject"
        if t == b"*" or t == b">":
            if t == b">" and i != last:
                return "invalid_subject"
            wild = True
        elif b"*" in t or b">" in t:
            return "invalid_subject"
    if wild and not wildcards:
        return "wildcard_not_allowed"
    return None


def validate_subject(subject: str, *, wildcards: bool = False) -> None:
    """Checks a subject (or topic name) against SPEC.md section 6.

    Raises:
        ValueError: The subject is not valid; the message starts with the code
            the server would answer (``invalid_subject`` or ``wildcard_not_allowed``).
    """
    code = subject_error(subject.encode("utf-8", "surrogateescape"), wildcards=wildcards)
    if code is not None:
        raise ValueError(f"{code}: subject {subject!r}")


def group_ok(group: bytes) -> bool:
    """Reports whether ``group`` is a valid durable group name (1-255 of ``A-Za-z0-9_-``)."""
    return _GROUP_RE.fullmatch(group) is not None


def validate_group(group: str) -> None:
    """Checks a durable group name.

    Raises:
        ValueError: The name is not 1-255 characters from ``A-Z a-z 0-9 _ -``.
    """
    if not group_ok(group.encode("utf-8", "surrogateescape")):
        raise ValueError(f"invalid_name: group {group!r} (1-255 characters from A-Z a-z 0-9 _ -)")


def validate_token(kind: str, tok: str) -> None:
    """Checks a free-form token (sid, queue group): non-empty, no space or control byte.

    Raises:
        ValueError: The token is empty or has a space or control character.
    """
    if not tok or _SUBJECT_BAD.search(tok.encode("utf-8", "surrogateescape")):
        raise ValueError(f"invalid {kind} {tok!r}")


# ---------------------------------------------------------------------------
# Ack handles (SPEC.md section 9)


@dataclass(frozen=True, slots=True)
class Handle:
    """An ack handle ``$F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>``.

    Attributes:
        topic: Server-assigned topic id.
        group: Server-assigned group id.
        partition: Partition number.
        seq: Sequence of the message in its partition.
        attempt: Delivery count, starting at 1.
    """

    topic: int
    group: int
    partition: int
    seq: int
    attempt: int

    def __str__(self) -> str:
        return f"$F.{self.topic}.{self.group}.{self.partition}.{self.seq}.{self.attempt}"


_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1


_NUM = r"(0|[1-9][0-9]{0,19})"
_HANDLE_RE = re.compile(rf"\$F\.{_NUM}\.{_NUM}\.{_NUM}\.{_NUM}\.{_NUM}", re.ASCII)


def parse_handle(s: str) -> Handle | None:
    """Parses an ack handle (canonical decimal, numbers in range).

    Returns:
        The handle, or None when ``s`` is not a well-formed Fibril ack handle.
    """
    m = _HANDLE_RE.fullmatch(s)
    if m is None:
        return None
    t, g, p, q, a = (int(x) for x in m.groups())
    if not (1 <= t <= _U64 and 1 <= g <= _U64 and p <= _U32 and 1 <= q <= _U64 and 1 <= a <= _U32):
        return None
    return Handle(t, g, p, q, a)


# ---------------------------------------------------------------------------
# Header blocks (SPEC.md section 12)

HeaderPairs = list[tuple[str, str]]


def header_ok(block: bytes) -> bool:
    """Reports whether a header block is well-formed: ``NATS/1.0`` (optionally a
    space and a status), CRLF, lines, and an empty line at the end."""
    if len(block) < 12 or not block.startswith(HEADER_VERSION) or not block.endswith(b"\r\n\r\n"):
        return False
    nxt = block[len(HEADER_VERSION) : len(HEADER_VERSION) + 1]
    return nxt in (b"\r", b" ")


def encode_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """Encodes header pairs as a ``NATS/1.0`` header block.

    Raises:
        ValueError: A key is empty or has ``:``/whitespace, or a value has CR/LF.
    """
    out = [HEADER_VERSION, CRLF]
    for k, v in pairs:
        kb = k.encode()
        if not kb or b":" in kb or _SUBJECT_BAD.search(kb):
            raise ValueError(f"invalid header name {k!r}")
        if "\r" in v or "\n" in v:
            raise ValueError(f"header {k!r} value contains CR or LF")
        out += (kb, b": ", v.encode(), CRLF)
    out.append(CRLF)
    return b"".join(out)


def decode_headers(block: bytes) -> tuple[int | None, str, HeaderPairs]:
    """Decodes a ``NATS/1.0`` header block.

    Returns:
        ``(status, description, pairs)``: the inline status code (None when absent),
        its description, and the header pairs in order.

    Raises:
        ProtocolError: The block does not start with ``NATS/1.0``.
    """
    lines = block.split(b"\r\n")
    first = lines[0]
    if not first.startswith(HEADER_VERSION):
        raise ProtocolError("header block does not start with NATS/1.0", wire_code="invalid_header")
    status: int | None = None
    desc = ""
    tail = first[len(HEADER_VERSION) :].strip()
    if tail:
        code, _, d = tail.partition(b" ")
        if code.isdigit():
            status = int(code)
            desc = d.decode("utf-8", "replace").strip()
    pairs: HeaderPairs = []
    for ln in lines[1:]:
        if not ln:
            continue
        k, sep, v = ln.partition(b":")
        if not sep:
            continue
        pairs.append((k.decode("utf-8", "replace").strip(), v.decode("utf-8", "replace").strip()))
    return status, desc, pairs


# ---------------------------------------------------------------------------
# Settle bodies published to a handle (SPEC.md section 9.3)


def parse_ack_body(body: bytes) -> tuple[str, int] | None:
    """Parses the body of a PUB to an ack handle.

    Returns:
        ``(kind, delay_ns)`` with kind ``ack``, ``nak``, ``progress`` or ``term``;
        None for a body that is none of them (``invalid_ack``).
    """
    b = body.strip(b" \t\r\n")
    if b in (b"", b"+ACK"):
        return "ack", 0
    if b == b"+WPI":
        return "progress", 0
    if b == b"+TERM" or b.startswith(b"+TERM "):
        return "term", 0
    if b == b"-NAK":
        return "nak", 0
    if b.startswith(b"-NAK ") or b.startswith(b"-NAK\t"):
        try:
            obj = json.loads(b[4:])
        except ValueError:
            return None
        if not isinstance(obj, dict) or set(obj) != {"delay"}:
            return None
        d = obj["delay"]
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            return None
        return "nak", d
    return None
