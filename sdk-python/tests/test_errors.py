"""The generated error classes match protocol/errors.json and map -ERR lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fibril.errors as errors
from fibril import _proto as proto
from fibril._errors_gen import ERRORS

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT.parent / "protocol" / "errors.json"


def table() -> list[dict[str, object]]:
    if not TABLE.exists():
        pytest.skip(f"{TABLE} not present (protocol branch not merged)")
    data = json.loads(TABLE.read_text())
    assert isinstance(data, list)
    return data


def test_generated_file_is_fresh() -> None:
    table()
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_errors.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_code_has_a_class_with_its_flags() -> None:
    entries = table()
    assert set(ERRORS) == {e["code"] for e in entries}
    for e in entries:
        cls = ERRORS[str(e["code"])]
        assert issubclass(cls, errors.FibrilError)
        assert cls.code == e["code"]
        assert cls.retriable is bool(e["retriable"])
        assert cls.fatal is bool(e["fatal"])


def test_error_from_wire() -> None:
    e = errors.error_from_wire(proto.parse_err_text("stale_handle ack handle is superseded"))
    assert type(e) is ERRORS["stale_handle"]
    assert (e.code, e.message, e.retriable) == ("stale_handle", "ack handle is superseded", False)
    assert str(e) == "stale_handle: ack handle is superseded"

    e = errors.error_from_wire(proto.parse_err_text("queue_full server is busy"))
    assert e.retriable and not e.fatal and isinstance(e, errors.FibrilError)

    # A code this SDK does not know yet keeps its code.
    e = errors.error_from_wire(proto.parse_err_text("brand_new_code something"))
    assert type(e) is errors.FibrilError and e.code == "brand_new_code" and e.message == "something"

    # One-word codes are codes too.
    e = errors.error_from_wire(proto.parse_err_text("internal internal server error: boom"))
    assert type(e) is ERRORS["internal"] and e.message == "internal server error: boom" and e.retriable

    # SPEC 7.8 rule 3: any lowercase first word is taken as a (future) code.
    e = errors.error_from_wire(proto.parse_err_text("something odd happened"))
    assert e.code == "something" and e.message == "odd happened" and not e.retriable

    # NATS texts (non-Fibril lines) map through the table's nats_text column.
    e = errors.error_from_wire(proto.parse_err_text("Authorization Violation"))
    assert e.code == "auth_violation" and e.fatal
    e = errors.error_from_wire(proto.parse_err_text("maximum connections exceeded"))
    assert e.code == "max_connections" and e.retriable


def test_client_side_errors_are_fibril_errors() -> None:
    for cls in (errors.ConnectionClosedError, errors.ClientClosedError, errors.CorruptMessageError,
                errors.NotAckableError, errors.ProtocolError):
        assert issubclass(cls, errors.FibrilError)
        assert cls.code not in ERRORS


@pytest.mark.parametrize(
    "text, code, detail, message",
    [
        ("crc_mismatch payload checksum does not match: got 0, computed 1", "crc_mismatch", "got 0, computed 1",
         "payload checksum does not match: got 0, computed 1"),
        ("stale_handle ack handle is superseded by a later delivery", "stale_handle", "",
         "ack handle is superseded by a later delivery"),
        ("Permissions Violation for Publish to \"x\"", "permission_denied", "for Publish to \"x\"",
         "Permissions Violation for Publish to \"x\""),
        ("new_thing it happened", "new_thing", "it happened", "it happened"),
        ("Odd Words", "unknown", "Odd Words", "Odd Words"),
    ],
)
def test_error_detail_and_message(text: str, code: str, detail: str, message: str) -> None:
    e = errors.error_from_wire(proto.parse_err_text(text))
    assert (e.code, e.detail, e.message) == (code, detail, message)
