"""Failover paths no real server takes on demand (SPEC.md 11.1), against a
scripted peer in the test (helpers.FakePeer): publishes answered not_leader,
the replay order after a cut, and the order and backoff of the passes over
the server list. The real-server side is in test_failover.py."""

from __future__ import annotations

import asyncio

import pytest
from helpers import HANG_UP, NOT_LEADER, FakePeer, run, wait_for

import fibril
from fibril import sync
from fibril.errors import NotLeaderError, PermissionDeniedError, ProtocolError

FAST = fibril.Reconnect(initial=0.01, max_delay=0.05)


def test_publish_answered_not_leader_is_resent_until_confirmed() -> None:
    def answer(_n: int, line: str, payload: bytes) -> bytes:
        sent = sum(1 for _, ln, p in peer.frames if ln.startswith("PUB") and p == payload)
        return NOT_LEADER if sent <= 2 else b"+OK 0:7\r\n"

    peer = FakePeer(answer)

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False) as c:
                assert await c.publish("orders", b"one") == fibril.Position(0, 7)
        finally:
            await peer.close()

    run(body())
    assert peer.payloads() == [b"one"] * 3
    assert peer.accepted == 1  # resent on the same connection


def test_publish_answered_not_leader_fails_after_its_timeout() -> None:
    peer = FakePeer(lambda _n, line, _p: NOT_LEADER)

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False, not_leader_timeout=0.3) as c:
                with pytest.raises(NotLeaderError) as e:
                    await c.publish("orders", b"one")
                assert e.value.retriable and e.value.code == "not_leader"
        finally:
            await peer.close()

    run(body())
    assert len(peer.payloads()) >= 2  # sent, then resent at least once before giving up


def test_publish_not_leader_then_refused_raises_the_refusal() -> None:
    def answer(_n: int, _line: str, _p: bytes) -> bytes:
        return NOT_LEADER if len(peer.payloads()) == 1 else b"-ERR 'permission_denied permission denied'\r\n"

    peer = FakePeer(answer)

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False) as c:
                with pytest.raises(PermissionDeniedError):
                    await c.publish("orders", b"one")
        finally:
            await peer.close()

    run(body())
    assert len(peer.payloads()) == 2


def test_other_commands_answered_not_leader_raise_at_once() -> None:
    peer = FakePeer(lambda _n, line, _p: NOT_LEADER)

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False) as c:
                with pytest.raises(NotLeaderError):
                    await c.topic_info("orders")
        finally:
            await peer.close()

    run(body())
    assert [ln for _, ln, _ in peer.frames] == ["TOPIC INFO orders"]


def test_not_leader_resends_stay_within_the_publish_window() -> None:
    # A window of 2: while two publishes are parked after not_leader, a third
    # must not be sent. The peer confirms once it has seen six PUBs.
    def answer(_n: int, _line: str, _p: bytes) -> bytes:
        seen = len(peer.payloads())
        return NOT_LEADER if seen <= 6 else f"+OK 0:{seen}\r\n".encode()

    peer = FakePeer(answer, info={"max_unconfirmed": 2})

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False) as c:
                res = await asyncio.gather(*(c.publish("orders", str(i).encode()) for i in range(3)))
                assert all(isinstance(p, fibril.Position) for p in res)
        finally:
            await peer.close()

    run(body())
    sent = peer.payloads()
    assert set(sent[:6]) == {b"0", b"1"}
    assert b"2" in sent[6:]


def test_parked_publish_is_replayed_after_a_cut() -> None:
    # Connection 1 answers not_leader and then drops: the parked publish
    # goes to the next connection, which confirms it.
    def answer(n: int, _line: str, _p: bytes) -> bytes | str:
        if n == 1:
            asyncio.get_running_loop().call_soon(cut)  # after the answer is written
            return NOT_LEADER
        return b"+OK 0:1\r\n"

    peer = FakePeer(answer)

    def cut() -> None:
        for w in peer._writers:
            w.transport.abort()

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False, reconnect=FAST, not_leader_timeout=30) as c:
                assert await c.publish("orders", b"one") == fibril.Position(0, 1)
                assert c.connects == 2
        finally:
            await peer.close()

    run(body())
    assert peer.payloads(conn=1) == [b"one"] and peer.payloads(conn=2) == [b"one"]


