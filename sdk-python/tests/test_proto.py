"""Unit tests of the sans-I/O protocol core (fibril._proto)."""

from __future__ import annotations

import random
import zlib

import pytest

from fibril import _proto as proto
from fibril._common import poll_frame


def crc_hex(b: bytes) -> bytes:
    return b"%08x" % zlib.crc32(b)


HDR = b"NATS/1.0\r\nFibril-Key: k1\r\nX: y z\r\n\r\n"
STREAM_PLAIN = (
    b'INFO {"server_id":"S","fibril":1,"max_payload":1048576}\r\n'
    b"+OK\r\n"
    b"MSG orders 7 5\r\nhello\r\n"
    b"MSG orders.eu 8 $F.1.2.0.42.3 0\r\n\r\n"
    b"HMSG orders 9 " + b"%d %d" % (len(HDR), len(HDR) + 4) + b"\r\n" + HDR + b"body\r\n"
    b"+OK 0:17\r\n"
    b"-ERR 'stale_handle attempt 2 is older than 3'\r\n"
    b"PING\r\nPONG\n"
    b"msg lower 1 2\r\nhi\r\n"
    b" \t \r\n"
    b"MSG lf 2 2\nhi\n"
    b"MSG\ttabs  3   1\r\nx\r\n"
)


def feed_split(p: proto.Parser, data: bytes, cuts: list[int]) -> list[proto.Event]:
    out: list[proto.Event] = []
    prev = 0
    for c in sorted(cuts) + [len(data)]:
        out += p.feed(data[prev:c])
        prev = c
    return out


def expected_plain() -> list[proto.Event]:
    return [
        proto.Info({"server_id": "S", "fibril": 1, "max_payload": 1048576}, '{"server_id":"S","fibril":1,"max_payload":1048576}'),
        proto.Ok(""),
        proto.Msg("orders", "7", None, None, b"hello", None, True),
        proto.Msg("orders.eu", "8", "$F.1.2.0.42.3", None, b"", None, True),
        proto.Msg("orders", "9", None, HDR, b"body", None, True),
        proto.Ok("0:17"),
        proto.Err("stale_handle", "attempt 2 is older than 3", "stale_handle attempt 2 is older than 3"),
        proto.Ping(),
        proto.Pong(),
        proto.Msg("lower", "1", None, None, b"hi", None, True),
        proto.Msg("lf", "2", None, None, b"hi", None, True),
        proto.Msg("tabs", "3", None, None, b"x", None, True),
    ]


def test_parse_whole_stream() -> None:
    assert proto.Parser().feed(STREAM_PLAIN) == expected_plain()


def test_parse_byte_at_a_time() -> None:
    p = proto.Parser()
    events: list[proto.Event] = []
    for i in range(len(STREAM_PLAIN)):
        events += p.feed(STREAM_PLAIN[i : i + 1])
    assert events == expected_plain()
    assert p.buffered() == 0
    assert p.state is proto.State.OP_START


def test_parse_random_splits() -> None:
    rng = random.Random(1)
    for _ in range(200):
        cuts = [rng.randrange(len(STREAM_PLAIN)) for _ in range(rng.randrange(1, 8))]
        assert feed_split(proto.Parser(), STREAM_PLAIN, cuts) == expected_plain()


def test_partial_frame_is_held() -> None:
    p = proto.Parser()
    assert p.feed(b"MSG a 1 5\r\nhel") == []
    assert p.state is proto.State.MSG_PAYLOAD
    assert p.feed(b"lo\r") == []
    assert p.feed(b"\n") == [proto.Msg("a", "1", None, None, b"hello", None, True)]
    assert p.state.name == "OP_START"


def test_crc_mode_verifies_payload() -> None:
    body = HDR + b"payload"
    good = (
        b"MSG a 1 5 " + crc_hex(b"hello") + b"\r\nhello\r\n"
        b"HMSG a 2 $F.1.1.0.1.1 %d %d " % (len(HDR), len(body)) + crc_hex(body) + b"\r\n" + body + b"\r\n"
    )
    p = proto.Parser(crc=True)
    events = [e for i in range(len(good)) for e in p.feed(good[i : i + 1])]
    assert [e.crc_ok for e in events if isinstance(e, proto.Msg)] == [True, True]
    m = events[1]
    assert isinstance(m, proto.Msg)
    assert (m.header, m.payload, m.reply, m.crc) == (HDR, b"payload", "$F.1.1.0.1.1", zlib.crc32(body))

    corrupt = b"MSG a 1 5 " + crc_hex(b"hello") + b"\r\nhellO\r\nPING\r\n"
    ev, ping = proto.Parser(crc=True).feed(corrupt)
    assert isinstance(ev, proto.ParseError) and ev.code == "crc_mismatch"
    assert ev.frame is not None and ev.frame.crc_ok is False and ev.frame.payload == b"hellO"
    assert ping == proto.Ping()


