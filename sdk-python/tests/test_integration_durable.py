"""Durable topics and groups against the real server: publish, fetch, consume,
ack/nack/reject/extend, dead-lettering, management, CRC and reconnect."""

from __future__ import annotations

import asyncio
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import Server, kill_server, start_server, stop_server
from helpers import Proxy, run, unique

import fibril
from fibril import sync
from fibril.errors import CorruptMessageError, FibrilError

FAST = fibril.Reconnect(initial=0.01, max_delay=0.1)


async def fetch_all(c: fibril.Client, topic: str, group: str, want: int, timeout: float = 10.0) -> list[fibril.Msg]:
    """Fetches until ``want`` messages arrived (or the deadline passes)."""
    out: list[fibril.Msg] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += await c.fetch(topic, group, want - len(out), wait=0.5)
    return out


async def drain(c: fibril.Client, topic: str, group: str) -> list[fibril.Msg]:
    """Fetches until a poll waiting 0.5 s comes back empty (everything ready is read)."""
    out: list[fibril.Msg] = []
    while batch := await c.fetch(topic, group, 256, wait=0.5):
        out += batch
    return out


def test_publish_fetch_ack(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            futs = [await c.publish_async(topic, f"m{i}".encode(), msg_id=f"id{i}") for i in range(20)]
            positions = await asyncio.gather(*futs)
            assert all(p is not None and p.partition == 0 for p in positions)
            seqs = [p.seq for p in positions if p is not None]
            assert seqs == sorted(seqs) and len(set(seqs)) == 20

            msgs = await fetch_all(c, topic, "g", 20)
            assert [m.data for m in msgs] == [f"m{i}".encode() for i in range(20)]
            assert all(m.delivery_count == 1 and m.handle is not None for m in msgs)
            assert msgs[3].headers.get("Nats-Msg-Id") == "id3"
            assert [m.handle.seq for m in msgs if m.handle] == seqs
            await c.ack(msgs[:10])
            for m in msgs[10:]:
                await m.ack()
            await msgs[0].ack()  # acking again with the same handle is fine
            assert await c.fetch(topic, "g", 10, wait=0.2) == []

    run(body())


def test_nack_with_delay_redelivers_later(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            await c.publish(topic, b"job")
            (m,) = await c.fetch(topic, "g", 1, wait=2)
            t0 = time.monotonic()
            await m.nack(delay=1.5)
            assert await c.fetch(topic, "g", 1, wait=0) == []  # not ready yet
            (m2,) = await c.fetch(topic, "g", 1, wait=5)
            assert time.monotonic() - t0 >= 1.4
            assert (m2.data, m2.delivery_count) == (b"job", 2)
            assert m2.handle is not None and m.handle is not None and m2.handle.seq == m.handle.seq
            with pytest.raises(fibril.errors.StaleHandleError):
                await m.ack()
            await m2.ack()

    run(body())


def test_reject_and_max_deliveries_dead_letter(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            await c.create_group(topic, "g", max_deliveries=2)
            await c.publish(topic, b"poison")
            await c.publish(topic, b"flaky")
            a, b = await fetch_all(c, topic, "g", 2)
            await a.reject()
            await b.nack()
            (b2,) = await fetch_all(c, topic, "g", 1)
            assert b2.delivery_count == 2
            await b2.nack()  # second failed delivery: dead-lettered
            dlq = f"$DLQ.{topic}.g"
            dead = await fetch_all(c, dlq, "inspect", 2)
            got = {m.data: m.headers for m in dead}
            assert got[b"poison"]["Fibril-Reason"] == "rejected"
            assert got[b"flaky"]["Fibril-Reason"] == "max_deliveries"
            assert got[b"flaky"]["Fibril-Subject"] == topic
            assert got[b"flaky"]["Fibril-Deliveries"] == "2"
            await c.ack(dead)
            assert await c.fetch(topic, "g", 5, wait=0.2) == []

    run(body())


def test_consume_respects_max_in_flight(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            for i in range(5):
                await c.publish(topic, f"{i}".encode())
            seen: list[bytes] = []
            async with c.consume(topic, "g", max_in_flight=2) as sub:
                first = [await asyncio.wait_for(sub.next(), 5) for _ in range(2)]
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(sub.next(), 0.3)  # credit exhausted
                for m in first:
                    seen.append(m.data)
                    await m.in_progress()
                    await m.ack()
                while len(seen) < 5:
                    m = await asyncio.wait_for(sub.next(), 5)
                    seen.append(m.data)
                    await m.ack()
            assert sorted(seen) == [b"0", b"1", b"2", b"3", b"4"]

    run(body())


def test_async_for_consume_and_break_hands_back(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            for i in range(3):
                await c.publish(topic, f"{i}".encode())
            async for m in c.consume(topic, "g", max_in_flight=3):
                await m.ack()
                break  # the other buffered deliveries are handed back (NACK)
            rest = await fetch_all(c, topic, "g", 2)
            assert len(rest) == 2
            await c.ack(rest)

    run(body())


def test_expired_lease_makes_handle_stale(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            await c.create_group(topic, "g", lease=0.2)
            await c.publish(topic, b"slow")
            (m,) = await fetch_all(c, topic, "g", 1)
            (m2,) = await c.fetch(topic, "g", 1, wait=3)  # after the lease ran out
            assert m2.delivery_count == 2
            with pytest.raises(fibril.errors.StaleHandleError) as ei:
                await m.ack()
            assert ei.value.code == "stale_handle" and not ei.value.retriable
            await m2.ack()

    run(body())


def test_management(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic, subjects=[f"{topic}.>"], partitions=3, durability="sync")
            with pytest.raises(fibril.errors.TopicExistsError):
                await c.create_topic(topic, subjects=[f"{topic}.>"], partitions=2)
            with pytest.raises(fibril.errors.TopicOverlapError):
                await c.create_topic(unique("o"), subjects=[f"{topic}.x"])
            info = await c.topic_info(topic)
            assert topic in str(info)
            assert topic in str(await c.list_topics())
            await c.create_group(topic, "workers", start="earliest", lease=5, max_deliveries=3)
            assert "workers" in str(await c.group_info(topic, "workers"))
            assert "workers" in str(await c.list_groups(topic))
            await c.delete_group(topic, "workers")
            with pytest.raises(fibril.errors.UnknownGroupError):
                await c.group_info(topic, "workers")
            # Same key, same partition.
            parts = {(await c.publish(f"{topic}.a", b"x", key="customer-7")) for _ in range(5)}
            assert len({p.partition for p in parts if p is not None}) == 1
            await c.delete_topic(topic)
            with pytest.raises(fibril.errors.UnknownTopicError):
                await c.topic_info(topic)
            with pytest.raises(fibril.errors.UnknownTopicError):
                await c.fetch(topic, "g", 1)

    run(body())


def test_group_start_seq_and_time(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            for d in (b"a", b"b", b"c"):
                await c.publish(topic, d)
            info = await c.create_group(topic, "from2", start_seq=2)
            assert info["config"]["start"] == "seq" and info["config"]["start_seq"] == 2
            assert [m.data for m in await drain(c, topic, "from2")] == [b"b", b"c"]
            past = datetime(2000, 1, 1, tzinfo=timezone.utc)
            info = await c.create_group(topic, "since", start_time=past)
            assert info["config"]["start"] == "time"
            assert [m.data for m in await drain(c, topic, "since")] == [b"a", b"b", b"c"]
            await c.create_group(topic, "later", start="time", start_time="2200-01-01T00:00:00Z")
            assert await drain(c, topic, "later") == []
            with pytest.raises(fibril.errors.InvalidConfigError):
                await c.create_group(topic, "far", start_seq=9)
            with pytest.raises(ValueError):
                await c.create_group(topic, "naive", start_time=datetime(2000, 1, 1))

    run(body())


def test_group_backoff(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            info = await c.create_group(topic, "g", lease=60, backoff=[0.5, timedelta(minutes=1)])
            assert info["config"]["backoff_ms"] == [500, 60000]
            await c.publish(topic, b"job")
            (m,) = await c.fetch(topic, "g", 1, wait=5)
            await m.nack()  # no delay: the schedule's 0.5 s
            assert await c.fetch(topic, "g", 1) == []
            (m2,) = await fetch_all(c, topic, "g", 1)
            assert (m2.data, m2.delivery_count) == (b"job", 2)
            with pytest.raises(fibril.errors.InvalidConfigError):
                await c.create_group(topic, "long", backoff=[1] * 33)

    run(body())


def test_group_filter(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic, subjects=[f"{topic}.>"])
            info = await c.create_group(topic, "eu", filter=[f"{topic}.eu.>"])
            assert info["config"]["filter"] == [f"{topic}.eu.>"]
            for region in ("eu", "us", "eu"):
                await c.publish(f"{topic}.{region}.x", region.encode())
            assert [m.data for m in await drain(c, topic, "eu")] == [b"eu", b"eu"]
            with pytest.raises(fibril.errors.InvalidConfigError):
                await c.create_group(topic, "bad", filter=[f"{topic}..x"])

    run(body())


def test_group_ordered(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            info = await c.create_group(topic, "fifo", ordered="partition")
            assert info["config"]["ordered"] == "partition"
            for d in (b"a", b"b"):
                await c.publish(topic, d)
            (m,) = await c.fetch(topic, "fifo", 10, wait=5)
            assert m.data == b"a"
            assert await c.fetch(topic, "fifo", 10) == []  # nothing more while a is out
            await m.nack()
            (m,) = await c.fetch(topic, "fifo", 10, wait=5)
            assert (m.data, m.delivery_count) == (b"a", 2)
            await m.ack()
            (m,) = await c.fetch(topic, "fifo", 10, wait=5)
            assert m.data == b"b"
            with pytest.raises(fibril.errors.InvalidConfigError):
                await c.create_group(topic, "bad", ordered="message")

    run(body())


def test_group_ordered_key(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            info = await c.create_group(topic, "bykey", ordered="key")
            assert info["config"]["ordered"] == "key"
            for key, d in (("a", b"a1"), ("a", b"a2"), ("b", b"b1")):
                await c.publish(topic, d, key=key)
            ms = await c.fetch(topic, "bykey", 10, wait=5)
            assert [m.data for m in ms] == [b"a1", b"b1"]  # a2 waits for a1
            await ms[0].nack()
            (m,) = await c.fetch(topic, "bykey", 10, wait=5)
            assert (m.data, m.delivery_count) == (b"a1", 2)
            await m.ack()
            (m,) = await c.fetch(topic, "bykey", 10, wait=5)
            assert m.data == b"a2"

    run(body())


def test_requeue_by_filter_then_the_rest(durable: Server) -> None:
    topic = unique("t")
    dlq = f"$DLQ.{topic}.g"

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic, subjects=[f"{topic}.>"])
            await c.create_group(topic, "g")
            for region in ("eu", "us"):
                await c.publish(f"{topic}.{region}", region.encode())
            for m in await fetch_all(c, topic, "g", 2):
                await m.reject()
            assert len(await fetch_all(c, dlq, "watch", 2)) == 2
            assert (await c.requeue(dlq, filter=[f"{topic}.eu"]))["requeued"] == 1
            (m,) = await fetch_all(c, topic, "g", 1)
            assert m.data == b"eu"
            await m.ack()
            assert (await c.requeue(dlq))["requeued"] == 1
            (m,) = await fetch_all(c, topic, "g", 1)
            assert m.data == b"us"
            with pytest.raises(fibril.errors.InvalidConfigError):
                await c.requeue(dlq, max=0)

    run(body())


def test_publish_ttl(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic, allow_msg_ttl=True)
            info = await c.create_group(topic, "g", on_expiry="dead_letter")
            assert info["config"]["on_expiry"] == "dead_letter"
            await c.publish(topic, b"short", ttl=0.001)
            await c.publish(topic, b"long", ttl=timedelta(hours=1))
            await asyncio.sleep(0.02)  # past the short one's TTL
            assert [m.data for m in await c.fetch(topic, "g", 10, wait=1)] == [b"long"]
            (d,) = await fetch_all(c, f"$DLQ.{topic}.g", "ops", 1)
            assert (d.data, d.headers.get("Fibril-Reason")) == (b"short", "expired")
            plain = unique("t")
            await c.create_topic(plain, message_ttl=60)
            assert (await c.topic_info(plain))["config"]["message_ttl_ms"] == 60000
            with pytest.raises(fibril.errors.InvalidHeaderError):
                await c.publish(plain, b"x", ttl=5)
            with pytest.raises(ValueError):
                await c.publish(topic, b"x", ttl=0)

    run(body())


def test_publish_delay(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic, allow_msg_delay=True)
            await c.publish(topic, b"in an hour", delay=timedelta(hours=1))
            await c.publish(topic, b"tomorrow", deliver_at=datetime.now(timezone.utc) + timedelta(days=1))
            await c.publish(topic, b"soon", delay=0.05)
            await c.publish(topic, b"now")
            assert [m.data for m in await c.fetch(topic, "g", 10)] == [b"now"]
            assert [m.data for m in await c.fetch(topic, "g", 10, wait=5)] == [b"soon"]
            with pytest.raises(ValueError):
                await c.publish(topic, b"x", deliver_at=datetime.now())  # naive
            plain = unique("t")
            await c.create_topic(plain)
            with pytest.raises(fibril.errors.InvalidHeaderError):
                await c.publish(plain, b"x", delay=5)

    run(body())


def test_corrupt_delivery_raises_and_is_redelivered(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        proxy = await Proxy(durable.host, durable.port).start()
        try:
            async with fibril.connect(durable.url) as pub:
                await pub.create_topic(topic)
                await pub.publish(topic, b"CORRUPTME payload")
            async with fibril.connect(proxy.url) as c:
                proxy.corrupt = (b"CORRUPTME", b"CORRUPTm3")
                with pytest.raises(CorruptMessageError):
                    await c.fetch(topic, "g", 1, wait=2)
                assert proxy.corrupted == 1
                (m,) = await fetch_all(c, topic, "g", 1)
                assert (m.data, m.delivery_count) == (b"CORRUPTME payload", 2)
                await m.ack()
        finally:
            await proxy.close()

    run(body())


def test_no_confirmed_publish_lost_across_reconnects(durable: Server) -> None:
    topic = unique("t")
    n = 400

    async def body() -> None:
        proxy = await Proxy(durable.host, durable.port).start()
        try:
            async with fibril.connect(durable.url) as admin:
                await admin.create_topic(topic)
            async with fibril.connect(proxy.url, reconnect=FAST) as c:
                futs = []
                for i in range(n):
                    futs.append(await c.publish_async(topic, f"{i}".encode()))
                    if i in (100, 250):
                        await asyncio.sleep(0)  # let some go out, then cut mid-stream
                        proxy.cut()
                positions = await asyncio.gather(*futs)
                assert c.connects >= 2
            assert all(p is not None for p in positions)
            async with fibril.connect(durable.url) as r:
                got = await drain(r, topic, "g")
                datas = {m.data for m in got}
                # At-least-once: every publish is there, retries may add duplicates.
                assert datas == {f"{i}".encode() for i in range(n)}
                stored = {(m.handle.partition, m.handle.seq) for m in got if m.handle}
                assert {(p.partition, p.seq) for p in positions if p} <= stored
                await r.ack(got)
        finally:
            await proxy.close()

    run(body())


def test_sync_client_durable(durable: Server) -> None:
    topic = unique("t")
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        pos = c.publish(topic, b"a", key="k")
        assert pos is not None and pos.seq >= 1
        c.publish(topic, b"b")
        msgs = c.fetch(topic, "g", 2, wait=2)
        assert [m.data for m in msgs] == [b"a", b"b"]
        msgs[0].ack()
        msgs[1].nack()
        (again,) = c.fetch(topic, "g", 1, wait=2)
        assert (again.data, again.delivery_count) == (b"b", 2)
        again.in_progress()
        again.ack()
        assert c.fetch(topic, "g", 1) == []
        with pytest.raises(FibrilError) as ei:
            c.fetch(unique("missing"), "g", 1)
        assert ei.value.code == "unknown_topic"


def test_create_topic_is_idempotent(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            first = await c.create_topic(topic, partitions=2)
            again = await c.create_topic(topic, partitions=2)
            assert first["name"] == again["name"] == topic
            await c.create_group(topic, "g", lease=5)
            await c.create_group(topic, "g", lease=5)

    run(body())


def test_create_topic_compression(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            info = await c.create_topic(topic, compression="zstd", retention="limits")
            assert info["config"]["compression"] == "zstd"
            assert (await c.topic_info(topic))["config"]["compression"] == "zstd"
            await c.create_topic(topic, compression="zstd", retention="limits")  # same: idempotent
            with pytest.raises(fibril.errors.TopicExistsError):
                await c.create_topic(topic, compression="s2", retention="limits")
            with pytest.raises(fibril.errors.InvalidConfigError):
                await c.create_topic(unique("bad"), compression="lz4")
            assert (await c.create_topic(unique("plain")))["config"]["compression"] == "none"
            await c.publish(topic, b'{"order":1}')
            (m,) = await fetch_all(c, topic, "g", 1)
            assert m.data == b'{"order":1}'
            await m.ack()

    run(body())

    with sync.connect(durable.url) as s:
        name = unique("t")
        assert s.create_topic(name, compression="s2")["config"]["compression"] == "s2"


def test_corrupt_push_delivery_keeps_the_subscription(durable: Server) -> None:
    topic = unique("t")

    async def body() -> None:
        proxy = await Proxy(durable.host, durable.port).start()
        try:
            async with fibril.connect(durable.url) as pub:
                await pub.create_topic(topic)
            async with fibril.connect(proxy.url) as c:
                proxy.corrupt = (b"CORRUPTME", b"CORRUPTm3")
                sub = c.consume(topic, "g", max_in_flight=1)
                async with fibril.connect(durable.url) as pub:
                    await pub.publish(topic, b"CORRUPTME push")
                with pytest.raises(CorruptMessageError):
                    async for _ in sub:
                        pytest.fail("a corrupt delivery was returned")
                async for m in sub:  # same subscription, redelivered intact
                    assert (m.data, m.delivery_count) == (b"CORRUPTME push", 2)
                    await m.ack()
                    break
                assert proxy.corrupted == 1
        finally:
            await proxy.close()

    run(body())


def test_server_crash_loses_no_confirmed_publish(durable: Server, fibril_bin: Path) -> None:
    """SIGKILL the server in the middle of a pipelined publish stream and start it
    again on the same address and data directory: every publish confirmed before
    or after the crash is there, and the unconfirmed ones were retried."""
    topic = unique("crash")
    n = 300

    async def body(data: str) -> None:
        srv = [start_server(fibril_bin, data)]
        try:
            async with fibril.connect(srv[0].url, reconnect=FAST) as c:
                await c.create_topic(topic, durability="sync")
                futs = [await c.publish_async(topic, f"{i}".encode()) for i in range(n // 2)]
                await futs[10]  # some are confirmed, most are still in flight
                kill_server(srv[0])
                srv[0] = await asyncio.to_thread(start_server, fibril_bin, data, listen=srv[0].addr)
                futs += [await c.publish_async(topic, f"{i}".encode()) for i in range(n // 2, n)]
                positions = await asyncio.gather(*futs)
                assert c.connects >= 2
                got = await drain(c, topic, "g")
                info = await c.topic_info(topic)
            assert all(p is not None for p in positions)
            missing = {f"{i}".encode() for i in range(n)} - {m.data for m in got}
            confirmed = {(p.partition, p.seq) for p in positions if p}
            stored = {(m.handle.partition, m.handle.seq) for m in got if m.handle}
            assert not missing, (f"{len(got)} fetched, {len(missing)} missing, "
                                 f"confirmed not fetched: {sorted(confirmed - stored)[:10]}, topic: {info}")
            assert confirmed <= stored
        finally:
            stop_server(srv[0])

    with tempfile.TemporaryDirectory(prefix="fibril-crash-") as data:
        run(body(data))


def test_publish_duplicate_msg_id(durable: Server) -> None:
    """A repeat of a msg_id within the window is confirmed with the first
    one's position, ``duplicate`` set, and stored once; with the window off
    it is stored again."""
    topic, off = unique("t"), unique("t")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic, partitions=3)
            first = await c.publish(topic, b"one", msg_id="order-7")
            again = await c.publish(topic, b"one, retried", msg_id="order-7")
            other = await c.publish(topic, b"two", msg_id="order-8")
            assert first is not None and again is not None and other is not None
            assert not first.duplicate and not other.duplicate
            assert again == fibril.Position(first.partition, first.seq, duplicate=True)
            assert (await c.topic_info(topic))["msgs"] == 2

            info = await c.create_topic(off, duplicate_window=0)
            assert info["config"]["duplicate_window_ms"] == 0
            a = await c.publish(off, b"x", msg_id="same")
            b = await c.publish(off, b"x", msg_id="same")
            assert a is not None and b is not None and not b.duplicate and b.seq == a.seq + 1

    run(body())

    with sync.connect(durable.url) as sc:
        p1 = sc.publish(topic, b"sync", msg_id="order-9")
        p2 = sc.publish(topic, b"sync", msg_id="order-9")
        assert p1 is not None and p2 is not None and p2.duplicate and (p2.partition, p2.seq) == (p1.partition, p1.seq)
