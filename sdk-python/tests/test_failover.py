"""Several servers and failover (SPEC.md 11.1) against real ``fibril serve``
processes: a dead first address, a server killed (SIGKILL) under a stream of
confirmed publishes, and servers found through INFO connect_urls
(``--client-advertise``). The not_leader path and the replay order are in
test_failover_peer.py (no real server answers not_leader on demand)."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, kill_server, start_server, stop_server
from helpers import run, unique, wait_for

import fibril
from fibril import sync
from fibril.errors import ConnectionClosedError

FAST = fibril.Reconnect(initial=0.01, max_delay=0.1)


def dead_url() -> str:
    """Returns the URL of a local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"nats://127.0.0.1:{port}"


@pytest.fixture
def servers(fibril_bin: Path, tmp_path: Path) -> Iterator[list[Server]]:
    """Servers the test starts with ``start(name, *flags)``; all stopped after."""
    started: list[Server] = []
    yield started
    for s in started:
        if s.proc.returncode is None:
            stop_server(s)


def start(fibril_bin: Path, tmp_path: Path, started: list[Server], name: str, *flags: str, listen: str = "127.0.0.1:0") -> Server:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    s = start_server(fibril_bin, str(d), *flags, listen=listen)
    started.append(s)
    return s


def test_connects_to_the_second_when_the_first_is_dead(server: Server) -> None:
    dead = dead_url()

    async def body() -> None:
        async with fibril.connect(servers=[dead, server.url]) as c:
            assert c.server_url == server.url and c.connects == 1
            await c.ping()
        async with fibril.connect(f"{dead},{server.url}") as c:
            assert c.server_url == server.url
            assert c.servers[:2] == [dead, server.url]

    run(body())
    with sync.connect(servers=[dead, server.url]) as sc:
        assert sc.server_url == server.url
        sc.ping()


def test_no_server_reachable_names_each_address() -> None:
    a, b = dead_url(), dead_url()

    async def body() -> None:
        with pytest.raises(ConnectionClosedError) as e:
            await fibril.connect(servers=[a, b], connect_timeout=2)
        assert a in str(e.value) and b in str(e.value)
        with pytest.raises(ConnectionClosedError, match="connect to 127.0.0.1"):
            await fibril.connect(a, connect_timeout=2)  # one address: its own error, as before

    run(body())


def test_bad_server_entries_raise_value_error() -> None:
    for bad in ("nats://a:1,,nats://b:2", "nats://a:1,ftp://b:2", "nats://a:port"):
        with pytest.raises(ValueError):
            fibril.connect(bad)
    with pytest.raises(ValueError):
        fibril.connect("nats://a:1", servers=["nats://b:2"])
    with pytest.raises(ValueError):
        sync.connect(servers=["nats://a:1", ""])


def test_publishes_confirmed_before_a_crash_survive_failover(fibril_bin: Path, tmp_path: Path, servers: list[Server]) -> None:
    a = start(fibril_bin, tmp_path, servers, "a")
    b = start(fibril_bin, tmp_path, servers, "b")
    topic = unique("fo")
    for s in (a, b):
        with sync.connect(s.url) as m:
            m.create_topic(topic)
    n, kill_after = 1500, 300
    confirmed: set[bytes] = set()

    def on_confirm(data: bytes, f: asyncio.Future[fibril.Position | None]) -> None:
        if not f.cancelled() and f.exception() is None and f.result() is not None:
            confirmed.add(data)

    async def body() -> None:
        async with fibril.connect(servers=[a.url, b.url], reconnect=FAST, discover=False) as c:
            futs = []
            for i in range(n):
                data = str(i).encode()
                f = await c.publish_async(topic, data)
                f.add_done_callback(functools.partial(on_confirm, data))
                futs.append(f)
                if i == kill_after * 2:
                    await wait_for(lambda: _true(len(confirmed) >= kill_after), what="confirms from a")
                    kill_server(a)  # SIGKILL with publishes in flight
            await asyncio.gather(*futs)
            assert c.server_url == b.url and c.connects == 2

    run(body(), timeout=120)
    assert len(confirmed) == n
    # a comes back on its address and data directory: what it confirmed is there.
    servers.append(start_server(fibril_bin, a.data_dir, listen=a.addr))
    stored: dict[str, set[bytes]] = {}
    for s in (servers[-1], b):
        with sync.connect(s.url) as m:
            m.create_group(topic, "check", start="earliest")
            got: set[bytes] = set()
            while batch := m.fetch(topic, "check", max_messages=1000):
                got |= {x.data for x in batch}
                m.ack(batch)
            stored[s.url] = got
    assert stored[a.url] and stored[b.url]  # both servers took part
    lost = confirmed - stored[a.url] - stored[b.url]
    assert not lost, f"{len(lost)} confirmed publishes lost, e.g. {sorted(lost)[:5]}"


async def _true(v: bool) -> bool:
    return v


def test_discovered_server_is_reached_after_a_loss(fibril_bin: Path, tmp_path: Path, servers: list[Server]) -> None:
    b = start(fibril_bin, tmp_path, servers, "b")
    a = start(fibril_bin, tmp_path, servers, "a", "--client-advertise", b.addr)

    async def body() -> None:
        async with fibril.connect(a.url, reconnect=FAST) as c:
            assert c.servers == [a.url, b.url]  # learnt from a's INFO
            kill_server(a)
            await wait_for(lambda: _true(c.connects == 2 and c.is_connected), what="failover to b")
            assert c.server_url == b.url
            assert await c.publish("_INBOX." + unique("d"), b"x") is None

    run(body())


def test_without_discovery_the_advertised_server_is_not_tried(fibril_bin: Path, tmp_path: Path, servers: list[Server]) -> None:
    b = start(fibril_bin, tmp_path, servers, "b")
    a = start(fibril_bin, tmp_path, servers, "a", "--client-advertise", b.addr)
    gives_up = fibril.Reconnect(initial=0.01, max_delay=0.02, max_attempts=3)

    async def body() -> None:
        async with fibril.connect(a.url, reconnect=gives_up, discover=False) as c:
            assert c.servers == [a.url]
            kill_server(a)
            with pytest.raises(ConnectionClosedError):
                await c.publish("_INBOX.x", b"never")
            assert c.connects == 1 and not c.is_connected

    run(body())