def test_crc_flag_flips_between_frames() -> None:
    p = proto.Parser()
    assert p.feed(b"+OK\r\n") == [proto.Ok("")]
    p.crc = True
    (ev,) = p.feed(b"MSG a 1 2 " + crc_hex(b"hi") + b"\r\nhi\r\n")
    assert isinstance(ev, proto.Msg) and ev.crc == zlib.crc32(b"hi") and ev.crc_ok


@pytest.mark.parametrize(
    "frame, crc, code",
    [
        (b"MSG a 1\r\n", False, "bad_frame"),
        (b"MSG a 1 b c d\r\n", False, "bad_frame"),
        (b"MSG a 1 +5\r\nhello\r\n", False, "bad_frame"),
        (b"MSG a 1 1_0\r\n", False, "bad_frame"),
        (b"MSG a 1 5\r\nhelloXX", False, "bad_frame"),
        (b"MSG a 1 5\r\nhello\rX", False, "bad_frame"),
        (b"HMSG a 1 10 5\r\n", False, "bad_frame"),
        (b"MSG a 1 5\r\nhello\r\n", True, "bad_frame"),
        (b"-ERR 'x'\r\nMSG a 1 99999999999\r\n", False, "max_payload"),
    ],
)
def test_fatal_errors(frame: bytes, crc: bool, code: str) -> None:
    with pytest.raises(proto.ProtocolError) as ei:
        proto.Parser(crc=crc).feed(frame)
    assert ei.value.wire_code == code and ei.value.fatal


def test_fatal_error_keeps_earlier_events() -> None:
    p = proto.Parser()
    with pytest.raises(proto.ProtocolError) as ei:
        p.feed(b"PONG\r\n+OK 0:1\r\nMSG a 1 x\r\n")
    assert ei.value.events == [proto.Pong(), proto.Ok("0:1")]
    assert p.consumed == len(b"PONG\r\n+OK 0:1\r\n")


@pytest.mark.parametrize(
    "frame, crc, code",
    [
        (b"BOGUS x\r\n", False, "unknown_op"),
        (b"PUB a 1\r\n", False, "unknown_op"),
        (b"MSG a 1 5 ABCDEF01\r\nhello\r\n", True, "invalid_crc_token"),
        (b"MSG a 1 5 123\r\nhello\r\n", True, "invalid_crc_token"),
        (b"MSG a 1 5 -\r\nhello\r\n", True, "invalid_crc_token"),
        (b"MSG a.* 1 1\r\nx\r\n", False, "wildcard_not_allowed"),
        (b"MSG a 1 r..x 1\r\nx\r\n", False, "invalid_subject"),
        (b"HMSG a 1 12 13\r\nNATS/1.1\r\n\r\nx\r\n", False, "invalid_header"),
        (b"INFO {bad\r\n", False, "invalid_json"),
        (b"INFO [1]\r\n", False, "invalid_json"),
        (b"INFO\r\n", False, "invalid_args"),
        (b"PING x\r\n", False, "invalid_args"),
    ],
)
def test_non_fatal_errors_skip_the_frame(frame: bytes, crc: bool, code: str) -> None:
    p = proto.Parser(crc=crc)
    events = p.feed(frame + b"PING\r\n")
    assert [type(e) for e in events] == [proto.ParseError, proto.Ping]
    first = events[0]
    assert isinstance(first, proto.ParseError) and first.code == code
    assert p.consumed == len(frame) + 6


@pytest.mark.parametrize(
    "text, code, message",
    [
        ("crc_mismatch payload checksum does not match", "crc_mismatch", "payload checksum does not match"),
        ("Unknown Protocol Operation", None, "Unknown Protocol Operation"),
        ("Authorization Violation", None, "Authorization Violation"),
        ("timeout", "timeout", ""),
        ("internal internal server error", "internal", "internal server error"),
        ("Stale Connection", None, "Stale Connection"),
    ],
)
def test_parse_err_text(text: str, code: str | None, message: str) -> None:
    e = proto.parse_err_text(text)
    assert (e.code, e.message, e.text) == (code, message, text)


