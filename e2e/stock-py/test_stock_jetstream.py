"""nats-py 2.16 JetStream (add_stream, publish, pull_subscribe, fetch, acks)
against fibril serve and, as the control, nats-server with JetStream
(SPEC.md 16.2, issue 28)."""

from __future__ import annotations

import asyncio

import nats
import nats.js.api
import nats.js.errors
import pytest

WAIT = 5.0


def run(coro):  # noqa: ANN001, ANN201 - a tiny asyncio.run wrapper
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_streams_and_pull_consumers(js_server_url: str) -> None:
    async def body() -> None:
        nc = await nats.connect(js_server_url, allow_reconnect=False, connect_timeout=WAIT)
        js = nc.jetstream(timeout=WAIT)
        info = await js.add_stream(name="WORK", subjects=["work.>"], retention=nats.js.api.RetentionPolicy.WORK_QUEUE)
        assert info.config.name == "WORK"
        for i in range(1, 5):
            ack = await js.publish("work.item", str(i).encode())
            assert ack.stream == "WORK" and ack.seq == i
        si = await js.stream_info("WORK")
        assert si.state.messages == 4 and si.state.last_seq == 4
        msg = await js.get_msg("WORK", 2)
        assert msg.subject == "work.item" and msg.data == b"2"
        psub = await js.pull_subscribe("work.>", durable="workers", stream="WORK")
        got = await psub.fetch(4, timeout=WAIT)
        assert [m.metadata.sequence.stream for m in got] == [1, 2, 3, 4]
        assert all(m.metadata.num_delivered == 1 and m.metadata.stream == "WORK" for m in got)
        await got[0].ack()
        await got[1].ack_sync(timeout=WAIT)
        await got[2].nak()
        await got[3].in_progress()
        await got[3].term()
        again = await psub.fetch(4, timeout=1.5)
        assert [m.metadata.sequence.stream for m in again] == [3]
        assert again[0].metadata.num_delivered == 2
        await again[0].ack_sync(timeout=WAIT)
        with pytest.raises(nats.errors.TimeoutError):
            await psub.fetch(1, timeout=1)
        ci = await js.consumer_info("WORK", "workers")
        assert ci.num_ack_pending == 0 and ci.num_pending == 0
        await js.delete_consumer("WORK", "workers")
        assert await js.delete_stream("WORK")
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.stream_info("WORK")
        await nc.close()

    run(body())


def test_publish_msg_id_duplicate_and_expected_last(js_server_url: str) -> None:
    """A repeated Nats-Msg-Id gets the first PubAck with duplicate set and is
    stored once; Nats-Expected-Last-Msg-Id is checked against the last id."""

    async def body() -> None:
        nc = await nats.connect(js_server_url, allow_reconnect=False, connect_timeout=WAIT)
        js = nc.jetstream(timeout=WAIT)
        await js.add_stream(name="DEDUP", subjects=["dedup.>"], duplicate_window=60.0)
        a = await js.publish("dedup.x", b"a", headers={"Nats-Msg-Id": "a"})
        again = await js.publish("dedup.x", b"a again", headers={"Nats-Msg-Id": "a"})
        assert a.seq == 1 and not a.duplicate
        assert again.seq == 1 and again.duplicate is True
        with pytest.raises(nats.js.errors.APIError) as ei:
            await js.publish("dedup.x", b"b", headers={"Nats-Msg-Id": "b", "Nats-Expected-Last-Msg-Id": "zzz"})
        assert ei.value.err_code == 10070 and ei.value.description == "wrong last msg ID: a"
        b = await js.publish("dedup.x", b"b", headers={"Nats-Msg-Id": "b", "Nats-Expected-Last-Msg-Id": "a"})
        assert b.seq == 2 and not b.duplicate
        si = await js.stream_info("DEDUP")
        assert si.state.messages == 2 and si.config.duplicate_window == 60.0
        await nc.close()

    run(body())


def test_publish_expected_last_sequence_and_stream(js_server_url: str) -> None:
    """Nats-Expected-Last-Sequence, -Last-Subject-Sequence and -Stream store a
    publish only when they hold; otherwise JetStream's 10071 / 10060 answer,
    the same from Fibril and nats-server."""

    async def body() -> None:
        nc = await nats.connect(js_server_url, allow_reconnect=False, connect_timeout=WAIT)
        js = nc.jetstream(timeout=WAIT)
        await js.add_stream(name="COND", subjects=["cond.>"])
        with pytest.raises(nats.js.errors.APIError) as ei:
            await js.publish("cond.a", b"x", headers={"Nats-Expected-Last-Sequence": "4"})
        assert ei.value.err_code == 10071 and ei.value.description == "wrong last sequence: 0"
        a = await js.publish("cond.a", b"a1", headers={"Nats-Expected-Last-Sequence": "0"})
        b = await js.publish("cond.b", b"b1", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
        assert (a.seq, b.seq) == (1, 2)
        with pytest.raises(nats.js.errors.APIError) as ei:
            await js.publish("cond.a", b"x", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
        assert ei.value.err_code == 10071 and ei.value.description == "wrong last sequence: 1"
        a2 = await js.publish("cond.a", b"a2", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
        assert a2.seq == 3
        with pytest.raises(nats.js.errors.APIError) as ei:
            await js.publish("cond.a", b"x", stream="OTHER")
        assert ei.value.err_code == 10060 and ei.value.description == "expected stream does not match"
        si = await js.stream_info("COND")
        assert si.state.messages == 3
        await nc.close()

    run(body())
