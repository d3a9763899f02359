"""Reconnect behaviour against the real server, through a fault-injecting proxy."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Server
from helpers import Proxy, run, unique, wait_for

import fibril
from fibril.errors import ConnectionClosedError

FAST = fibril.Reconnect(initial=0.01, max_delay=0.1)


def test_unconfirmed_publishes_are_retried_after_a_cut(server: Server) -> None:
    subject = "_INBOX." + unique("rc")

    async def body() -> None:
        proxy = await Proxy(server.host, server.port).start()
        try:
            async with fibril.connect(proxy.url, reconnect=FAST) as c:
                futs = [await c.publish_async(f"{subject}.{i}", b"x" * 100) for i in range(500)]
                proxy.cut()  # most of them are unconfirmed now
                futs += [await c.publish_async(f"{subject}.after", b"y") for _ in range(100)]
                results = await asyncio.gather(*futs)
                assert results == [None] * 600  # every publish confirmed (+OK -)
                assert c.connects >= 2
                assert proxy.accepted >= 2
        finally:
            await proxy.close()

    run(body())


def test_subscription_is_renewed_after_reconnect(server: Server) -> None:
    subject = "_INBOX." + unique("rs")

    async def body() -> None:
        proxy = await Proxy(server.host, server.port).start()
        try:
            async with fibril.connect(proxy.url, reconnect=FAST) as c, fibril.connect(server.url) as pub:
                async with c.subscribe(subject) as sub:
                    await pub.publish(subject, b"before")
                    assert (await asyncio.wait_for(sub.next(), 5)).data == b"before"
                    connects = c.connects
                    proxy.cut()

                    async def reconnected() -> bool:
                        return c.connects > connects and c.is_connected

                    await wait_for(reconnected, what="reconnect")
                    await c.ping()  # the renewed SUB was answered before this PING
                    await pub.publish(subject, b"after")
                    assert (await asyncio.wait_for(sub.next(), 5)).data == b"after"
        finally:
            await proxy.close()

    run(body())


def test_no_reconnect_fails_pending_and_closes(server: Server) -> None:
    async def body() -> None:
        proxy = await Proxy(server.host, server.port).start()
        try:
            c = await fibril.connect(proxy.url, reconnect=False)
            sub = await c.subscribe("_INBOX." + unique("nr")).start()
            proxy.cut()
            with pytest.raises(ConnectionClosedError):
                await asyncio.wait_for(sub.next(), 5)
            with pytest.raises(fibril.FibrilError):
                await c.publish("_INBOX.x", b"late")
            assert not c.is_connected
            await c.close()
        finally:
            await proxy.close()

    run(body())


def test_gives_up_after_max_attempts(server: Server) -> None:
    async def body() -> None:
        proxy = await Proxy(server.host, server.port).start()
        c = await fibril.connect(proxy.url, reconnect=fibril.Reconnect(initial=0.01, max_delay=0.02, max_attempts=3))
        await proxy.close()  # nothing listens any more
        with pytest.raises(ConnectionClosedError):
            await c.publish("_INBOX.x", b"never")
        await c.close()

    run(body())


def test_keepalive_drops_a_silent_connection_and_reconnects(server: Server) -> None:
    async def body() -> None:
        proxy = await Proxy(server.host, server.port).start()
        try:
            async with fibril.connect(proxy.url, reconnect=FAST, ping_interval=0.05, max_pings_out=2) as c:
                await c.ping()
                proxy.frozen = True  # the TCP connection stays up but nothing gets through

                async def dropped() -> bool:
                    return not c.is_connected

                await wait_for(dropped, what="keepalive to notice the silence")
                proxy.frozen = False
                proxy.cut()  # the frozen connection's leftovers

                async def back() -> bool:
                    return c.is_connected and c.connects >= 2

                await wait_for(back, what="reconnect")
                assert await c.publish("_INBOX." + unique("ka"), b"x") is None
        finally:
            await proxy.close()

    run(body())


def test_fatal_error_fails_pending_and_reconnects(server: Server) -> None:
    async def body() -> None:
        async with fibril.connect(server.url, reconnect=FAST) as c:
            conn = c._conn
            assert conn is not None
            # A line over max_control_line is fatal: the server sends -ERR and closes.
            conn.write(b"X" * 5000 + b"\r\n")
            with pytest.raises(fibril.errors.MaxControlLineError) as ei:
                await c.ping()  # sent after the bad line: never answered
            assert ei.value.fatal

            async def back() -> bool:
                return c.is_connected and c.connects >= 2

            await wait_for(back, what="reconnect after a fatal error")
            await c.ping()

    run(body())