def test_encoders() -> None:
    assert proto.encode_pub("a.b", b"hello") == b"PUB a.b 5\r\nhello\r\n"
    assert proto.encode_pub("a", b"hello", reply="r", crc=True) == b"PUB a r 5 3610a686\r\nhello\r\n"
    h = proto.encode_headers([("K", "v")])
    assert h == b"NATS/1.0\r\nK: v\r\n\r\n"
    assert proto.encode_pub("a", b"hi", header=h, crc=True) == (
        b"HPUB a %d %d " % (len(h), len(h) + 2) + crc_hex(h + b"hi") + b"\r\n" + h + b"hi\r\n"
    )
    assert proto.encode_sub("t", "3", queue="g", max_inflight=8) == b"SUB t g 3 8\r\n"
    assert proto.encode_sub("t.>", "4") == b"SUB t.> 4\r\n"
    assert proto.encode_unsub("4") == b"UNSUB 4\r\n"
    assert proto.encode_ack(["$F.1.2.0.5.1", "$F.1.2.0.6.1"]) == b"ACK $F.1.2.0.5.1 $F.1.2.0.6.1\r\n"
    assert proto.encode_nack("$F.1.2.0.5.1", 1500) == b"NACK $F.1.2.0.5.1 1500\r\n"
    assert proto.encode_nack("$F.1.2.0.5.1") == b"NACK $F.1.2.0.5.1\r\n"
    assert proto.encode_reject("$F.1.2.0.5.1") == b"REJECT $F.1.2.0.5.1\r\n"
    assert proto.encode_extend("$F.1.2.0.5.1", 30000) == b"EXTEND $F.1.2.0.5.1 30000\r\n"
    assert proto.encode_poll("t", "g", 10, 250) == b"POLL t g 10 250\r\n"
    assert poll_frame("t", "g", 10, 0.25) == b"POLL t g 10 250\r\n"
    assert poll_frame("t", "g", 10, 0) == b"POLL t g 10\r\n"
    assert proto.encode_manage("TOPIC", "CREATE", "t", config={"partitions": 2}) == (
        b'TOPIC CREATE t {"partitions":2}\r\n'
    )
    assert proto.encode_manage("GROUP", "LIST", "t") == b"GROUP LIST t\r\n"
    assert proto.encode_connect({"fibril": 1}) == b'CONNECT {"fibril":1}\r\n'


@pytest.mark.parametrize(
    "call",
    [
        lambda: proto.encode_sub("t", "1", max_inflight=3),
        lambda: proto.encode_sub("t", "1", queue="g", max_inflight=0),
        lambda: proto.encode_ack([]),
        lambda: proto.encode_nack("h", -1),
        lambda: proto.encode_poll("t", "g", 0),
        lambda: poll_frame("t x", "g", 1, 0),
        lambda: poll_frame("t", "bad.group", 1, 0),
        lambda: poll_frame("t.*", "g", 1, 0),
        lambda: poll_frame("t", "g", 2147483648, 0),
        lambda: poll_frame("t", "g", 1, -1),
        lambda: poll_frame("t", "g", 1, 5e6),
        lambda: proto.encode_headers([("Bad:Name", "v")]),
        lambda: proto.encode_headers([("K", "a\r\nb")]),
    ],
)
def test_encoder_rejects_bad_input(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    "subject, wildcards, ok",
    [
        ("a", False, True),
        ("a.b.c", False, True),
        ("", False, False),
        ("a b", False, False),
        ("a\tb", False, False),
        ("a..b", False, False),
        (".a", False, False),
        ("a.", False, False),
        ("a.*", False, False),
        ("a.*", True, True),
        ("a.>", True, True),
        ("a.>.b", True, False),
        ("a*b", True, False),
        ("a.b>", True, False),
        ("a\x7fb", False, False),
        ("a\x01b", False, False),
        ("caf\u00e9.x", False, True),
    ],
)
def test_validate_subject(subject: str, wildcards: bool, ok: bool) -> None:
    if ok:
        proto.validate_subject(subject, wildcards=wildcards)
    else:
        with pytest.raises(ValueError):
            proto.validate_subject(subject, wildcards=wildcards)


