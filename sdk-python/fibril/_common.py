"""Pieces shared by the asyncio and the sync client: options, URLs, frames, messages.

Nothing here does I/O; both clients build the same frames and interpret the same
answers through these helpers, so their behaviour cannot drift apart.
"""

from __future__ import annotations

import json
import random
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Union
from urllib.parse import unquote, urlsplit

from . import _proto as proto
from .errors import CorruptMessageError, ProtocolError

DEFAULT_PORT = 4222
#: Publish window used when INFO does not announce ``max_unconfirmed``.
DEFAULT_MAX_UNCONFIRMED = 1024
#: Longest line a client accepts from the server (management JSON answers can be long).
CLIENT_MAX_LINE = 16 * 1024 * 1024
#: Room for headers the server adds to a maximal body (dead-letter headers).
PAYLOAD_SLACK = 64 * 1024

# Answer kinds of a pending request: how the client interprets its +OK argument.
KIND_PLAIN, KIND_PUB, KIND_POLL, KIND_JSON = 0, 1, 2, 3

HeadersArg = Union[Mapping[str, str], Iterable[tuple[str, str]], None]
Data = Union[bytes, bytearray, memoryview, str]


@dataclass(frozen=True, slots=True)
class Position:
    """Where a confirmed publish was stored.

    Attributes:
        partition: Partition of the topic that captured the message.
        seq: Sequence of the message in that partition.
        duplicate: The publish's ``msg_id`` was stored within the topic's
            duplicate window: it was not stored again, and partition and seq
            are the first one's.
    """

    partition: int
    seq: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Reconnect:
    """Reconnect policy: exponential backoff with jitter.

    Attributes:
        enabled: Reconnect after the connection drops (the first connect is never
            retried: ``connect`` raises at once so configuration errors surface).
        initial: First delay in seconds.
        max_delay: Largest delay in seconds.
        multiplier: Growth factor between attempts.
        jitter: Fraction of each delay randomised (0.2 = ±20 %).
        max_attempts: Give up after this many failed passes in a row (None =
            never). A pass tries every server of the list once; with one
            server it is one attempt.

    The delay is waited before each pass over the server list and grows
    after each failed pass, not after each server.
    """

    enabled: bool = True
    initial: float = 0.05
    max_delay: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2
    max_attempts: int | None = None

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Returns the delay before reconnect pass ``attempt`` (0-based)."""
        d = min(self.max_delay, self.initial * (self.multiplier**attempt))
        r = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, d * (1.0 + r))


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A parsed server URL."""

    host: str
    port: int
    tls: bool
    user: str | None
    password: str | None
    token: str | None


def parse_url(url: str) -> Endpoint:
    """Parses ``[nats|fibril|tls]://[user:pass@|token@]host[:port]`` or ``host:port``.

    Raises:
        ValueError: The scheme is unknown or the port is not a number.
    """
    if "://" not in url:
        url = "nats://" + url
    u = urlsplit(url)
    if u.scheme not in ("nats", "fibril", "tls"):
        raise ValueError(f"unsupported URL scheme {u.scheme!r}")
    try:
        port = u.port or DEFAULT_PORT
    except ValueError:
        raise ValueError(f"bad port in {url!r}") from None
    user = unquote(u.username) if u.username else None
    password = unquote(u.password) if u.password is not None else None
    token = None
    if user is not None and password is None:
        token, user = user, None
    return Endpoint(u.hostname or "127.0.0.1", port, u.scheme == "tls", user, password, token)


def tls_context(tls: bool | ssl.SSLContext | None, endpoint: Endpoint) -> ssl.SSLContext | None:
    """Returns the TLS context to use, or None for plain TCP."""
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls or (tls is None and endpoint.tls):
        return ssl.create_default_context()
    return None


def connect_options(
    *,
    name: str | None,
    token: str | None,
    user: str | None,
    password: str | None,
    crc: bool,
    tls: bool,
    endpoint: Endpoint,
) -> dict[str, Any]:
    """Returns the CONNECT JSON object for a Fibril-mode connection."""
    opts: dict[str, Any] = {
        "verbose": False,
        "pedantic": False,
        "tls_required": tls,
        "lang": "python",
        "version": "0.1.0",
        "protocol": 1,
        "headers": True,
        "fibril": 1,
        "confirm": True,
        "crc": crc,
    }
    if name:
        opts["name"] = name
    tok = token or endpoint.token
    if tok:
        opts["auth_token"] = tok
    u = user or endpoint.user
    if u:
        opts["user"] = u
        opts["pass"] = password if password is not None else (endpoint.password or "")
    return opts


#: A duration: seconds (int or float) or a :class:`datetime.timedelta`.
Duration = Union[float, timedelta]


