"""Mutated wire bytes never make the parser fail with anything but
ProtocolError (fatal) or ParseError events (non-fatal): no other exception,
no hang, no event past the input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fibril import _proto as proto

VECTORS = Path(__file__).resolve().parent.parent.parent / "conformance" / "vectors"


def seeds() -> list[bytes]:
    out: list[bytes] = []
    for f in ("client_to_server", "server_to_client", "crc", "invalid"):
        p = VECTORS / f"{f}.json"
        if p.exists():
            out += [v["wire"].encode("latin-1") for v in json.loads(p.read_text())["vectors"]]
    return out or [b"MSG a 1 5\r\nhello\r\n", b"PUB a 5\r\nhello\r\n", b"+OK 0:1\r\n"]


def mutate(rng: random.Random, b: bytes) -> bytes:
    data = bytearray(b)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(3)
        i = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(i, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[i:i] = bytes([rng.choice(b" \r\n\t.*>$0123456789-'")])
        elif data:
            del data[min(i, len(data) - 1)]
    return bytes(data)


@pytest.mark.parametrize("direction", list(proto.Direction))
@pytest.mark.parametrize("crc", [False, True])
def test_mutated_frames(direction: proto.Direction, crc: bool) -> None:
    rng = random.Random(f"{direction}{crc}")
    corpus = seeds()
    for _ in range(3000):
        wire = mutate(rng, rng.choice(corpus)) + rng.choice(corpus)
        p = proto.Parser(direction=direction, crc=crc, max_payload=4096, max_control_line=256)
        pos = 0
        try:
            while pos < len(wire):
                step = rng.randrange(1, 40)
                p.feed(wire[pos : pos + step])
                pos += step
        except proto.ProtocolError as e:
            assert e.wire_code in {"bad_frame", "max_payload", "max_control_line", "invalid_connect"}
        assert 0 <= p.consumed <= len(wire)
        assert p.consumed + p.buffered() <= len(wire)