@pytest.mark.parametrize(
    "s, want",
    [
        ("$F.1.2.3.4.5", proto.Handle(1, 2, 3, 4, 5)),
        ("$F.10.20.0.18446744073709551615.1", proto.Handle(10, 20, 0, 18446744073709551615, 1)),
        ("$F.1.2.3.4", None),
        ("$F.1.2.3.4.5.6", None),
        ("$G.1.2.3.4.5", None),
        ("$F.1.2.x.4.5", None),
        ("$F.1.2..4.5", None),
        ("$F.1.2.-3.4.5", None),
        ("$F.1.2.\u0663.4.5", None),
        ("$F.01.2.3.4.5", None),
        ("$F.0.2.3.4.5", None),
        ("$F.1.2.3.0.5", None),
        ("$F.1.2.3.4.0", None),
        ("$F.1.2.4294967296.4.5", None),
        ("$F.1.2.4294967295.4.4294967295", proto.Handle(1, 2, 4294967295, 4, 4294967295)),
        ("$F.18446744073709551616.2.3.4.5", None),
    ],
)
def test_parse_handle(s: str, want: proto.Handle | None) -> None:
    h = proto.parse_handle(s)
    assert h == want
    if h is not None:
        assert str(h) == s


def test_headers_round_trip() -> None:
    pairs = [("Fibril-Key", "k"), ("X-Multi", "1"), ("X-Multi", "2"), ("Empty", "")]
    status, desc, got = proto.decode_headers(proto.encode_headers(pairs))
    assert (status, desc, got) == (None, "", pairs)
    status, desc, got = proto.decode_headers(b"NATS/1.0 503 No Responders\r\n\r\n")
    assert (status, desc, got) == (503, "No Responders", [])
    with pytest.raises(proto.ProtocolError):
        proto.decode_headers(b"HTTP/1.1\r\n\r\n")


@pytest.mark.parametrize(
    "arg, want, bad",
    [("0:5", (0, 5, False), False), ("3:18446744073709551615", (3, 18446744073709551615, False), False), ("-", None, False),
     (" 1:2 ", (1, 2, False), False), ("1:2 duplicate", (1, 2, True), False), ("1:2 dup", None, True), ("", None, True), ("5", None, True), ("a:b", None, True), ("1:", None, True),
     ("4294967296:1", None, True), ("1:18446744073709551616", None, True)],
)
def test_parse_position(arg: str, want: tuple[int, int, bool] | None, bad: bool) -> None:
    if bad:
        with pytest.raises(proto.ProtocolError):
            proto.parse_position(arg)
    else:
        assert proto.parse_position(arg) == want


def test_ack_frames_fit_the_line_limit() -> None:
    from fibril._common import ack_frames

    handles = [str(proto.Handle(1, 2, 0, i, 1)) for i in range(1, 500)]
    frames = ack_frames(handles, 100)
    assert len(frames) > 1
    assert all(len(f) - 2 <= 100 for f in frames)
    events = proto.Parser(direction=proto.Direction.CLIENT_TO_SERVER, max_control_line=100).feed(b"".join(frames))
    got = [h for e in events if isinstance(e, proto.Command) for h in e.handles]
    assert got == handles


def test_fast_msg_run_matches_byte_at_a_time() -> None:
    """The one-loop path for runs of plain MSG frames (issue 33, consume CPU)
    gives the same events as the general path, fed byte by byte, and leaves
    what it does not take (a bad CRC, HMSG, a partial frame) to it."""
    import zlib

    def msg(subject: bytes, sid: bytes, reply: bytes, body: bytes, crc: int | None = None) -> bytes:
        r = reply + b" " if reply else b""
        c = b" %08x" % (zlib.crc32(body) if crc is None else crc)
        return b"MSG " + subject + b" " + sid + b" " + r + b"%d" % len(body) + c + b"\r\n" + body + b"\r\n"

    stream = (
        msg(b"orders", b"1", b"$F.1.2.0.1.1", b"a")
        + msg(b"orders", b"1", b"", b"")
        + msg(b"other.x", b"22", b"$F.1.2.0.2.1", b"hello")
        + msg(b"orders", b"1", b"$F.1.2.0.3.1", b"bad", crc=0)
        + b"HMSG h 1 $F.1.2.0.4.1 12 14 " + b"%08x" % zlib.crc32(b"NATS/1.0\r\n\r\nhi") + b"\r\nNATS/1.0\r\n\r\nhi\r\n"
        + msg(b"orders", b"1", b"$F.1.2.0.5.1", b"z" * 300)
    )
    whole = proto.Parser(crc=True).feed(stream)
    p = proto.Parser(crc=True)
    byte = [e for i in range(len(stream)) for e in p.feed(stream[i : i + 1])]
    assert whole == byte
    assert [type(e).__name__ for e in whole] == ["Msg", "Msg", "Msg", "ParseError", "Msg", "Msg"]
    assert whole[1] == proto.Msg("orders", "1", None, None, b"", zlib.crc32(b""), True)
    third = whole[2]
    assert isinstance(third, proto.Msg)
    assert (third.subject, third.sid, third.payload) == ("other.x", "22", b"hello")
