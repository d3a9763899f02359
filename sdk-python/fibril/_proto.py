"""Sans-I/O core of the Fibril wire protocol (SPEC.md): the incremental parser.

Everything here is pure: bytes in, typed events out. No sockets, no asyncio, no
threads. The asyncio client (``client``) and the sync client (``sync``) both
drive the one :class:`Parser` defined here; the encoders live in ``_encode`` and
the value rules (subjects, handles, headers) in ``_wire``, both re-exported here.

The parser reads either direction (what a client reads, or what a server reads;
the SDK uses the first, the conformance vectors exercise both). It consumes
whole frames and keeps a partial one for the next :meth:`Parser.feed`. Errors
follow SPEC.md section 13: a fatal one raises :class:`ProtocolError` (the stream
cannot be resynchronised); a non-fatal one skips exactly the offending frame and
is returned in order as a :class:`ParseError` event.
"""

from __future__ import annotations

import enum
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

from ._encode import (
    PING,
    PONG,
    crc_token,
    encode_ack,
    encode_connect,
    encode_err,
    encode_extend,
    encode_info,
    encode_manage,
    encode_msg,
    encode_nack,
    encode_ok,
    encode_poll,
    encode_pub,
    encode_reject,
    encode_sub,
    encode_unsub,
)
from ._wire import (
    CRLF,
    HEADER_KEY,
    HEADER_MSG_ID,
    MAX_COUNT,
    MAX_MILLIS,
    Handle,
    HeaderPairs,
    ProtocolError,
    decode_headers,
    encode_headers,
    group_ok,
    header_ok,
    parse_ack_body,
    parse_handle,
    subject_error,
    validate_group,
    validate_subject,
    validate_token,
)

__all__ = [
    "CRLF", "HEADER_KEY", "HEADER_MSG_ID", "MAX_COUNT", "MAX_MILLIS", "PING", "PONG",
    "Command", "Direction", "Err", "Event", "Handle", "HeaderPairs", "Info", "Msg", "Ok",
    "ParseError", "Parser", "Ping", "Pong", "ProtocolError", "State",
    "crc_token", "decode_headers", "encode_ack", "encode_connect", "encode_err", "encode_extend",
    "encode_headers", "encode_info", "encode_manage", "encode_msg", "encode_nack", "encode_ok",
    "encode_poll", "encode_pub", "encode_reject", "encode_sub", "encode_unsub", "group_ok",
    "header_ok", "parse_ack_body", "parse_err_text", "parse_handle", "parse_position",
    "subject_error", "validate_group", "validate_subject", "validate_token",
    "DEFAULT_MAX_CONTROL_LINE", "DEFAULT_MAX_JSON_LINE", "DEFAULT_MAX_PAYLOAD",
]

#: Longest control line, line end excluded (SPEC.md section 14).
DEFAULT_MAX_CONTROL_LINE = 4096
#: Longest line carrying JSON: INFO, CONNECT, TOPIC, GROUP, +OK.
DEFAULT_MAX_JSON_LINE = 1048576
MAX_U32 = (1 << 32) - 1
MAX_U64 = (1 << 64) - 1

#: Largest body (header block + payload), as NATS's default.
DEFAULT_MAX_PAYLOAD = 1024 * 1024


class Direction(enum.Enum):
    """Which side's frames a parser reads."""

    #: What a client reads: INFO, MSG, HMSG, +OK, -ERR, PING, PONG.
    SERVER_TO_CLIENT = "server_to_client"
    #: What a server reads: CONNECT, PUB, HPUB, SUB, ... (tests and vectors).
    CLIENT_TO_SERVER = "client_to_server"


class State(enum.Enum):
    """Parser states."""

    #: Waiting for (the rest of) a control line.
    OP_START = "OP_START"
    #: A PUB/HPUB/MSG/HMSG control line was read; waiting for its body and line end.
    MSG_PAYLOAD = "MSG_PAYLOAD"


# ---------------------------------------------------------------------------
# Events


@dataclass(frozen=True, slots=True)
class Info:
    """An ``INFO {json}`` frame: ``fields`` decoded, ``json`` as sent."""

    fields: Mapping[str, Any]
    json: str = ""


