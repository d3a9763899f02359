"""Sans-I/O core of the Fibril wire protocol (SPEC.md): parse and encode.

Everything here is pure: bytes in, typed events out, and back. No sockets, no
asyncio, no threads. The asyncio client (``client``) and the sync client
(``sync``) both drive the one :class:`Parser` defined here.

The parser is incremental: :meth:`Parser.feed` takes whatever arrived, returns
the complete frames as events, and keeps a partial frame for the next call. It
checks an announced payload size against the limit before waiting for the
payload, and verifies the CRC-32 of MSG/HMSG frames when CRC mode is on.
"""

from __future__ import annotations

import enum
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Union

from ._errbase import FibrilError

CRLF = b"\r\n"
HEADER_VERSION = b"NATS/1.0"

#: Default maximum payload before the server's INFO announces its own.
DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024
#: Longest control line accepted from the server (INFO can be long).
DEFAULT_MAX_LINE = 1024 * 1024

#: Header carrying the partition key of a published message.
HEADER_KEY = "Fibril-Key"
#: Header carrying the producer's message id (for de-duplication).
HEADER_MSG_ID = "Fibril-Msg-Id"


class ProtocolError(FibrilError):
    """The peer sent bytes that break the wire grammar; the connection is unusable."""

    code = "protocol_error"
    fatal = True


class State(enum.Enum):
    """Parser states, named like the Go parser's."""

    #: Waiting for (the rest of) a control line.
    OP_START = "OP_START"
    #: A MSG/HMSG control line was read; waiting for its payload and CRLF.
    MSG_PAYLOAD = "MSG_PAYLOAD"


# ---------------------------------------------------------------------------
# Events (server -> client frames)


@dataclass(frozen=True, slots=True)
class Info:
    """An ``INFO {json}`` frame.

    Attributes:
        fields: The decoded JSON object.
    """

    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Msg:
    """A ``MSG`` or ``HMSG`` frame.

    Attributes:
        subject: Subject the message was published to.
        sid: Subscription id (``"0"`` for POLL deliveries).
        reply: Reply-to slot (the ack handle for durable deliveries), or None.
        header: Raw header block (``NATS/1.0\\r\\n...\\r\\n\\r\\n``) or None for MSG.
        payload: Message body.
        crc: CRC-32 announced on the control line, or None when CRC mode is off.
        crc_ok: False when the announced CRC does not match the bytes received.
    """

    subject: str
    sid: str
    reply: str | None
    header: bytes | None
    payload: bytes
    crc: int | None
    crc_ok: bool


@dataclass(frozen=True, slots=True)
class Ok:
    """A ``+OK [arg]`` line. ``arg`` is the rest of the line ("" when bare)."""

    arg: str


@dataclass(frozen=True, slots=True)
class Err:
    """A ``-ERR '<text>'`` line.

    Attributes:
        code: The snake_case code (first word of a Fibril error), or None when
            the text does not start with one (a NATS text).
        message: The text after the code (the whole text when ``code`` is None).
        text: The whole text between the quotes.
    """

    code: str | None
    message: str
    text: str


@dataclass(frozen=True, slots=True)
class Ping:
    """A ``PING`` line."""


@dataclass(frozen=True, slots=True)
class Pong:
    """A ``PONG`` line."""


Event = Union[Info, Msg, Ok, Err, Ping, Pong]

_CODE_RE = re.compile(r"[a-z][a-z0-9_]*")


def parse_err_text(text: str) -> Err:
    """Splits a -ERR text into code and message.

    Args:
        text: The text between the quotes of a ``-ERR`` line.

    Returns:
        An :class:`Err` whose ``code`` is the first word when it is lowercase
        snake_case (a Fibril error starts with its code), else None (a NATS text
        such as ``Authorization Violation``). Deciding whether that word is a
        known code is the error table's job (``errors.error_from_wire``).
    """
    word, _, rest = text.partition(" ")
    if _CODE_RE.fullmatch(word):
        return Err(code=word, message=rest, text=text)
    return Err(code=None, message=text, text=text)


