"""nats-py 2.16 against fibril serve and, as a control, nats-server: the NATS
core features and the cases of issue 24 (no responders at once, an empty
header set); JetStream is test_stock_jetstream.py."""

from __future__ import annotations

import asyncio

import nats
import nats.errors
import nats.js.errors
import pytest

WAIT = 5.0  # far longer than any answer may take


def run(coro):  # noqa: ANN001, ANN201 - a tiny asyncio.run wrapper
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _connect(url: str) -> nats.NATS:
    return await nats.connect(url, allow_reconnect=False, connect_timeout=WAIT)


def test_pub_sub_wildcards_queue(server_url: str) -> None:
    async def body() -> None:
        nc = await _connect(server_url)
        star = await nc.subscribe("w.*")
        gt = await nc.subscribe("w.>")
        got = {"a": 0, "b": 0}

        async def member(name: str):  # noqa: ANN202
            async def cb(_m) -> None:  # noqa: ANN001
                got[name] += 1

            return cb

        await nc.subscribe("q.jobs", queue="workers", cb=await member("a"))
        await nc.subscribe("q.jobs", queue="workers", cb=await member("b"))
        await nc.flush()
        await nc.publish("w.a", b"1")
        await nc.publish("w.a.b", b"2")
        assert (await star.next_msg(WAIT)).subject == "w.a"
        assert [(await gt.next_msg(WAIT)).subject for _ in range(2)] == ["w.a", "w.a.b"]
        for i in range(100):
            await nc.publish("q.jobs", str(i).encode())
        await nc.flush()
        for _ in range(500):
            if got["a"] + got["b"] == 100:
                break
            await asyncio.sleep(0.01)
        assert got["a"] + got["b"] == 100
        await nc.close()

    run(body())


def test_request_reply_and_no_responders(server_url: str) -> None:
    async def body() -> None:
        nc = await _connect(server_url)

        async def echo(m) -> None:  # noqa: ANN001
            await m.respond(m.data)

        await nc.subscribe("svc.echo", cb=echo)
        await nc.flush()
        assert (await nc.request("svc.echo", b"x", timeout=WAIT)).data == b"x"
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("svc.nobody", b"x", timeout=WAIT)
        await nc.close()

    run(body())


def test_headers_and_empty_header_set(server_url: str) -> None:
    async def body() -> None:
        nc = await _connect(server_url)
        sub = await nc.subscribe("h.x")
        await nc.flush()
        await nc.publish("h.x", b"with", headers={"X-Trace": "abc"})
        m = await sub.next_msg(WAIT)
        assert m.headers == {"X-Trace": "abc"} and m.data == b"with"
        await nc.close()

    run(body())