def to_ms(seconds: Duration | None, what: str) -> int | None:
    """Converts a duration (seconds or a timedelta) to whole milliseconds (None
    stays None).

    Raises:
        ValueError: The duration is negative or beyond the wire's 4294967295 ms.
    """
    if seconds is None:
        return None
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    ms = int(round(seconds * 1000))
    if ms < 0 or ms > proto.MAX_MILLIS:
        raise ValueError(f"{what} of {seconds} s is out of range (0 to {proto.MAX_MILLIS} ms)")
    return ms


def poll_frame(topic: str, group: str, max_messages: int, wait: Duration) -> bytes:
    """Validates a fetch and returns its POLL frame.

    Raises:
        ValueError: Bad topic or group name, max_messages out of range, bad wait.
    """
    proto.validate_subject(topic)
    proto.validate_group(group)
    if not 1 <= max_messages <= proto.MAX_COUNT:
        raise ValueError(f"max_messages must be 1..{proto.MAX_COUNT}")
    return proto.encode_poll(topic, group, max_messages, to_ms(wait, "wait") or None)


def ack_frames(handles: list[str], max_line: int) -> list[bytes]:
    """Splits many handles into ACK lines that each fit the server's control-line
    limit. The handles must be well-formed (no whitespace)."""
    frames: list[bytes] = []
    n = len(handles)
    i = 0
    while i < n:
        size = 3 + 1 + len(handles[i])  # "ACK" and the first handle always go
        j = i + 1
        while j < n:
            size += 1 + len(handles[j])
            if size > max_line:
                break
            j += 1
        frames.append(("ACK " + " ".join(handles[i:j]) + "\r\n").encode())
        i = j
    return frames


def max_control_line(info: Mapping[str, Any]) -> int:
    """Returns the server's control-line limit from INFO (default 4096)."""
    return int(info.get("max_control_line") or proto.DEFAULT_MAX_CONTROL_LINE)


def to_bytes(data: Data) -> bytes:
    """Returns ``data`` as bytes (str is encoded as UTF-8)."""
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


def ttl_ms(ttl: Duration, what: str = "ttl") -> int:
    """Converts a TTL or delay (seconds or a timedelta) to whole milliseconds,
    at least 1.

    Raises:
        ValueError: It is not more than 0.
    """
    secs = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not secs > 0:
        raise ValueError(f"{what} of {secs} s: it must be more than 0")
    return max(1, round(secs * 1000))


def publish_frame(
    subject: str,
    data: Data,
    *,
    key: str | bytes | None,
    headers: HeadersArg,
    msg_id: str | None,
    crc: bool,
    max_payload: int,
    ttl: Duration | None = None,
    delay: Duration | None = None,
    deliver_at: datetime | None = None,
) -> bytes:
    """Validates a publish and returns its PUB/HPUB frame.

    Raises:
        ValueError: Bad subject or header, or the message exceeds ``max_payload``.
    """
    proto.validate_subject(subject)
    body = to_bytes(data)
    pairs: list[tuple[str, str]] = []
    if headers is not None:
        items = headers.items() if isinstance(headers, Mapping) else headers
        pairs.extend((str(k), str(v)) for k, v in items)
    if key is not None:
        pairs.append((proto.HEADER_KEY, key.decode() if isinstance(key, bytes) else key))
    if msg_id is not None:
        pairs.append((proto.HEADER_MSG_ID, msg_id))
    if ttl is not None:
        pairs.append(("Nats-TTL", f"{ttl_ms(ttl)}ms"))
    if delay is not None:
        pairs.append(("Fibril-Delay", f"{ttl_ms(delay, 'delay')}ms"))
    if deliver_at is not None:
        if deliver_at.tzinfo is None:
            raise ValueError("deliver_at must be timezone-aware (the server compares it with its own clock)")
        pairs.append(("Fibril-Deliver-At", deliver_at.isoformat()))
    header = proto.encode_headers(pairs) if pairs else None
    size = len(body) + (len(header) if header else 0)
    if size > max_payload:
        raise ValueError(f"max_payload: message of {size} bytes exceeds the server's max_payload {max_payload}")
    return proto.encode_pub(subject, body, header=header, crc=crc)


def position_from(arg: str) -> Position | None:
    """Interprets a publish confirm argument (``<p>:<seq>``, ``<p>:<seq> duplicate`` or ``-``)."""
    pos = proto.parse_position(arg)
    return None if pos is None else Position(*pos)


def json_answer(arg: str) -> Any:
    """Decodes the single-line JSON of a management ``+OK <json>`` answer.

    Raises:
        ProtocolError: The answer is not JSON.
    """
    if not arg:
        return None
    try:
        return json.loads(arg)
    except ValueError as e:
        raise ProtocolError(f"bad JSON answer: {e}") from None


