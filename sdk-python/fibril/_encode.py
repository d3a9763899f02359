"""Encoders of every frame in canonical form (SPEC.md section 2): upper-case
verbs, one space between tokens, CRLF. Client-to-server frames are what the SDK
sends; server-to-client ones exist for tests and the conformance vectors.

Numbers of milliseconds are ints here; the clients convert seconds at their API.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, Union

from ._wire import CRLF

Json = Union[Mapping[str, Any], str]


def crc_token(body: bytes) -> bytes:
    """Returns the CRC-32 IEEE of ``body`` as 8 lowercase hex digits."""
    return b"%08x" % zlib.crc32(body)


def _json(obj: Json) -> bytes:
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogateescape")
    return json.dumps(dict(obj), separators=(",", ":")).encode()


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def encode_connect(options: Json) -> bytes:
    """Encodes ``CONNECT {json}`` (a mapping is dumped compactly; a str is used as is)."""
    return b"CONNECT " + _json(options) + CRLF


def _sized(
    verb: bytes,
    subject: str,
    sid: str | None,
    reply: str | None,
    header: bytes | None,
    payload: bytes,
    crc: bool,
    dash: bool,
) -> bytes:
    parts: list[bytes] = [verb, b" ", _b(subject)]
    if sid is not None:
        parts += (b" ", _b(sid))
    if reply:
        parts += (b" ", _b(reply))
    if header is None:
        parts.append(b" %d" % len(payload))
    else:
        parts.append(b" %d %d" % (len(header), len(header) + len(payload)))
    if crc:
        if dash:
            parts.append(b" -")
        else:
            c = zlib.crc32(payload, zlib.crc32(header)) if header is not None else zlib.crc32(payload)
            parts.append(b" %08x" % c)
    parts.append(CRLF)
    if header is not None:
        parts.append(header)
    parts += (payload, CRLF)
    return b"".join(parts)


def encode_pub(
    subject: str,
    payload: bytes,
    *,
    reply: str | None = None,
    header: bytes | None = None,
    crc: bool = False,
    dash: bool = False,
) -> bytes:
    """Encodes a PUB (or HPUB when ``header`` is given) frame.

    Args:
        subject: Destination subject (not validated here).
        payload: Body.
        reply: Optional reply-to subject.
        header: Optional raw header block (see ``encode_headers``).
        crc: CRC mode: append the checksum token of header+payload.
        dash: In CRC mode, send ``-`` ("not given") instead of the checksum.

    Returns:
        The whole frame, control line through trailing CRLF.
    """
    return _sized(b"PUB" if header is None else b"HPUB", subject, None, reply, header, payload, crc, dash)


def encode_msg(
    subject: str,
    sid: str,
    payload: bytes,
    *,
    reply: str | None = None,
    header: bytes | None = None,
    crc: bool = False,
) -> bytes:
    """Encodes a MSG (or HMSG) frame, as a server sends it."""
    return _sized(b"MSG" if header is None else b"HMSG", subject, sid, reply, header, payload, crc, False)


def encode_sub(subject: str, sid: str, *, queue: str | None = None, max_inflight: int | None = None) -> bytes:
    """Encodes ``SUB <subject> [group] <sid> [max-inflight]``.

    Raises:
        ValueError: ``max_inflight`` is given without a group, or is not positive.
    """
    parts = [b"SUB ", _b(subject)]
    if queue:
        parts += (b" ", _b(queue))
    parts += (b" ", _b(sid))
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
        return b"UNSUB " + _b(sid) + CRLF
    return b"UNSUB %s %d\r\n" % (_b(sid), max_msgs)


PING = b"PING\r\n"
PONG = b"PONG\r\n"


def _check_ms(ms: int, what: str) -> int:
    if ms < 0:
        raise ValueError(f"{what} must not be negative")
    return ms


def encode_ack(handles: Iterable[str]) -> bytes:
    """Encodes ``ACK <handle> [<handle> ...]``.

    Raises:
        ValueError: No handles were given.
    """
    hs = [_b(h) for h in handles]
    if not hs:
        raise ValueError("ACK needs at least one handle")
    return b"ACK " + b" ".join(hs) + CRLF


def encode_nack(handle: str, delay_ms: int | None = None) -> bytes:
    """Encodes ``NACK <handle> [<delay-ms>]``."""
    if delay_ms is None:
        return b"NACK " + _b(handle) + CRLF
    return b"NACK %s %d\r\n" % (_b(handle), _check_ms(delay_ms, "delay"))


def encode_reject(handle: str) -> bytes:
    """Encodes ``REJECT <handle>``."""
    return b"REJECT " + _b(handle) + CRLF


def encode_extend(handle: str, ms: int | None = None) -> bytes:
    """Encodes ``EXTEND <handle> [<ms>]``."""
    if ms is None:
        return b"EXTEND " + _b(handle) + CRLF
    return b"EXTEND %s %d\r\n" % (_b(handle), _check_ms(ms, "duration"))


def encode_poll(topic: str, group: str, max_messages: int, wait_ms: int | None = None) -> bytes:
    """Encodes ``POLL <topic> <group> <max> [<wait-ms>]``.

    Raises:
        ValueError: ``max_messages`` is not positive or ``wait_ms`` is negative.
    """
    if max_messages <= 0:
        raise ValueError("max_messages must be positive")
    if wait_ms is None:
        return b"POLL %s %s %d\r\n" % (_b(topic), _b(group), max_messages)
    return b"POLL %s %s %d %d\r\n" % (_b(topic), _b(group), max_messages, _check_ms(wait_ms, "wait"))


def encode_manage(noun: str, verb: str, *args: str, config: Json | None = None) -> bytes:
    """Encodes a management command such as ``TOPIC CREATE <name> [<json>]``.

    Args:
        noun: ``TOPIC`` or ``GROUP``.
        verb: ``CREATE``, ``INFO``, ``LIST``, ``DELETE`` or (``TOPIC`` only) ``REQUEUE``.
        *args: Names (topic, group).
        config: Optional JSON (mapping, or raw text) appended as the rest of the line.
    """
    parts = [noun.encode(), verb.encode(), *(_b(a) for a in args)]
    if config:
        parts.append(_json(config))
    return b" ".join(parts) + CRLF


def encode_info(info: Json) -> bytes:
    """Encodes ``INFO {json}``, as a server sends it."""
    return b"INFO " + _json(info) + CRLF


def encode_ok(arg: str = "") -> bytes:
    """Encodes ``+OK [arg]``, as a server sends it."""
    return b"+OK " + _b(arg) + CRLF if arg else b"+OK\r\n"


def encode_err(text: str) -> bytes:
    """Encodes ``-ERR '<text>'``, as a server sends it."""
    return b"-ERR '" + _b(text) + b"'\r\n"
