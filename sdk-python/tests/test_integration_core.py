"""Integration tests against the real ``fibril serve``: connection, plain pub/sub."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Server
from helpers import run, unique

import fibril
from fibril import sync
from fibril.errors import ConnectionClosedError


def test_connect_handshake_and_ping(server: Server) -> None:
    async def body() -> None:
        async with fibril.connect(server.url, name="py-test") as c:
            assert c.is_connected
            info = c.server_info
            assert info["fibril"] == 1
            assert c.max_unconfirmed >= 1
            await c.ping()
        assert not c.is_connected

    run(body())


def test_connect_refused_raises() -> None:
    async def body() -> None:
        with pytest.raises(ConnectionClosedError):
            await fibril.connect("nats://127.0.0.1:1", connect_timeout=2)

    run(body())


@pytest.mark.parametrize("crc", [True, False])
def test_plain_pub_sub(server: Server, crc: bool) -> None:
    subject = "_INBOX." + unique("plain")

    async def body() -> None:
        async with fibril.connect(server.url, crc=crc) as sub_c, fibril.connect(server.url, crc=crc) as pub_c:
            async with sub_c.subscribe(subject + ".>") as sub:
                # _INBOX subjects are never captured by a durable topic.
                pos = await pub_c.publish(subject + ".a", b"hello", headers={"X-Test": "1"})
                assert pos is None
                await pub_c.publish(subject + ".b", "world")
                m1 = await asyncio.wait_for(sub.next(), 5)
                m2 = await asyncio.wait_for(sub.next(), 5)
            assert (m1.subject, m1.data, m1.headers.get("X-Test")) == (subject + ".a", b"hello", "1")
            assert (m2.subject, m2.data, dict(m2.headers)) == (subject + ".b", b"world", {})
            assert (m1.crc is not None) == crc
            assert m1.handle is None
            with pytest.raises(fibril.NotAckableError):
                await m1.ack()

    run(body())


def test_sync_client_ping_and_publish(server: Server) -> None:
    with sync.connect(server.url) as c:
        assert c.server_info["fibril"] == 1
        c.ping()
        assert c.publish("_INBOX." + unique("s"), b"x") is None


def test_pipelined_burst_over_64k(server: Server) -> None:
    # 600 KB in flight: the server reassembles frames across many reads.
    async def body() -> None:
        async with fibril.connect(server.url) as c:
            futs = [await c.publish_async(f"_INBOX.burst.{i}", b"x" * 1000) for i in range(600)]
            assert await asyncio.gather(*futs) == [None] * 600

    run(body())


def test_pipelined_publishes_many_outstanding(server: Server) -> None:
    async def body() -> None:
        async with fibril.connect(server.url) as c:
            futs = [await c.publish_async(f"_INBOX.pipe.{i}", b"x" * 20) for i in range(400)]
            # All were written before any confirm was read: many outstanding.
            assert sum(not f.done() for f in futs) > 100
            assert await asyncio.gather(*futs) == [None] * 400

    run(body())


def test_many_tasks_share_one_subscription(server: Server) -> None:
    subject = "_INBOX." + unique("pool")

    async def body() -> None:
        async with fibril.connect(server.url) as c:
            sub = await c.subscribe(subject).start()

            async def take() -> bytes:
                return (await sub.next()).data

            waiting = [asyncio.ensure_future(take()) for _ in range(4)]
            await c.ping()
            for i in range(4):
                await c.publish(subject, f"{i}".encode())
            got = await asyncio.wait_for(asyncio.gather(*waiting), 5)
            assert sorted(got) == [b"0", b"1", b"2", b"3"]

            idle = [asyncio.ensure_future(take()) for _ in range(3)]
            await sub.close()  # every waiting task ends, none hangs
            for t in idle:
                with pytest.raises(StopAsyncIteration):
                    await asyncio.wait_for(t, 5)

    run(body())


def test_close_leaves_no_tasks_behind(server: Server) -> None:
    async def body() -> None:
        before = asyncio.all_tasks()
        async with fibril.connect(server.url, ping_interval=0.05) as c:
            sub = await c.subscribe("_INBOX." + unique("leak")).start()
            waiting = asyncio.ensure_future(sub.next())
            await c.publish("_INBOX.x", b"x")
            await c.ping()
        with pytest.raises(StopAsyncIteration):
            await waiting
        await asyncio.sleep(0)  # let cancelled tasks finish unwinding
        assert {t for t in asyncio.all_tasks() if not t.done()} - before == set()

    run(body())