class Msg(NamedTuple):
    """A ``MSG`` or ``HMSG`` frame (server to client). A named tuple, not a
    frozen dataclass like the other events: it is made once per delivery, and
    a tuple is three times cheaper to make.

    Attributes:
        subject: Subject the message was published to.
        sid: Subscription id (``"0"`` for POLL deliveries).
        reply: Reply-to slot (the ack handle for durable deliveries), or None.
        header: Raw header block or None for MSG.
        payload: Message body.
        crc: CRC-32 announced on the control line, or None outside CRC mode.
        crc_ok: False when the announced CRC does not match the bytes received
            (then the frame arrives inside a ``crc_mismatch`` :class:`ParseError`).
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
    """A ``+OK [arg]`` line; ``arg`` is the rest of the line ("" when bare)."""

    arg: str


@dataclass(frozen=True, slots=True)
class Err:
    """A ``-ERR '<text>'`` line.

    Attributes:
        code: The first word when it is lowercase snake_case (a Fibril error
            starts with its code), else None (a NATS text).
        message: The text after the code (the whole text when ``code`` is None).
        text: The whole text, quotes removed.
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


@dataclass(frozen=True, slots=True)
class Command:
    """A client-to-server command (what a server reads).

    ``op`` is the verb as the Go ``Op.String()`` writes it (``PUB``, ``TOPIC
    CREATE``, ...); unused fields keep their defaults.
    """

    op: str
    subject: str = ""
    reply: str = ""
    group: str = ""
    sid: str = ""
    header: bytes | None = None
    payload: bytes = b""
    crc: int | None = None
    has_crc: bool = False
    max: int = 0
    millis: int = 0
    handles: tuple[str, ...] = ()
    json: str = ""


@dataclass(frozen=True, slots=True)
class ParseError:
    """A non-fatal error: the offending frame was consumed and skipped.

    Attributes:
        code: Error-table code (``crc_mismatch``, ``invalid_subject``, ...).
        detail: Context for people.
        frame: For a MSG/HMSG that failed its CRC check, the frame itself (so a
            client can hand the delivery back); else None.
    """

    code: str
    detail: str = ""
    frame: Msg | None = field(default=None, compare=False)


Event = Union[Info, Msg, Ok, Err, Ping, Pong, Command, ParseError]


def parse_err_text(text: str) -> Err:
    """Splits a -ERR text into code (first word, if lowercase snake_case) and message."""
    word, _, rest = text.partition(" ")
    if word and word[0].isascii() and word[0].islower() and all(c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in word):
        return Err(code=word, message=rest, text=text)
    return Err(code=None, message=text, text=text)


def parse_position(arg: str) -> tuple[int, int, bool] | None:
    """Parses the text of a publish confirm: ``<partition>:<seq>``, the same
    followed by `` duplicate`` (the third item: a duplicate of a message
    stored there), or ``-`` (not stored: returns None). Surrounding spaces
    are ignored.

    Raises:
        ProtocolError: Anything else (``invalid_args``), including a bare ``+OK``.
    """
    t = arg.strip(" \t")
    if t == "-":
        return None
    dup = False
    if " " in t:
        t, _, mark = t.partition(" ")
        if mark.strip(" \t") != "duplicate":
            raise ProtocolError(f"bad publish confirm {arg!r}", wire_code="invalid_args")
        dup = True
    p, sep, s = t.partition(":")
    if not sep or not (p.isascii() and p.isdigit() and s.isascii() and s.isdigit()):
        raise ProtocolError(f"bad publish confirm {arg!r}", wire_code="invalid_args")
    part, seq = int(p), int(s)
    if part > MAX_U32 or seq > MAX_U64:
        raise ProtocolError(f"publish confirm {arg!r} out of range", wire_code="invalid_args")
    return part, seq, dup


class _Skip(Exception):
    """Internal: a non-fatal error of the current frame."""

    def __init__(self, code: str, detail: str = "") -> None:
        self.code = code
        self.detail = detail


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _split(b: bytes) -> tuple[bytes, bytes]:
    """Returns the first space/tab-separated token of b and the rest (left-trimmed)."""
    b = b.lstrip(b" \t")
    i = 0
    n = len(b)
    while i < n and b[i] not in (0x20, 0x09):
        i += 1
    return b[:i], b[i:].lstrip(b" \t")


def _count(tok: bytes, *, millis: bool = False) -> int:
    if not tok.isdigit():
        raise _Skip("invalid_number", _s(tok))
    limit = MAX_MILLIS if millis else MAX_COUNT
    if len(tok) > 20 or int(tok) > limit:
        raise _Skip("number_overflow", _s(tok))
    return int(tok)


