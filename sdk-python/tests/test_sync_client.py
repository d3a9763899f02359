"""The blocking client (fibril.sync) against the real server: push consume with
credit and acks, plain subscriptions, iterators, timeouts, threads and close."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest
from conftest import Server
from helpers import run, unique, wait_until

import fibril
from fibril import sync
from fibril.errors import ClientClosedError, NotAckableError, TimedOutError


def test_sync_consume_acks_and_nack_redelivers(durable: Server) -> None:
    topic = unique("sc")
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        sent = [f"m{i}".encode() for i in range(5)]
        for d in sent:
            assert c.publish(topic, d) is not None
        with c.consume(topic, "g", max_in_flight=10) as sub:
            got = [sub.next(timeout=5) for _ in sent]
            assert sorted(m.data for m in got) == sorted(sent)
            assert all(m.delivery_count == 1 and m.handle is not None for m in got)
            for m in got[1:]:
                m.ack()
            got[0].nack()
            again = sub.next(timeout=5)
            assert (again.data, again.delivery_count) == (got[0].data, 2)
            again.ack()
            with pytest.raises(TimedOutError) as ei:
                sub.next(timeout=0.3)  # everything settled: nothing more comes
            assert isinstance(ei.value, TimeoutError)
        # Every delivery was acked: nothing is left for the group.
        assert c.fetch(topic, "g", 10, wait=0.3) == []


def test_sync_consume_respects_max_in_flight(durable: Server) -> None:
    topic = unique("cr")
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        for i in range(4):
            c.publish(topic, f"{i}")
        with c.consume(topic, "g", max_in_flight=2) as sub:
            first = [sub.next(timeout=5), sub.next(timeout=5)]
            # Credit is used up: the quiet period is the check.
            with pytest.raises(TimedOutError):
                sub.next(timeout=0.3)
            first[0].ack()
            third = sub.next(timeout=5)  # one settled: one more credit
            assert third.data not in {m.data for m in first}
            with pytest.raises(TimedOutError):
                sub.next(timeout=0.3)
            c.ack([first[1], third])
            fourth = sub.next(timeout=5)
            assert {m.data for m in [*first, third, fourth]} == {b"0", b"1", b"2", b"3"}
            fourth.ack()


def test_sync_leaving_the_loop_unsubscribes_and_hands_back(durable: Server) -> None:
    topic = unique("lv")
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        c.create_group(topic, "g", lease=60)
        for i in range(3):
            c.publish(topic, f"{i}")
        sub = c.consume(topic, "g", max_in_flight=3)
        it = iter(sub)
        first = next(it)
        wait_until(lambda: len(sub._sub._queue) == 2, what="two more deliveries buffered")
        it.close()  # what leaving a for loop does
        # The buffered two were handed back (NACK): they come again at once with
        # attempt 2, not after the 60 s lease. The first is still leased.
        rest = c.fetch(topic, "g", 10, wait=2)
        assert sorted(m.data for m in rest) == sorted({b"0", b"1", b"2"} - {first.data})
        assert [m.delivery_count for m in rest] == [2, 2]
        c.ack([first, *rest])
        assert c.fetch(topic, "g", 10, wait=0.3) == []


def test_sync_plain_subscribe_iterates(server: Server) -> None:
    subject = "_INBOX." + unique("ps")
    with sync.connect(server.url) as c, sync.connect(server.url) as pub:
        with c.subscribe(subject + ".>") as sub:
            for i in range(3):
                assert pub.publish(f"{subject}.{i}", f"d{i}", headers={"X-N": str(i)}) is None
            got = []
            for m in sub:
                got.append(m)
                if len(got) == 3:
                    break
        assert [(m.subject, m.data, m.headers["X-N"]) for m in got] == [
            (f"{subject}.{i}", f"d{i}".encode(), str(i)) for i in range(3)
        ]
        assert got[0].handle is None
        with pytest.raises(NotAckableError):
            got[0].ack()
        # The subscription ended with the loop: iterating it again yields nothing.
        assert list(sub) == []


def test_sync_close_ends_a_consumer_thread(durable: Server) -> None:
    topic = unique("cl")
    c = sync.connect(durable.url)
    c.create_topic(topic)
    seen: list[bytes] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for m in c.consume(topic, "g"):
                m.ack()
                seen.append(m.data)
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    c.publish(topic, b"a")
    c.publish(topic, b"b")
    wait_until(lambda: len(seen) == 2, what="the worker to ack both")
    c.close()  # the worker is blocked in next(): its loop must simply end
    t.join(5)
    assert not t.is_alive()
    assert errors == [] and sorted(seen) == [b"a", b"b"]
    assert not c._loop._thread.is_alive()  # the loop thread is gone
    c.close()  # idempotent
    with pytest.raises(ClientClosedError):
        c.publish(topic, b"late")
    with pytest.raises(ClientClosedError):
        c.publish_async(topic, b"late")
    assert not c.is_connected


def test_sync_interrupted_next_leaves_no_orphan(server: Server) -> None:
    # Ctrl-C in a blocked next(): the call must end on the loop too, or its
    # orphaned waiter would take the next delivery and nobody would see it.
    subject = "_INBOX." + unique("ki")
    with sync.connect(server.url) as c, c.subscribe(subject) as sub:
        main = threading.get_ident()
        timer = threading.Timer(0.2, lambda: signal.pthread_kill(main, signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                sub.next(timeout=30)
        finally:
            timer.cancel()
        wait_until(lambda: not sub._sub._waiters, timeout=5, what="the interrupted next() to end on the loop")
        c.publish(subject, b"after")
        assert sub.next(timeout=5).data == b"after"


def test_sync_worker_threads_share_a_subscription(durable: Server) -> None:
    topic = unique("wp")
    n = 60
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        done: list[tuple[str, bytes]] = []
        lock = threading.Lock()
        with c.consume(topic, "g", max_in_flight=8) as sub:

            def worker(name: str) -> None:
                while True:
                    try:
                        m = sub.next(timeout=10)  # StopIteration when the with block ends
                    except (StopIteration, TimedOutError):
                        return
                    m.ack()
                    with lock:
                        done.append((name, m.data))

            threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
            for t in threads:
                t.start()
            futs = [c.publish_async(topic, f"{i}") for i in range(n)]
            assert all(f.result(10) is not None for f in futs)
            wait_until(lambda: len(done) >= n, what="all messages processed")
        for t in threads:
            t.join(5)  # leaving the with block closed the subscription
            assert not t.is_alive()
        # Each message went to exactly one worker.
        assert sorted(d for _, d in done) == sorted(f"{i}".encode() for i in range(n))


def test_sync_threads_share_one_client_and_publish_async(durable: Server) -> None:
    topic = unique("th")
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        positions: list[fibril.Position | None] = []
        lock = threading.Lock()

        def publisher(n: int) -> None:
            for i in range(50):
                p = c.publish(topic, f"{n}-{i}")
                with lock:
                    positions.append(p)

        threads = [threading.Thread(target=publisher, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        futs = [c.publish_async(topic, f"async-{i}") for i in range(200)]
        positions += [f.result(30) for f in futs]
        assert len(positions) == 400 and None not in positions
        assert len({(p.partition, p.seq) for p in positions if p is not None}) == 400
        assert not futs[0].cancel()  # on its way: cannot be cancelled
        msgs = c.fetch(topic, "g", 400, wait=2)
        while len(msgs) < 400:
            more = c.fetch(topic, "g", 400, wait=2)
            assert more, f"only {len(msgs)} of 400 fetched"
            msgs += more
        assert len({m.data for m in msgs}) == 400
        c.ack(msgs)


def test_sync_timeout_leaves_the_client_usable(durable: Server) -> None:
    topic = unique("to")
    with sync.connect(durable.url) as setup:
        setup.create_topic(topic)
    with sync.connect(durable.url, timeout=1.0) as c:
        with pytest.raises(ValueError):
            c.publish_async("bad subject", b"x")  # checked before anything is sent
        result: list[list[sync.Msg]] = []
        t = threading.Thread(target=lambda: result.append(c.fetch(topic, "g", 1, wait=2)))
        t.start()
        wait_until(lambda: any(r.kind == 2 for r in c._ac._pending), what="the POLL to be sent")
        # A waiting POLL holds back every later answer on the connection.
        with pytest.raises(TimedOutError):
            c.ping()
        t.join(10)
        assert result == [[]]
        c.ping()  # the client goes on; the late PONG was discarded
        assert c.publish("_INBOX." + unique("to"), b"x") is None  # no fsync to wait for


def test_async_fetch_given_up_hands_deliveries_back(durable: Server) -> None:
    # A fetch cancelled while its POLL waits: the deliveries that answer it
    # later are handed back at once, not left leased until the lease expires.
    topic = unique("gu")

    async def body() -> None:
        async with fibril.connect(durable.url) as c:
            await c.create_topic(topic)
            await c.create_group(topic, "g", lease=60)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(c.fetch(topic, "g", 1, wait=5), 0.2)
            await c.publish(topic, b"x")  # answered after the waiting POLL takes x
            msgs = await c.fetch(topic, "g", 1, wait=3)
            assert [(m.data, m.delivery_count) for m in msgs] == [(b"x", 2)]
            await c.ack(msgs)

    run(body())


def test_sync_bad_options() -> None:
    with pytest.raises(ValueError):
        sync.connect("nats://127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError):
        sync.connect("http://127.0.0.1:1")
    with pytest.raises(fibril.ConnectionClosedError):
        sync.connect("nats://127.0.0.1:1", connect_timeout=2)
    # A failed connect leaves no loop thread behind.
    assert not [t for t in threading.enumerate() if t.name == "fibril-sync"]