def topic_config(
    *,
    subjects: Iterable[str] | None = None,
    partitions: int | None = None,
    replicas: int | None = None,
    durability: str | None = None,
    retention: str | None = None,
    max_age_ms: int | None = None,
    max_bytes: int | None = None,
    max_msgs: int | None = None,
    max_unsettled_msgs: int | None = None,
    max_unsettled_bytes: int | None = None,
    full_policy: str | None = None,
    compression: str | None = None,
    duplicate_window_ms: int | None = None,
    duplicate_max_ids: int | None = None,
    message_ttl_ms: int | None = None,
    allow_msg_ttl: bool | None = None,
    allow_msg_delay: bool | None = None,
) -> dict[str, Any]:
    """Returns the TOPIC CREATE JSON with the given (non-None) fields."""
    cfg: dict[str, Any] = {
        "subjects": list(subjects) if subjects is not None else None,
        "partitions": partitions,
        "replicas": replicas,
        "durability": durability,
        "retention": retention,
        "max_age_ms": max_age_ms,
        "max_bytes": max_bytes,
        "max_msgs": max_msgs,
        "max_unsettled_msgs": max_unsettled_msgs,
        "max_unsettled_bytes": max_unsettled_bytes,
        "full_policy": full_policy,
        "duplicate_window_ms": duplicate_window_ms,
        "duplicate_max_ids": duplicate_max_ids,
        "compression": compression,
        "message_ttl_ms": message_ttl_ms,
        "allow_msg_ttl": allow_msg_ttl,
        "allow_msg_delay": allow_msg_delay,
    }
    return {k: v for k, v in cfg.items() if v is not None}


def group_config(
    *,
    start: str | None = None,
    start_seq: int | None = None,
    start_time: datetime | str | None = None,
    lease_ms: int | None = None,
    backoff_ms: list[int] | None = None,
    filter: list[str] | None = None,
    ordered: str | None = None,
    on_expiry: str | None = None,
    max_deliveries: int | None = None,
    dead_letter: str | None = None,
) -> dict[str, Any]:
    """Returns the GROUP CREATE JSON with the given (non-None) fields.

    A ``start_seq`` alone implies ``start="seq"``, a ``start_time`` alone
    ``start="time"``; a datetime ``start_time`` must be timezone-aware.

    Raises:
        ValueError: ``start_time`` is a naive datetime.
    """
    if isinstance(start_time, datetime):
        if start_time.tzinfo is None:
            raise ValueError("start_time must be timezone-aware (the server compares it with its own clock)")
        start_time = start_time.isoformat()
    if start is None and start_seq is not None:
        start = "seq"
    if start is None and start_time is not None:
        start = "time"
    cfg: dict[str, Any] = {
        "start": start,
        "start_seq": start_seq,
        "start_time": start_time,
        "lease_ms": lease_ms,
        "backoff_ms": backoff_ms,
        "filter": filter,
        "ordered": ordered,
        "on_expiry": on_expiry,
        "max_deliveries": max_deliveries,
        "dead_letter": dead_letter,
    }
    return {k: v for k, v in cfg.items() if v is not None}


_EMPTY: Mapping[str, str] = MappingProxyType({})



@dataclass(frozen=True, slots=True)
class MsgFields:
    """The data of a delivered message, shared by the async and sync ``Msg``.

    Attributes:
        subject: Subject it was published to.
        data: Body (CRC-verified when CRC mode is on).
        headers: Header map (last value wins for repeated names; see ``header_pairs``).
        header_pairs: All header pairs in wire order.
        reply: Reply-to subject (the ack handle string for durable deliveries).
        crc: CRC-32 announced by the server, or None when CRC mode is off.
    """

    subject: str
    data: bytes
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    header_pairs: tuple[tuple[str, str], ...] = ()
    reply: str | None = None
    crc: int | None = None

    @property
    def handle(self) -> proto.Handle | None:
        """The parsed ack handle (parsed on each call), or None for plain
        (non-durable) deliveries."""
        r = self.reply
        return proto.parse_handle(r) if r is not None and r.startswith("$F.") else None

    def _durable(self) -> bool:
        """Reports whether the reply is an ack handle (a Fibril server's ``$F.``
        reply; the server checks the rest when it is sent back)."""
        r = self.reply
        return r is not None and r.startswith("$F.")


def msg_fields(frame: proto.Msg) -> MsgFields:
    """Builds message fields from a MSG/HMSG frame.

    Raises:
        CorruptMessageError: The frame failed its CRC check.
        ProtocolError: The header block is malformed.
    """
    if not frame.crc_ok:
        raise CorruptMessageError(
            f"message on {frame.subject!r} (reply {frame.reply!r}) failed its CRC-32 check"
        )
    pairs: tuple[tuple[str, str], ...] = ()
    headers = _EMPTY
    if frame.header is not None:
        _, _, plist = proto.decode_headers(frame.header)
        pairs = tuple(plist)
        headers = MappingProxyType(dict(plist))
    return MsgFields(frame.subject, frame.payload, headers, pairs, frame.reply, frame.crc)