def test_replay_sends_unconfirmed_publishes_first_then_subscriptions_then_fetches() -> None:
    # Connection 1 answers SUB and nothing else, and drops once the fetch and
    # three publishes are in; connection 2 answers everything.
    def answer(n: int, line: str, _p: bytes) -> bytes | str | None:
        if n == 1:
            if line.startswith("SUB"):
                return b"+OK\r\n"
            if len(peer.payloads(conn=1)) == 3 and any(ln.startswith("POLL") for _, ln, _ in peer.frames):
                return HANG_UP
            return None
        if line.startswith("POLL"):
            return b"+OK 0\r\n"
        return b"+OK -\r\n" if line.startswith("PUB") else b"+OK\r\n"

    peer = FakePeer(answer)

    async def body() -> None:
        await peer.start()
        try:
            async with fibril.connect(peer.url, crc=False, reconnect=FAST) as c:
                async with c.subscribe("events"):
                    p0 = await c.publish_async("orders", b"0")
                    fetch = asyncio.ensure_future(c.fetch("orders", "g", wait=5))
                    await wait_for(lambda: _true(any(ln.startswith("POLL") for _, ln, _ in peer.frames)), what="POLL")
                    rest = [await c.publish_async("orders", str(i).encode()) for i in (1, 2)]
                    await asyncio.gather(p0, *rest)
                    assert await fetch == []
                    assert c.connects == 2
        finally:
            await peer.close()

    run(body())
    second = [ln.split()[0] + (" " + p.decode() if p else "") for n, ln, p in peer.frames if n == 2]
    assert second[:5] == ["PUB 0", "PUB 1", "PUB 2", "SUB", "POLL"]


async def _true(v: bool) -> bool:
    return v


def test_reconnect_tries_each_server_in_turn_and_backs_off_per_pass() -> None:
    # Servers a (serves connection 1, then hangs up twice), b and c (always
    # hang up). After a drops: pass 1 and 2 try b, c, a and fail; pass 3
    # reaches a. The backoff is asked once per pass.
    log: list[tuple[FakePeer, int]] = []
    a = FakePeer(log=log, hang_up=lambda n: n in (2, 3))
    b = FakePeer(log=log, hang_up=lambda n: True)
    c3 = FakePeer(log=log, hang_up=lambda n: True)
    delays: list[int] = []

    class Recording(fibril.Reconnect):
        def delay(self, attempt: int, rng: object = None) -> float:
            delays.append(attempt)
            return 0.0

    async def body() -> None:
        for p in (a, b, c3):
            await p.start()
        try:
            async with fibril.connect(servers=[a.url, b.url, c3.url], crc=False, reconnect=Recording()) as c:
                for w in a._writers:
                    w.transport.abort()
                await wait_for(lambda: _true(c.connects == 2 and c.is_connected), what="reconnect")
                assert c.server_url == a.url
        finally:
            for p in (a, b, c3):
                await p.close()

    run(body())
    names = {id(a): "a", id(b): "b", id(c3): "c"}
    assert [names[id(p)] for p, _ in log] == ["a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]
    assert delays == [0, 1, 2]


def test_sync_client_takes_the_same_arguments() -> None:
    peer = FakePeer(lambda _n, _line, _p: NOT_LEADER, info={"connect_urls": ["127.0.0.1:1"]})
    loop = asyncio.new_event_loop()
    import threading

    loop.run_until_complete(peer.start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        with sync.connect(servers=[peer.url], crc=False, not_leader_timeout=0.2, discover=False) as c:
            assert c.servers == [peer.url] and c.server_url == peer.url
            with pytest.raises(NotLeaderError):
                c.publish("orders", b"one")
        with sync.connect(peer.url, crc=False) as c:
            assert c.servers == [peer.url, "nats://127.0.0.1:1"]
    finally:
        asyncio.run_coroutine_threadsafe(peer.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


def test_a_server_that_is_not_fibril_adds_no_servers() -> None:
    peer = FakePeer(info={"fibril": 0, "connect_urls": ["127.0.0.1:1"]})

    async def body() -> None:
        await peer.start()
        try:
            c = fibril.Client(peer.url, crc=False)
            with pytest.raises(ProtocolError):
                await c._start()
            assert c.servers == [peer.url]
        finally:
            await peer.close()

    run(body())