def _parse_size(tok: bytes) -> int:
    # bytes.isdigit is ASCII-only; int() alone would accept "+1", " 1" and "1_0".
    if not tok or len(tok) > 12 or not tok.isdigit():
        raise ProtocolError(f"bad size {tok!r}")
    return int(tok)


def _parse_crc(tok: bytes) -> int | None:
    if tok == b"-":
        return None
    if len(tok) != 8 or tok.lower() != tok:
        raise ProtocolError(f"bad crc token {tok!r}")
    try:
        return int(tok, 16)
    except ValueError:
        raise ProtocolError(f"bad crc token {tok!r}") from None


class Parser:
    """Incremental parser of server-to-client frames.

    Args:
        crc: Start in CRC mode (MSG/HMSG lines carry a final CRC token). The owner
            flips :attr:`crc` when it sends a CONNECT that turns CRC on.
        max_payload: Largest payload accepted; the owner raises it from INFO.
        max_line: Longest control line accepted.

    The parser is not thread-safe; one owner feeds it.
    """

    def __init__(
        self,
        *,
        crc: bool = False,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self.crc = crc
        self.max_payload = max_payload
        self.max_line = max_line
        self.state = State.OP_START
        self._buf = bytearray()
        self._scan = 0  # where the next search for LF starts
        # Pending MSG/HMSG control line while in MSG_PAYLOAD.
        self._msg: tuple[str, str, str | None, int, int, int | None] | None = None

    def buffered(self) -> int:
        """Returns how many received bytes are held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Consumes received bytes and returns the complete frames as events.

        Args:
            data: Bytes as they arrived; any split point is fine.

        Returns:
            The events of every frame completed by ``data``, in order.

        Raises:
            ProtocolError: The bytes break the grammar or a limit. The parser
                must not be fed again afterwards.
        """
        buf = self._buf
        buf += data
        events: list[Event] = []
        pos = 0
        n = len(buf)
        while pos < n:
            if self.state is State.MSG_PAYLOAD:
                assert self._msg is not None
                subject, sid, reply, hdr, total, crc = self._msg
                # The body is followed by CRLF, or a bare LF (SPEC.md section 2).
                if n - pos < total + 1:
                    break
                end = pos + total
                term = buf[end]
                if term == 0x0D:
                    if n - pos < total + 2:
                        break
                    if buf[end + 1] != 0x0A:
                        raise ProtocolError("payload not followed by CRLF")
                    after = end + 2
                elif term == 0x0A:
                    after = end + 1
                else:
                    raise ProtocolError("payload not followed by CRLF")
                body = bytes(buf[pos:end])
                crc_ok = True
                if crc is not None:
                    crc_ok = zlib.crc32(body) == crc
                header = body[:hdr] if hdr >= 0 else None
                payload = body[hdr:] if hdr >= 0 else body
                events.append(Msg(subject, sid, reply, header, payload, crc, crc_ok))
                pos = after
                self._msg = None
                self.state = State.OP_START
                self._scan = pos
                continue
            nl = buf.find(b"\n", max(self._scan, pos))
            if nl < 0:
                self._scan = n
                if n - pos > self.max_line:
                    raise ProtocolError("control line too long")
                break
            if nl - pos > self.max_line:
                raise ProtocolError("control line too long")
            end = nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl
            line = bytes(buf[pos:end])
            pos = nl + 1
            self._scan = pos
            ev = self._line(line)
            if ev is not None:
                events.append(ev)
        if pos:
            del buf[:pos]
            self._scan = max(0, self._scan - pos)
        return events

    def _line(self, line: bytes) -> Event | None:
        verb, _, rest = line.lstrip(b" \t").partition(b" ")
        if b"\t" in verb:
            verb, _, more = verb.partition(b"\t")
            rest = more + b" " + rest if rest else more
        v = verb.upper()
        if v == b"MSG":
            self._msg_line(rest, header=False)
            return None
        if v == b"HMSG":
            self._msg_line(rest, header=True)
            return None
        if v == b"+OK":
            return Ok(rest.strip(b" \t").decode("utf-8", "replace"))
        if v == b"-ERR":
            text = rest.strip(b" \t")
            if len(text) >= 2 and text[:1] == b"'" and text[-1:] == b"'":
                text = text[1:-1]
            return parse_err_text(text.decode("utf-8", "replace"))
        if v == b"PING":
            return Ping()
        if v == b"PONG":
            return Pong()
        if v == b"INFO":
            try:
                fields = json.loads(rest)
            except ValueError as e:
                raise ProtocolError(f"bad INFO json: {e}") from None
            if not isinstance(fields, dict):
                raise ProtocolError("INFO json is not an object")
            return Info(fields)
        if not v:
            return None  # an empty line is tolerated, as NATS does
        raise ProtocolError(f"unknown operation {verb[:32]!r}")

    def _msg_line(self, rest: bytes, *, header: bool) -> None:
        args = rest.split()
        crc: int | None = None
        if self.crc:
            if not args:
                raise ProtocolError("MSG without arguments")
            crc = _parse_crc(args.pop())
        need = 4 if header else 3
        if len(args) == need:
            reply: str | None = None
        elif len(args) == need + 1:
            reply = args.pop(2).decode("utf-8", "replace")
        else:
            raise ProtocolError(f"wrong number of {'HMSG' if header else 'MSG'} arguments")
        subject = args[0].decode("utf-8", "replace")
        sid = args[1].decode("utf-8", "replace")
        if header:
            hdr = _parse_size(args[2])
            total = _parse_size(args[3])
            if hdr > total:
                raise ProtocolError("header size larger than total size")
        else:
            hdr = -1
            total = _parse_size(args[2])
        if total > self.max_payload:
            raise ProtocolError(f"payload of {total} bytes exceeds maximum {self.max_payload}")
        self._msg = (subject, sid, reply, hdr, total, crc)
        self.state = State.MSG_PAYLOAD


# ---------------------------------------------------------------------------
# Subjects, handles, headers

# Subject bytes are 0x21-0x7E or >= 0x80: no space, tab, control character or DEL.
_SUBJECT_BAD = re.compile(r"[\x00-\x20\x7f]")
_GROUP_RE = re.compile(r"[A-Za-z0-9_-]{1,255}")


def validate_subject(subject: str, *, wildcards: bool = False) -> None:
    """Checks a subject (or topic name) against SPEC.md section 6.

    Args:
        subject: The subject to check.
        wildcards: Allow ``*`` and ``>`` tokens (subscription filters).

    Raises:
        ValueError: The subject is empty, has a space or control character or an
            empty token, a wildcard inside a token, ``>`` not last, or a wildcard
            where none is allowed.
    """
    if not subject:
        raise ValueError("empty subject")
    if _SUBJECT_BAD.search(subject):
        raise ValueError(f"subject {subject!r} contains a space or control character")
    toks = subject.split(".")
    for i, t in enumerate(toks):
        if not t:
            raise ValueError(f"subject {subject!r} has an empty token")
        if t in ("*", ">"):
            if not wildcards:
                raise ValueError(f"subject {subject!r} has a wildcard")
            if t == ">" and i != len(toks) - 1:
                raise ValueError(f"subject {subject!r}: '>' must be the last token")
        elif "*" in t or ">" in t:
            raise ValueError(f"subject {subject!r}: a wildcard must be a whole token")


def validate_group(group: str) -> None:
    """Checks a durable group name: 1-255 characters from ``A-Z a-z 0-9 _ -``.

    Raises:
        ValueError: The name is not valid.
    """
    if not _GROUP_RE.fullmatch(group):
        raise ValueError(f"invalid group name {group!r}: 1-255 characters from A-Z a-z 0-9 _ -")


def _validate_name(kind: str, name: str) -> None:
    if not name or _SUBJECT_BAD.search(name):
        raise ValueError(f"invalid {kind} {name!r}")


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
# (minimum, maximum) of topic, group, partition, seq, attempt (SPEC.md 9.1).
_HANDLE_RANGES = ((1, _U64), (1, _U64), (0, _U32), (1, _U64), (1, _U32))


def parse_handle(s: str) -> Handle | None:
    """Parses an ack handle (canonical decimal, numbers in range, SPEC.md 9.1).

    Args:
        s: A reply-to subject.

    Returns:
        The handle, or None when ``s`` is not a well-formed Fibril ack handle.
    """
    parts = s.split(".")
    if len(parts) != 6 or parts[0] != "$F":
        return None
    nums: list[int] = []
    for p, (lo, hi) in zip(parts[1:], _HANDLE_RANGES):
        if not p or len(p) > 20 or not (p.isascii() and p.isdigit()) or (p[0] == "0" and len(p) > 1):
            return None
        v = int(p)
        if not lo <= v <= hi:
            return None
        nums.append(v)
    return Handle(*nums)


HeaderPairs = list[tuple[str, str]]


def encode_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """Encodes header pairs as a ``NATS/1.0`` header block.

    Raises:
        ValueError: A key is empty or has ``:``/whitespace, or a value has CR/LF.
    """
    out = [HEADER_VERSION, CRLF]
    for k, v in pairs:
        if not k or ":" in k or _SUBJECT_BAD.search(k):
            raise ValueError(f"invalid header name {k!r}")
        if "\r" in v or "\n" in v:
            raise ValueError(f"header {k!r} value contains CR or LF")
        out += (k.encode(), b": ", v.encode(), CRLF)
    out.append(CRLF)
    return b"".join(out)


def decode_headers(block: bytes) -> tuple[int | None, str, HeaderPairs]:
    """Decodes a ``NATS/1.0`` header block.

    Args:
        block: The raw header block of an HMSG.

    Returns:
        ``(status, description, pairs)``: the inline status code (None when absent),
        its description, and the header pairs in order.

    Raises:
        ProtocolError: The block does not start with ``NATS/1.0``.
    """
    lines = block.split(b"\r\n")
    first = lines[0]
    if not first.startswith(HEADER_VERSION):
        raise ProtocolError("header block does not start with NATS/1.0")
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
# Encoders (client -> server)


def crc_token(body: bytes) -> bytes:
    """Returns the CRC-32 IEEE of ``body`` as 8 lowercase hex digits."""
    return b"%08x" % zlib.crc32(body)


def encode_connect(options: Mapping[str, Any]) -> bytes:
    """Encodes ``CONNECT {json}``."""
    return b"CONNECT " + json.dumps(dict(options), separators=(",", ":")).encode() + CRLF


def encode_pub(
    subject: str,
    payload: bytes,
    *,
    reply: str | None = None,
    header: bytes | None = None,
    crc: bool = False,
) -> bytes:
    """Encodes a PUB (or HPUB when ``header`` is given) frame.

    Args:
        subject: Destination subject (not validated here; see validate_subject).
        payload: Body.
        reply: Optional reply-to subject.
        header: Optional raw header block from :func:`encode_headers`.
        crc: Append the CRC token of header+payload (CRC mode).

    Returns:
        The whole frame, control line through trailing CRLF.
    """
    subj = subject.encode()
    parts: list[bytes] = []
    if header is None:
        parts += (b"PUB ", subj)
        if reply:
            parts += (b" ", reply.encode())
        parts.append(b" %d" % len(payload))
        if crc:
            parts += (b" ", crc_token(payload))
        parts += (CRLF, payload, CRLF)
    else:
        parts += (b"HPUB ", subj)
        if reply:
            parts += (b" ", reply.encode())
        parts.append(b" %d %d" % (len(header), len(header) + len(payload)))
        if crc:
            parts += (b" ", b"%08x" % zlib.crc32(payload, zlib.crc32(header)))
        parts += (CRLF, header, payload, CRLF)
    return b"".join(parts)


def encode_sub(subject: str, sid: str, *, queue: str | None = None, max_inflight: int | None = None) -> bytes:
    """Encodes ``SUB <subject> [group] <sid> [max-inflight]``.

    Raises:
        ValueError: ``max_inflight`` is given without a group, or is not positive.
    """
    parts = [b"SUB ", subject.encode()]
    if queue:
        parts += (b" ", queue.encode())
    parts += (b" ", sid.encode())
    if max_inflight is not None:
        if not queue:
            raise ValueError("max_inflight needs a group")
        if max_inflight <= 0:
            raise ValueError("max_inflight must be positive")
        parts.append(b" %d" % max_inflight)
    parts.append(CRLF)
    return b"".join(parts)


def encode_unsub(sid: str, max_msgs: int | None = None) -> bytes:
    """Encodes ``UNSUB <sid> [max-msgs]``."""
    if max_msgs is None:
        return b"UNSUB " + sid.encode() + CRLF
    return b"UNSUB %s %d\r\n" % (sid.encode(), max_msgs)


PING = b"PING\r\n"
PONG = b"PONG\r\n"


def _ms(seconds: float, what: str) -> int:
    if seconds < 0:
        raise ValueError(f"{what} must not be negative")
    return int(round(seconds * 1000))


def encode_ack(handles: Iterable[str]) -> bytes:
    """Encodes ``ACK <handle> [<handle> ...]``.

    Raises:
        ValueError: No handles were given.
    """
    hs = [h.encode() for h in handles]
    if not hs:
        raise ValueError("ACK needs at least one handle")
    return b"ACK " + b" ".join(hs) + CRLF


def encode_nack(handle: str, delay: float | None = None) -> bytes:
    """Encodes ``NACK <handle> [<delay-ms>]``; ``delay`` is in seconds."""
    if delay is None:
        return b"NACK " + handle.encode() + CRLF
    return b"NACK %s %d\r\n" % (handle.encode(), _ms(delay, "delay"))


def encode_reject(handle: str) -> bytes:
    """Encodes ``REJECT <handle>``."""
    return b"REJECT " + handle.encode() + CRLF


def encode_extend(handle: str, duration: float | None = None) -> bytes:
    """Encodes ``EXTEND <handle> [<ms>]``; ``duration`` is in seconds."""
    if duration is None:
        return b"EXTEND " + handle.encode() + CRLF
    return b"EXTEND %s %d\r\n" % (handle.encode(), _ms(duration, "duration"))


def encode_poll(topic: str, group: str, max_messages: int, wait: float | None = None) -> bytes:
    """Encodes ``POLL <topic> <group> <max> [<wait-ms>]``; ``wait`` is in seconds.

    Raises:
        ValueError: ``max_messages`` is not positive or a name is invalid.
    """
    validate_subject(topic)
    validate_group(group)
    if max_messages <= 0:
        raise ValueError("max_messages must be positive")
    if wait is None:
        return b"POLL %s %s %d\r\n" % (topic.encode(), group.encode(), max_messages)
    return b"POLL %s %s %d %d\r\n" % (topic.encode(), group.encode(), max_messages, _ms(wait, "wait"))


def encode_manage(noun: str, verb: str, *args: str, config: Mapping[str, Any] | None = None) -> bytes:
    """Encodes a management command such as ``TOPIC CREATE <name> [<json>]``.

    Args:
        noun: ``TOPIC`` or ``GROUP``.
        verb: ``CREATE``, ``INFO``, ``LIST`` or ``DELETE``.
        *args: Names (topic, group).
        config: Optional JSON object appended as the rest of the line.

    Raises:
        ValueError: A name is empty or contains whitespace.
    """
    parts = [noun.encode(), verb.encode()]
    for a in args:
        _validate_name("name", a)
        parts.append(a.encode())
    if config:
        parts.append(json.dumps(dict(config), separators=(",", ":")).encode())
    return b" ".join(parts) + CRLF


def parse_position(arg: str) -> tuple[int, int] | None:
    """Parses the argument of a publish confirm ``+OK <partition>:<seq>``.

    Returns:
        ``(partition, seq)``, or None for ``+OK -`` / bare ``+OK`` (not captured
        by a durable topic).

    Raises:
        ProtocolError: The argument is neither ``-`` nor ``<int>:<int>``.
    """
    if arg in ("", "-"):
        return None
    p, sep, s = arg.partition(":")
    if not sep or not p.isdigit() or not s.isdigit():
        raise ProtocolError(f"bad publish confirm {arg!r}")
    return int(p), int(s)
