"""The blocking client across server crashes: each test has its own server,
killed (SIGKILL) and, where it says so, started again on the same address and
data directory."""

from __future__ import annotations

import threading

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, kill_server, start_server, stop_server
from helpers import unique, wait_until

import fibril
from fibril import sync
from fibril.errors import ConnectionClosedError, FibrilError, StaleHandleError

FAST = fibril.Reconnect(initial=0.01, max_delay=0.1)


@pytest.fixture
def own(fibril_bin: Path, tmp_path: Path) -> Iterator[list[Server]]:
    """A server of the test's own (a one-element list, so a restart can replace it)."""
    s = [start_server(fibril_bin, str(tmp_path))]
    try:
        yield s
    finally:
        if s[0].proc.returncode is None:
            stop_server(s[0])


def test_sync_client_survives_server_restart(own: list[Server], fibril_bin: Path) -> None:
    topic = unique("rs")
    confirmed: set[bytes] = set()
    received: set[bytes] = set()
    errors: list[BaseException] = []
    with sync.connect(own[0].url, reconnect=FAST, timeout=30) as c:
        c.create_topic(topic)

        def consumer() -> None:
            # Plain user code: process, ack. An ack whose answer was lost with
            # the connection may or may not have been applied: the message
            # comes again or not, either is fine (at least once). An ack of a
            # delivery of the old connection sent on the new one is stale when
            # the message was redelivered meanwhile.
            try:
                for m in c.consume(topic, "g", max_in_flight=16):
                    received.add(m.data)
                    try:
                        m.ack()
                    except StaleHandleError:
                        assert m.delivery_count == 1
                    except FibrilError as e:
                        assert e.retriable, e
            except BaseException as e:  # noqa: BLE001 - reported to the test thread
                errors.append(e)

        t = threading.Thread(target=consumer)
        t.start()
        for i in range(100):
            d = f"before-{i}".encode()
            assert c.publish(topic, d) is not None
            confirmed.add(d)
        wait_until(lambda: len(received) >= 30, what="the consumer to get going")
        # Deliveries are buffered and in flight while the server dies.
        kill_server(own[0])
        wait_until(lambda: not c.is_connected, what="the client to notice the crash")
        # A publish made during the outage waits for the new connection.
        during: list[fibril.Position | None] = []
        pt = threading.Thread(target=lambda: during.append(c.publish(topic, b"during")))
        pt.start()
        own[0] = start_server(fibril_bin, own[0].data_dir, listen=own[0].addr)
        pt.join(30)
        assert len(during) == 1 and during[0] is not None
        confirmed.add(b"during")
        # Publishing goes on over the new connection.
        futs = {f"after-{i}".encode(): c.publish_async(topic, f"after-{i}") for i in range(100)}
        for d, f in futs.items():
            assert f.result(30) is not None
            confirmed.add(d)
        assert c.connects >= 2 and c.is_connected
        # The renewed subscription delivers every confirmed message not yet
        # acked (at least once: some may come twice).
        wait_until(lambda: confirmed <= received or bool(errors), timeout=30, what="every confirmed message")
        assert errors == []
        assert received == confirmed
    t.join(10)  # close() ended the consumer's loop
    assert not t.is_alive() and errors == []


def test_sync_no_reconnect_ends_subscriptions_and_fails_calls(own: list[Server]) -> None:
    c = sync.connect(own[0].url, reconnect=False)
    sub = c.subscribe("_INBOX." + unique("nr")).start()
    kill_server(own[0])
    with pytest.raises(ConnectionClosedError):
        sub.next(timeout=5)
    with pytest.raises(FibrilError):
        c.publish("_INBOX.x", b"late")
    assert not c.is_connected and c.connects == 1
    c.close()


def test_sync_gives_up_after_max_attempts(own: list[Server]) -> None:
    c = sync.connect(own[0].url, reconnect=fibril.Reconnect(initial=0.01, max_delay=0.02, max_attempts=3))
    c.ping()
    kill_server(own[0])  # and nothing listens any more
    with pytest.raises(ConnectionClosedError):
        c.publish("_INBOX.x", b"never")
    c.close()