# A subject without wildcards, checked at C speed; anything else goes to
# subject_error for the exact code. (Reply handles are unique per delivery, so
# this also keeps them out of subject_error's cache.)
_PLAIN_SUBJECT = re.compile(rb"[^\x00-\x20\x7f.*>]+(?:\.[^\x00-\x20\x7f.*>]+)*")


# The fast path of the commonest server frame: a MSG with a plain ASCII
# subject, a decimal sid, an optional plain reply (the ack handle), its size
# and (in CRC mode) its CRC, ended by CRLF. Anything else, or anything odd
# about a match (a size over max_payload, a body not ended by CRLF, a CRC
# mismatch, a body not all here yet), goes the general way, which says why.
_TOK = rb"[!-)+,\-/-=?-~]+(?:\.[!-)+,\-/-=?-~]+)*"  # printable ASCII but . * >
_FAST_MSG = re.compile(rb"MSG (" + _TOK + rb") ([0-9]{1,19}) (?:(" + _TOK + rb") )?([0-9]{1,10})\r\n")
_FAST_MSG_CRC = re.compile(
    rb"MSG (" + _TOK + rb") ([0-9]{1,19}) (?:(" + _TOK + rb") )?([0-9]{1,10}) ([0-9a-f]{8})\r\n"
)


def _subject(tok: bytes, *, wildcards: bool) -> str:
    if _PLAIN_SUBJECT.fullmatch(tok) and tok.isascii():
        return _s(tok)
    code = subject_error(tok, wildcards=wildcards)
    if code is not None:
        raise _Skip(code, _s(tok))
    return _s(tok)


def _group(tok: bytes) -> str:
    if not group_ok(tok):
        raise _Skip("invalid_name", _s(tok))
    return _s(tok)


def _handle(tok: bytes) -> str:
    s = _s(tok)
    if parse_handle(s) is None:
        raise _Skip("invalid_handle", s)
    return s


_SIZED = {b"PUB", b"HPUB", b"MSG", b"HMSG"}
_JSON_VERBS = frozenset((b"INFO", b"CONNECT", b"TOPIC", b"GROUP", b"+OK"))


