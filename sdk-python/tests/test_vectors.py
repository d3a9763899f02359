"""The shared wire vectors (conformance/vectors/*.json) through this SDK's parser
and encoders: every vector, fed whole, byte at a time and at random splits, and
every canonical vector re-encoded byte for byte."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from fibril import _proto as proto
from fibril.errors import error_from_wire, map_err_text

VECTORS = Path(__file__).resolve().parent.parent.parent / "conformance" / "vectors"
FRAME_FILES = ["client_to_server", "server_to_client", "crc", "invalid"]
FIELDS: dict[str, Any] = {
    "subject": "", "reply": "", "group": "", "sid": "", "header": "", "payload": "", "crc": "",
    "has_crc": False, "max": 0, "millis": 0, "handles": [], "text": "", "json": "",
}


def load(name: str) -> list[dict[str, Any]]:
    path = VECTORS / f"{name}.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    vectors = data["vectors"]
    assert isinstance(vectors, list)
    return vectors


def frame_vectors(*, canonical: bool = False) -> list[Any]:
    out = [
        pytest.param(v, id=f"{f}:{v['name']}")
        for f in FRAME_FILES
        for v in load(f)
        if v.get("canonical") or not canonical
    ]
    if not out:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no vectors in {VECTORS}"))]
    return out


def b(s: str) -> bytes:
    """A vector byte string: one code point per byte."""
    return s.encode("latin-1")


def lat(s: str | bytes | None) -> str:
    """One of our values as a vector byte string."""
    if s is None:
        return ""
    if isinstance(s, str):
        s = s.encode("utf-8", "surrogateescape")
    return s.decode("latin-1")


def as_vector(ev: proto.Event) -> dict[str, Any]:
    """Our event in the vectors' event form, every field present."""
    if isinstance(ev, proto.ParseError):
        return {"error": ev.code, "fatal": False}
    d: dict[str, Any] = dict(FIELDS)
    if isinstance(ev, proto.Command):
        d.update(
            op=ev.op, subject=lat(ev.subject), reply=lat(ev.reply), group=lat(ev.group), sid=lat(ev.sid),
            header=lat(ev.header), payload=lat(ev.payload), crc="" if ev.crc is None else f"{ev.crc:08x}",
            has_crc=ev.has_crc, max=ev.max, millis=ev.millis, handles=list(ev.handles), json=lat(ev.json),
        )
    elif isinstance(ev, proto.Msg):
        d.update(
            op="MSG" if ev.header is None else "HMSG", subject=lat(ev.subject), sid=lat(ev.sid), reply=lat(ev.reply),
            header=lat(ev.header), payload=lat(ev.payload), crc="" if ev.crc is None else f"{ev.crc:08x}",
            has_crc=ev.crc is not None,
        )
    elif isinstance(ev, proto.Info):
        d.update(op="INFO", json=lat(ev.json))
    elif isinstance(ev, proto.Ok):
        d.update(op="+OK", text=lat(ev.arg))
    elif isinstance(ev, proto.Err):
        d.update(op="-ERR", text=lat(ev.text))
    elif isinstance(ev, proto.Ping):
        d.update(op="PING")
    elif isinstance(ev, proto.Pong):
        d.update(op="PONG")
    return d


def expected(ev: dict[str, Any]) -> dict[str, Any]:
    if "error" in ev:
        return {"error": ev["error"], "fatal": bool(ev.get("fatal", False))}
    d = dict(FIELDS)
    d.update(ev)
    return d


def parser_for(v: dict[str, Any]) -> proto.Parser:
    lim = v.get("limits") or {}
    return proto.Parser(
        direction=proto.Direction(v["direction"]),
        crc=bool(v.get("crc")),
        crc_after_connect=bool(v.get("crc_after_connect")),
        max_control_line=int(lim.get("max_control_line", proto.DEFAULT_MAX_CONTROL_LINE)),
        max_payload=int(lim.get("max_payload", proto.DEFAULT_MAX_PAYLOAD)),
    )


