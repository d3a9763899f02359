"""Test tools: an event-loop runner, deadline pollers and a fault-injecting TCP proxy."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

T = TypeVar("T")


def run(coro: Coroutine[object, object, T], timeout: float = 60.0) -> T:
    """Runs ``coro`` in a fresh event loop, failing the test after ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def unique(prefix: str) -> str:
    """Returns a topic/group name unique to this test run."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


async def wait_for(cond: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "condition") -> None:
    """Polls ``cond`` until it is true; fails after ``timeout`` seconds (never a blind sleep)."""
    deadline = time.monotonic() + timeout
    while not await cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def wait_until(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Blocking twin of :func:`wait_for` for sync-client tests: polls ``cond`` with a deadline."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Proxy:
    """A TCP proxy between the client and the server that can cut connections
    and corrupt server-to-client bytes (a fault injector, not a fake server).
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        #: (pattern, replacement) applied once to server->client bytes.
        self.corrupt: tuple[bytes, bytes] | None = None
        self.corrupted = 0
        self.accepted = 0
        #: While True, bytes in both directions are swallowed (a silent network).
        self.frozen = False

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"nats://127.0.0.1:{port}"

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def _accept(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            sr, sw = await asyncio.open_connection(self.host, self.port)
        except OSError:
            cw.close()
            return
        self._writers += [cw, sw]

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, downstream: bool) -> None:
            try:
                while data := await r.read(65536):
                    if self.frozen:
                        continue
                    if downstream and self.corrupt is not None and self.corrupt[0] in data:
                        data = data.replace(self.corrupt[0], self.corrupt[1], 1)
                        self.corrupt = None
                        self.corrupted += 1
                    w.write(data)
                    await w.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                w.close()

        await asyncio.gather(pump(cr, sw, False), pump(sr, cw, True))

    def cut(self) -> None:
        """Drops every proxied connection at once (both directions)."""
        ws, self._writers = self._writers, []
        for w in ws:
            w.transport.abort()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