class Parser:
    """Incremental parser of one direction of one connection.

    Args:
        direction: Which side's frames are read (default: what a client reads).
        crc: Start in CRC mode. The owner flips :attr:`crc` right after it sends
            (client) or handles (server) a CONNECT with ``"crc": true``.
        crc_after_connect: Flip to CRC mode by itself right after a CONNECT event
            (what a server does; used by the vectors).
        max_payload: Largest body accepted; a client raises it from INFO.
        max_control_line: Longest control line (lines carrying JSON use ``max_json_line``).
        max_json_line: Longest INFO, CONNECT, TOPIC, GROUP or +OK line.

    The parser is not thread-safe; one owner feeds it. Events own their data.
    """

    def __init__(
        self,
        *,
        direction: Direction = Direction.SERVER_TO_CLIENT,
        crc: bool = False,
        crc_after_connect: bool = False,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_json_line: int = DEFAULT_MAX_JSON_LINE,
    ) -> None:
        self.direction = direction
        self.crc = crc
        self.crc_after_connect = crc_after_connect
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self.max_json_line = max(max_json_line, max_control_line)
        self.state = State.OP_START
        #: Total bytes consumed (whole frames, including skipped ones).
        self.consumed = 0
        self._buf = bytearray()
        self._scan = 0  # where the next search for LF starts
        # While in MSG_PAYLOAD: (verb, args, body start, header size, total size).
        self._pending: tuple[bytes, list[bytes], int, int, int] | None = None
        self._c2s = direction is Direction.CLIENT_TO_SERVER

    def buffered(self) -> int:
        """Returns how many received bytes are held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Consumes received bytes and returns the events of the complete frames.

        Args:
            data: Bytes as they arrived; any split point is fine.

        Returns:
            The events (commands and non-fatal :class:`ParseError`) in order.

        Raises:
            ProtocolError: A fatal error (``wire_code`` says which); the parser
                must not be fed again. Events of frames before it are lost with
                the connection, as the spec's "stop" rule says.
        """
        buf = self._buf
        buf += data
        events: list[Event] = []
        pos = 0
        n = len(buf)
        try:
            while pos < n:
                if self.state is State.MSG_PAYLOAD:
                    # The control line stays unconsumed until its body is complete.
                    assert self._pending is not None
                    end = self._body(buf, self._pending[2], n, events)
                elif buf[pos] == 0x4D and not self._c2s and (end := self._fast_msgs(buf, pos, n, events)) > pos:
                    self._scan = end  # "M": a run of plain MSG frames
                else:
                    end = self._line(buf, pos, n, events)
                if end < 0:
                    break
                self.consumed += end - pos
                pos = end
        except ProtocolError as e:
            e.events = events
            raise
        finally:
            if pos:
                del buf[:pos]
                self._scan = max(0, self._scan - pos)
                if self._pending is not None:
                    v, a, start, h, t = self._pending
                    self._pending = (v, a, start - pos, h, t)
        return events

    # -- control lines -----------------------------------------------------

    def _limit(self, head: bytes) -> int:
        verb, rest = _split(head)
        # A verb cut off by the 16-byte head cannot be one of the short JSON verbs.
        if verb.upper() in _JSON_VERBS and (rest or len(head) < 16 or head.endswith((b" ", b"\t"))):
            return self.max_json_line
        return self.max_control_line

    def _line(self, buf: bytearray, pos: int, n: int, events: list[Event]) -> int:
        nl = buf.find(b"\n", max(self._scan, pos))
        if nl < 0:
            self._scan = n
            if n - pos > self._limit(bytes(buf[pos : pos + 16])) + 1:  # +1: a CR may precede the LF
                raise ProtocolError("control line too long", wire_code="max_control_line")
            return -1
        end = nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl
        line = bytes(buf[pos:end])
        if len(line) > self.max_control_line and len(line) > self._limit(line[:16]):
            raise ProtocolError("control line too long", wire_code="max_control_line")
        self._scan = nl + 1
        verb, rest = _split(line)
        if not verb:
            return nl + 1  # blank line: ignored
        v = verb.upper()
        if v in _SIZED and (v in (b"PUB", b"HPUB")) == self._c2s:
            return self._sized_line(v, rest, nl + 1, buf, n, events)
        try:
            ev = self._command(v, verb, rest) if self._c2s else self._answer(v, verb, rest)
        except _Skip as e:
            events.append(ParseError(e.code, e.detail))
        else:
            events.append(ev)
            if self.crc_after_connect and isinstance(ev, Command) and ev.op == "CONNECT":
                self.crc = True
        return nl + 1

    def _fast_msgs(self, buf: bytearray, pos: int, n: int, events: list[Event]) -> int:
        """Parses the plain, complete MSG frames from ``pos`` on in one loop,
        without splitting tokens; returns where it stopped (``pos`` when the
        frame there is not one of them: the general path then reads it and
        reports whatever is wrong with it)."""
        fast = _FAST_MSG_CRC if self.crc else _FAST_MSG
        crc_mode = self.crc
        max_payload = self.max_payload
        max_line = self.max_control_line + 2
        append = events.append
        crc32 = zlib.crc32
        subj_b, subj, sid_b, sid = b"", "", b"", ""  # the last ones, decoded once
        crc: int | None = None
        while pos < n:
            m = fast.match(buf, pos)
            if m is None:
                break
            g: tuple[bytes, ...] = m.groups()  # subject, sid, reply or None, size[, crc]
            s_b, i_b, r_b = g[0], g[1], g[2]
            start = m.end()
            size = int(g[3])
            end = start + size
            if start - pos > max_line or size > max_payload or end + 2 > n or buf[end] != 0x0D or buf[end + 1] != 0x0A:
                break
            body = bytes(buf[start:end])
            if crc_mode:
                crc = int(g[4], 16)
                if crc != crc32(body):
                    break
            if s_b != subj_b:
                subj_b, subj = s_b, s_b.decode("ascii")
            if i_b != sid_b:
                sid_b, sid = i_b, i_b.decode("ascii")
            append(Msg(subj, sid, r_b.decode("ascii") if r_b else None, None, body, crc, True))
            pos = end + 2
        return pos

    def _answer(self, v: bytes, verb: bytes, rest: bytes) -> Event:
        if v == b"+OK":
            return Ok(_s(rest.strip(b" \t")))
        if v == b"-ERR":
            text = rest.strip(b" \t")
            if len(text) >= 2 and text[:1] == b"'" and text[-1:] == b"'":
                text = text[1:-1]
            return parse_err_text(_s(text))
        if v == b"PING" or v == b"PONG":
            if rest:
                raise _Skip("invalid_args", _s(v))
            return Ping() if v == b"PING" else Pong()
        if v == b"INFO":
            raw = rest.strip(b" \t")
            if not raw:
                raise _Skip("invalid_args", "INFO without JSON")
            try:
                fields = json.loads(raw)
            except ValueError:
                fields = None
            if not isinstance(fields, dict):
                raise _Skip("invalid_json", "INFO JSON is not an object")
            return Info(fields, _s(raw))
        raise _Skip("unknown_op", _s(verb[:32]))

    def _command(self, v: bytes, verb: bytes, rest: bytes) -> Command:
        if v == b"PING" or v == b"PONG":
            if rest:
                raise _Skip("invalid_args", _s(v))
            return Command(_s(v))
        if v == b"CONNECT":
            raw = rest.strip(b" \t")
            if not raw:
                raise ProtocolError("CONNECT without JSON", wire_code="invalid_connect")
            return Command("CONNECT", json=_s(raw))
        if v in (b"TOPIC", b"GROUP"):
            return self._manage(v, rest)
        args = rest.split()
        if v == b"SUB":
            if not 2 <= len(args) <= 4:
                raise _Skip("invalid_args", "SUB")
            subject = _subject(args[0], wildcards=True)
            group = _s(args[1]) if len(args) >= 3 else ""
            sid = args[2] if len(args) >= 3 else args[1]
            if sid == b"0":
                raise _Skip("invalid_args", "sid 0 is reserved")
            mx = _count(args[3]) if len(args) == 4 else 0
            return Command("SUB", subject=subject, group=group, sid=_s(sid), max=mx)
        if v == b"UNSUB":
            if not 1 <= len(args) <= 2:
                raise _Skip("invalid_args", "UNSUB")
            return Command("UNSUB", sid=_s(args[0]), max=_count(args[1]) if len(args) == 2 else 0)
        if v == b"POLL":
            if not 3 <= len(args) <= 4:
                raise _Skip("invalid_args", "POLL")
            topic = _subject(args[0], wildcards=False)
            group = _group(args[1])
            mx = _count(args[2])
            if mx == 0:
                raise _Skip("invalid_args", "POLL max 0")
            ms = _count(args[3], millis=True) if len(args) == 4 else 0
            return Command("POLL", subject=topic, group=group, max=mx, millis=ms)
        if v == b"ACK":
            if not args:
                raise _Skip("invalid_args", "ACK")
            return Command("ACK", handles=tuple(_handle(a) for a in args))
        if v in (b"NACK", b"EXTEND"):
            if not 1 <= len(args) <= 2:
                raise _Skip("invalid_args", _s(v))
            h = _handle(args[0])
            return Command(_s(v), handles=(h,), millis=_count(args[1], millis=True) if len(args) == 2 else 0)
        if v == b"REJECT":
            if len(args) != 1:
                raise _Skip("invalid_args", "REJECT")
            return Command("REJECT", handles=(_handle(args[0]),))
        raise _Skip("unknown_op", _s(verb[:32]))

    def _manage(self, noun: bytes, rest: bytes) -> Command:
        sub, rest = _split(rest)
        sv = sub.upper()
        op = _s(noun) + " " + _s(sv)
        # (names, JSON allowed) per sub-verb
        shapes = {
            b"TOPIC": {b"CREATE": (1, True), b"INFO": (1, False), b"LIST": (0, False), b"DELETE": (1, False), b"REQUEUE": (1, True)},
            b"GROUP": {b"CREATE": (2, True), b"INFO": (2, False), b"LIST": (1, False), b"DELETE": (2, False)},
        }[noun]
        shape = shapes.get(sv)
        if shape is None:
            raise _Skip("invalid_args", f"unknown {_s(noun)} sub-verb {_s(sub)!r}")
        nnames, has_json = shape
        names: list[bytes] = []
        for _ in range(nnames):
            tok, rest = _split(rest)
            if not tok:
                raise _Skip("invalid_args", op)
            names.append(tok)
        raw = rest.strip(b" \t")
        if raw and not has_json:
            raise _Skip("invalid_args", op)
        subject = _subject(names[0], wildcards=False) if names else ""
        group = _group(names[1]) if len(names) == 2 else ""
        return Command(op, subject=subject, group=group, json=_s(raw))

    # -- sized frames ------------------------------------------------------

    def _sized_line(self, v: bytes, rest: bytes, start: int, buf: bytearray, n: int, events: list[Event]) -> int:
        args = rest.split()
        has_sid = v in (b"MSG", b"HMSG")
        has_hdr = v in (b"HPUB", b"HMSG")
        if self.crc:
            if not args:
                raise ProtocolError(f"{_s(v)} without arguments", wire_code="bad_frame")
        fixed = 2 + has_sid + has_hdr + self.crc  # subject [sid] [hdr] size [crc]
        if len(args) not in (fixed, fixed + 1):
            raise ProtocolError(f"wrong number of {_s(v)} arguments", wire_code="bad_frame")
        size_at = len(args) - 1 - self.crc
        total = self._size(args[size_at])
        hdr = self._size(args[size_at - 1]) if has_hdr else -1
        if hdr > total:
            raise ProtocolError("header size larger than total size", wire_code="bad_frame")
        self._pending = (v, args, start, hdr, total)
        self.state = State.MSG_PAYLOAD
        return self._body(buf, start, n, events) if start <= n else -1

    def _size(self, tok: bytes) -> int:
        if not tok.isdigit():
            raise ProtocolError(f"size {tok[:24]!r} is not a decimal number", wire_code="bad_frame")
        if len(tok) > 20 or int(tok) > self.max_payload:
            raise ProtocolError(f"size {_s(tok[:24])} exceeds max_payload {self.max_payload}", wire_code="max_payload")
        return int(tok)

    def _body(self, buf: bytearray, pos: int, n: int, events: list[Event]) -> int:
        """Completes the pending sized frame whose body starts at ``pos``; returns
        the end of the frame, or -1 when more bytes are needed. Note ``pos`` is
        the body start, so the caller's consumed count covers the control line."""
        assert self._pending is not None
        v, args, _, hdr, total = self._pending
        end = pos + total
        if n < end + 1:
            return -1
        term = buf[end]
        if term == 0x0D:
            if n < end + 2:
                return -1
            if buf[end + 1] != 0x0A:
                raise ProtocolError("body not followed by CRLF", wire_code="bad_frame")
            after = end + 2
        elif term == 0x0A:
            after = end + 1
        else:
            raise ProtocolError("body not followed by CRLF", wire_code="bad_frame")
        body = bytes(buf[pos:end])
        self._pending = None
        self.state = State.OP_START
        self._scan = after
        try:
            events.append(self._frame(v, args, hdr, body))
        except _Skip as e:
            events.append(ParseError(e.code, e.detail, e.frame if isinstance(e, _CrcSkip) else None))
        return after

    def _frame(self, v: bytes, args: list[bytes], hdr: int, body: bytes) -> Event:
        has_sid = v in (b"MSG", b"HMSG")
        crc_tok = args[-1] if self.crc else None
        rest = args[:-1] if self.crc else args
        n_sizes = 2 if hdr >= 0 else 1
        names = rest[: len(rest) - n_sizes]  # subject [sid] [reply]
        subject = _subject(names[0], wildcards=False)
        sid = _s(names[1]) if has_sid else ""
        reply_tok = names[2 if has_sid else 1] if len(names) > (2 if has_sid else 1) else None
        reply = _subject(reply_tok, wildcards=False) if reply_tok is not None else ""
        crc: int | None = None
        has_crc = False
        if crc_tok is not None:
            computed = zlib.crc32(body)
            if crc_tok == b"-" and self._c2s:
                crc = computed
            else:
                if len(crc_tok) != 8 or crc_tok.strip(b"0123456789abcdef"):
                    raise _Skip("invalid_crc_token", _s(crc_tok[:16]))
                has_crc = True
                crc = int(crc_tok, 16)
                if crc != computed:
                    frame = None
                    if has_sid:
                        frame = self._msg(subject, sid, reply, hdr, body, crc, False)
                    raise _CrcSkip(f"got {_s(crc_tok)}, computed {computed:08x}", frame)
        if hdr > 0 and not header_ok(body[:hdr]):  # 0: no headers, as in NATS
            raise _Skip("invalid_header", "")
        if has_sid:
            return self._msg(subject, sid, reply, hdr, body, crc, True)
        header = body[:hdr] if hdr >= 0 else None
        payload = body[hdr:] if hdr >= 0 else body
        return Command(_s(v), subject=subject, reply=reply, header=header, payload=payload, crc=crc, has_crc=has_crc)

    @staticmethod
    def _msg(subject: str, sid: str, reply: str, hdr: int, body: bytes, crc: int | None, ok: bool) -> Msg:
        header = body[:hdr] if hdr >= 0 else None
        payload = body[hdr:] if hdr >= 0 else body
        return Msg(subject, sid, reply or None, header, payload, crc, ok)


class _CrcSkip(_Skip):
    def __init__(self, detail: str, frame: Msg | None) -> None:
        super().__init__("crc_mismatch", detail)
        self.frame = frame