def run_vector(v: dict[str, Any], chunks: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    p = parser_for(v)
    got: list[dict[str, Any]] = []
    for c in chunks:
        try:
            got += [as_vector(e) for e in p.feed(c)]
        except proto.ProtocolError as e:
            got += [as_vector(x) for x in e.events]
            got.append({"error": e.wire_code, "fatal": True})
            break
    return got, p.consumed


def splits(wire: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.randrange(len(wire) + 1) for _ in range(rng.randrange(1, 6)))
    out, prev = [], 0
    for c in cuts + [len(wire)]:
        out.append(wire[prev:c])
        prev = c
    return out


@pytest.mark.parametrize("v", frame_vectors())
def test_frame_vector(v: dict[str, Any]) -> None:
    wire = b(v["wire"])
    want = [expected(e) for e in v["events"]]
    rng = random.Random(v["name"])
    feeds = {
        "whole": [wire],
        "byte-at-a-time": [wire[i : i + 1] for i in range(len(wire))],
        **{f"random-{k}": splits(wire, rng) for k in range(5)},
    }
    for how, chunks in feeds.items():
        got, consumed = run_vector(v, chunks)
        assert got == want, how
        assert consumed == v["consumed"], how


@pytest.mark.parametrize("v", frame_vectors(canonical=True))
def test_canonical_vector_encodes_to_wire(v: dict[str, Any]) -> None:
    crc = bool(v.get("crc"))
    out = []
    for e in v["events"]:
        out.append(encode(expected(e), crc))
        if e.get("op") == "CONNECT" and v.get("crc_after_connect"):
            crc = True
    assert b"".join(out) == b(v["wire"])


def ours(s: str) -> str:
    """A vector byte string as this SDK's str (UTF-8, undecodable bytes escaped)."""
    return b(s).decode("utf-8", "surrogateescape")


def encode(e: dict[str, Any], crc: bool) -> bytes:
    e = {k: ours(x) if isinstance(x, str) and k not in ("header", "payload") else x for k, x in e.items()}
    e["handles"] = [ours(h) for h in e["handles"]]
    op = e["op"]
    header = b(e["header"]) if op in ("HPUB", "HMSG") else None
    hs = e["handles"]
    ms = e["millis"] or None
    if op in ("PUB", "HPUB"):
        return proto.encode_pub(e["subject"], b(e["payload"]), reply=e["reply"] or None, header=header,
                                crc=crc, dash=crc and not e["has_crc"])
    if op in ("MSG", "HMSG"):
        return proto.encode_msg(e["subject"], e["sid"], b(e["payload"]), reply=e["reply"] or None, header=header,
                                crc=crc)
    simple: dict[str, Any] = {
        "SUB": lambda: proto.encode_sub(e["subject"], e["sid"], queue=e["group"] or None,
                                        max_inflight=e["max"] or None),
        "UNSUB": lambda: proto.encode_unsub(e["sid"], e["max"] or None),
        "PING": lambda: proto.PING,
        "PONG": lambda: proto.PONG,
        "CONNECT": lambda: proto.encode_connect(e["json"]),
        "INFO": lambda: proto.encode_info(e["json"]),
        "+OK": lambda: proto.encode_ok(e["text"]),
        "-ERR": lambda: proto.encode_err(e["text"]),
        "POLL": lambda: proto.encode_poll(e["subject"], e["group"], e["max"], ms),
        "ACK": lambda: proto.encode_ack(hs),
        "NACK": lambda: proto.encode_nack(hs[0], ms),
        "REJECT": lambda: proto.encode_reject(hs[0]),
        "EXTEND": lambda: proto.encode_extend(hs[0], ms),
    }
    if op in simple:
        out: bytes = simple[op]()
        return out
    noun, verb = op.split(" ")
    names = [n for n in (e["subject"], e["group"]) if n]
    return proto.encode_manage(noun, verb, *names, config=e["json"] or None)


def params(name: str) -> list[Any]:
    vs: list[Any] = load(name)
    return vs or [pytest.param(None, marks=pytest.mark.skip(reason=f"no vectors in {VECTORS}"))]


def test_vector_files_are_all_known() -> None:
    if not VECTORS.exists():
        pytest.skip(f"no vectors in {VECTORS}")
    files = {p.stem for p in VECTORS.glob("*.json")}
    assert files == set(FRAME_FILES) | {"handles", "subjects", "ack_bodies", "confirms", "err_texts"}, (
        "a new vector file needs a runner"
    )


@pytest.mark.parametrize("v", params("handles"))
def test_handle_vector(v: dict[str, Any]) -> None:
    h = proto.parse_handle(v["wire"])
    if "error" in v:
        assert h is None
        return
    assert h is not None
    want = v["handle"]
    assert (h.topic, h.group, h.partition, h.seq, h.attempt) == tuple(
        int(want[k]) for k in ("topic", "group", "partition", "seq", "attempt")
    )
    assert str(h) == v["wire"]


@pytest.mark.parametrize("v", params("subjects"))
def test_subject_vector(v: dict[str, Any]) -> None:
    assert proto.subject_error(b(v["subject"]), wildcards=v["wildcards"]) == v.get("error")


@pytest.mark.parametrize("v", params("ack_bodies"))
def test_ack_body_vector(v: dict[str, Any]) -> None:
    got = proto.parse_ack_body(b(v["body"]))
    if "error" in v:
        assert got is None
    else:
        assert got == (v["kind"], v["delay_ns"])


@pytest.mark.parametrize("v", params("confirms"))
def test_confirm_vector(v: dict[str, Any]) -> None:
    if "error" in v:
        with pytest.raises(proto.ProtocolError) as ei:
            proto.parse_position(v["text"])
        assert ei.value.wire_code == v["error"]
    elif v["stored"]:
        assert proto.parse_position(v["text"]) == (v["partition"], int(v["seq"]), v.get("duplicate", False))
    else:
        assert proto.parse_position(v["text"]) is None


@pytest.mark.parametrize("v", params("err_texts"))
def test_err_text_vector(v: dict[str, Any]) -> None:
    assert map_err_text(ours(v["text"])) == (v["code"], ours(v["detail"]))
    # The line form reaches the same typed error.
    err = proto.Parser().feed(proto.encode_err(ours(v["text"]).strip("'")))[0]
    assert isinstance(err, proto.Err)
    e = error_from_wire(err)
    assert (e.code, e.detail) == (v["code"], ours(v["detail"]))
