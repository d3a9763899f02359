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


#: What a :class:`FakePeer` answer function returns to hang up the connection.
HANG_UP = "hang up"

NOT_LEADER = b"-ERR 'not_leader this node does not serve the partition'\r\n"


class FakePeer:
    """A scripted Fibril-mode peer for paths no real server takes on demand
    (not_leader answers, a connection cut at a chosen frame). Not a server: it
    stores nothing. It sends INFO, answers CONNECT with +OK and PING with PONG,
    and hands every other frame to ``answer(conn, line, payload)`` (``conn``
    counts connections from 1), which returns the bytes to send back, None
    for no answer, or :data:`HANG_UP`. ``hang_up(conn)`` true closes a
    connection at once, before INFO. Clients must connect with ``crc=False``.
    """

    def __init__(
        self,
        answer: Callable[[int, str, bytes], bytes | str | None] | None = None,
        *,
        hang_up: Callable[[int], bool] | None = None,
        info: dict[str, object] | None = None,
        log: list[tuple[FakePeer, int]] | None = None,
    ) -> None:
        self.answer = answer or (lambda _n, _line, _payload: b"+OK\r\n")
        self.hang_up = hang_up or (lambda _n: False)
        self.info: dict[str, object] = {"server_id": "fake", "fibril": 1, "proto": 1, "headers": True, "max_payload": 1 << 20}
        self.info.update(info or {})
        #: Every frame after CONNECT: (connection number, control line, payload).
        self.frames: list[tuple[int, str, bytes]] = []
        self.accepted = 0
        #: Shared by several peers: each accept appends (peer, connection number).
        self.log = log
        self._server: asyncio.base_events.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"nats://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> FakePeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    def payloads(self, verb: str = "PUB", conn: int | None = None) -> list[bytes]:
        """Returns the payloads of the frames with this verb, in arrival order."""
        return [p for n, line, p in self.frames if line.split()[0] == verb and conn in (None, n)]

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        import json

        self.accepted += 1
        n = self.accepted
        if self.log is not None:
            self.log.append((self, n))
        if self.hang_up(n):
            w.transport.abort()
            return
        self._writers.append(w)
        try:
            w.write(b"INFO " + json.dumps(self.info).encode() + b"\r\n")
            while raw := await r.readline():
                line = raw.decode().rstrip("\r\n")
                parts = line.split()
                if not parts:
                    continue
                payload = b""
                if parts[0] in ("PUB", "HPUB"):
                    payload = (await r.readexactly(int(parts[-1]) + 2))[:-2]
                if parts[0] == "CONNECT":
                    w.write(b"+OK\r\n")
                    continue
                if parts[0] == "PING":
                    w.write(b"PONG\r\n")
                    continue
                self.frames.append((n, line, payload))
                out = self.answer(n, line, payload)
                if out == HANG_UP:
                    w.transport.abort()
                    return
                if isinstance(out, bytes):
                    w.write(out)
                await w.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            w.transport.abort()

    async def close(self) -> None:
        for w in self._writers:
            w.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
