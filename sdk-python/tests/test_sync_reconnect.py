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
from fibril.errors import ConnectionClosedError, FibrilError, TimedOutError

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
    with sync.connect(own[0].url, reconnect=FAST, timeout=30) as c:
        c.create_topic(topic)
        for i in range(100):
            d = f"before-{i}".encode()
            assert c.publish(topic, d) is not None
            confirmed.add(d)
        with c.consume(topic, "g", max_in_flight=16) as sub:
            for _ in range(30):
                m = sub.next(timeout=10)
                m.ack()
                received.add(m.data)
            # Deliveries are buffered and in flight while the server dies.
            kill_server(own[0])
            wait_until(lambda: not c.is_connected, what="the client to notice the crash")
            # A publish made during the outage waits for the new connection.
            during: list[fibril.Position | None] = []
            t = threading.Thread(target=lambda: during.append(c.publish(topic, b"during")))
            t.start()
            own[0] = start_server(fibril_bin, own[0].data_dir, listen=own[0].addr)
            t.join(30)
            assert len(during) == 1 and during[0] is not None
            confirmed.add(b"during")
            # Publishing goes on over the new connection (it waits for it).
            futs = {f"after-{i}".encode(): c.publish_async(topic, f"after-{i}") for i in range(100)}
            for d, f in futs.items():
                assert f.result(30) is not None
                confirmed.add(d)
            assert c.connects >= 2 and c.is_connected
            # The renewed subscription delivers every confirmed message not yet
            # acked (at least once: some may come twice).
            while not confirmed <= received:
                try:
                    m = sub.next(timeout=10)
                except TimedOutError:
                    pytest.fail(f"{len(confirmed - received)} confirmed messages never came again")
                m.ack()
                received.add(m.data)
        assert received == confirmed
        assert c.fetch(topic, "g", 10, wait=0.2) == []


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
