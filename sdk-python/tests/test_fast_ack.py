"""Fast acks (issue 33): coalesced ``ack_async``, the handler-style ``run``,
units in seconds or timedelta, ``exist_ok``; against the real server."""

from __future__ import annotations

import asyncio
import warnings
from datetime import timedelta

import pytest
from conftest import Server
from helpers import run, unique, wait_for

import fibril
from fibril import _proto as proto


async def backlog(c: fibril.Client, n: int, *, lease: float = 600.0) -> str:
    """Makes a one-partition topic with group ``g`` (a long lease, so only a
    hand-back makes a delivery ready again soon) and n messages in it."""
    topic = unique("t")
    await c.create_topic(topic, partitions=1)
    await c.create_group(topic, "g", lease=lease)
    futs = [await c.publish_async(topic, str(i)) for i in range(n)]
    await asyncio.gather(*futs)
    return topic


async def group_counts(c: fibril.Client, topic: str) -> tuple[int, int]:
    gi = await c.group_info(topic, "g")
    return int(gi["pending"]), int(gi["inflight"])


def test_ack_async_coalesces_a_burst(durable: Server) -> None:
    """A burst of 300 ack_async calls goes out as few ACK lines (it used to be one
    command and one commit per message); every future resolves."""

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = await backlog(c, 300)
            msgs = await c.fetch(topic, "g", 300, wait=2)
            assert len(msgs) == 300
            sent: list[bytes] = []
            conn = c._conn
            assert conn is not None
            write = conn.write

            def spy(frame: bytes) -> None:
                sent.append(frame)
                write(frame)

            conn.write = spy  # type: ignore[method-assign]
            futs = [m.ack_async() for m in msgs]
            assert all(m.settling and not m.settled for m in msgs)  # settled: only once answered
            await asyncio.gather(*futs)
            acks = [f for f in sent if f.startswith(b"ACK ")]
            assert 1 <= len(acks) <= 10, f"{len(acks)} ACK lines for 300 acks"
            assert all(m.settled for m in msgs)
            assert await group_counts(c, topic) == (0, 0)

    run(body())


def test_ack_async_each_future_gets_its_own_outcome(durable: Server) -> None:
    """In a shared ACK line with a stale handle, only that message's future fails."""

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = await backlog(c, 3)
            msgs = await c.fetch(topic, "g", 3, wait=2)
            await msgs[1].nack()
            again = await c.fetch(topic, "g", 1, wait=2)  # msgs[1] redelivered: its old handle is stale
            futs = [m.ack_async() for m in msgs]
            res = await asyncio.gather(*futs, return_exceptions=True)
            assert res[0] is None and res[2] is None
            assert isinstance(res[1], fibril.errors.StaleHandleError), res
            await again[0].ack()

    run(body())


def test_run_acks_on_return_nacks_on_raise(durable: Server) -> None:
    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = await backlog(c, 20)
            seen: list[tuple[str, int]] = []
            errors: list[BaseException] = []
            sub = c.consume(topic, "g")

            async def handle(msg: fibril.Msg) -> None:
                seen.append((msg.data.decode(), msg.delivery_count))
                if msg.data == b"7" and msg.delivery_count == 1:
                    raise RuntimeError("first try fails")
                if len(seen) == 21:
                    asyncio.get_running_loop().call_soon(asyncio.ensure_future, sub.close())

            await sub.run(handle, concurrency=3, nack_delay=timedelta(milliseconds=10), on_error=errors.append)
            assert sorted(d for d, n in seen if n == 1) == sorted(str(i) for i in range(20))
            assert ("7", 2) in seen
            assert [str(e) for e in errors] == ["first try fails"]
            await wait_for(lambda: _zero(c, topic), what="every message settled")

    run(body())


async def _zero(c: fibril.Client, topic: str) -> bool:
    return await group_counts(c, topic) == (0, 0)


def test_run_close_with_backlog_hands_it_back(durable: Server) -> None:
    """run stops after the messages being handled when the subscription closes;
    the buffered ones are pending again at once (the lease is 10 minutes)."""

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = await backlog(c, 500)
            done = 0
            sub = c.consume(topic, "g", max_in_flight=200)

            async def handle(msg: fibril.Msg) -> None:
                nonlocal done
                done += 1
                if done == 5:
                    await asyncio.sleep(0.1)  # the client's buffer fills meanwhile
                    await sub.close()

            await sub.run(handle)
            assert done == 5
            await wait_for(lambda: _counts_are(c, topic, (495, 0)), what="the backlog handed back")

    run(body())


async def _counts_are(c: fibril.Client, topic: str, want: tuple[int, int]) -> bool:
    return await group_counts(c, topic) == want


def test_run_cancelled_hands_back_the_message_in_hand(durable: Server) -> None:
    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = await backlog(c, 10)
            started = asyncio.Event()

            async def handle(msg: fibril.Msg) -> None:
                started.set()
                await asyncio.sleep(60)

            task = asyncio.ensure_future(c.consume(topic, "g").run(handle))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await wait_for(lambda: _counts_are(c, topic, (10, 0)), what="everything handed back")

    run(body())


def test_units_seconds_timedelta_and_deprecated_ms(durable: Server) -> None:
    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = unique("t")
            info = await c.create_topic(topic, max_age=timedelta(hours=1), retention="limits")
            assert info["config"]["max_age_ms"] == 3_600_000
            g = await c.create_group(topic, "a", lease=timedelta(seconds=30))
            assert g["config"]["lease_ms"] == 30_000
            g = await c.create_group(topic, "b", lease=2.5)
            assert g["config"]["lease_ms"] == 2_500
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                g = await c.create_group(topic, "c", lease_ms=1500)
            assert g["config"]["lease_ms"] == 1500
            assert any(issubclass(x.category, DeprecationWarning) for x in w)

    run(body())
    assert proto.encode_nack("$F.1.1.0.1.1", fibril._common.to_ms(timedelta(seconds=1.5), "d")) == (
        b"NACK $F.1.1.0.1.1 1500\r\n"
    )


def test_create_exist_ok(durable: Server) -> None:
    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            topic = unique("t")
            await c.create_topic(topic, partitions=2)
            with pytest.raises(fibril.errors.TopicExistsError):
                await c.create_topic(topic, partitions=3)
            info = await c.create_topic(topic, partitions=3, exist_ok=True)
            assert info["config"]["partitions"] == 2
            await c.create_group(topic, "g", max_deliveries=2)
            g = await c.create_group(topic, "g", max_deliveries=3, exist_ok=True)
            assert g["config"]["max_deliveries"] == 2
            # replicas: a single node holds each partition once
            assert (await c.create_topic(unique("r"), replicas=1))["config"]["replicas"] == 1
            with pytest.raises(fibril.errors.FibrilError) as e:
                await c.create_topic(unique("r"), replicas=3)
            assert e.value.code == "invalid_config"

    run(body())


def test_plain_nats_server_is_not_fibril() -> None:
    """A server whose INFO has no "fibril" (a plain NATS server) is refused
    with a ProtocolError that retrying cannot fix, as in Go and JS."""

    async def body() -> None:
        async def serve(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(b'INFO {"server_id":"plain","version":"2.10.0","proto":1}\r\n')
            await w.drain()

        srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        try:
            with pytest.raises(fibril.ProtocolError) as ei:
                await fibril.connect(f"nats://127.0.0.1:{port}", connect_timeout=5)
            assert not ei.value.retriable
            assert "does not speak the Fibril protocol" in str(ei.value)
        finally:
            srv.close()

    run(body())
