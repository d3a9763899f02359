"""Coalesced acknowledgements (the asyncio twin of the Go SDK's AckAsync).

:meth:`Msg.ack_async` does not write its own ACK line: it queues the handle on
the client, and the queue is written as one ACK line (or as few as fit the
server's ``max_control_line``) when the event loop next runs its callbacks,
or before any other command the client writes, whichever comes first (so
commands keep the order they were issued in). A consumer that acks message by
message therefore sends one command per burst, and never waits for a round
trip or the server's commit before taking the next message. Each future
still gets its own outcome: when a shared line is refused, its handles are
acked again one by one (an ACK of a settled delivery is ``+OK``).

It owns the queue and the futures' outcomes; it never writes to the socket
itself (the client does, in command order) and never retries an ACK after a
lost connection (the server released those leases: the messages come again).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from ._common import ack_frames
from ._errbase import FibrilError
from .errors import ConnectionClosedError

# Sends one ACK line and returns the future of its answer, or raises when the
# client cannot send now.
Sender = Callable[[bytes], "asyncio.Future[Any]"]


class AckQueue:
    """The handles acked since the last flush, with their futures."""

    __slots__ = ("_handles", "_futures", "_states", "_scheduled", "_send", "_max_line", "_loop")

    def __init__(self, send: Sender, max_line: Callable[[], int]) -> None:
        self._handles: list[str] = []
        self._futures: list[asyncio.Future[None]] = []
        self._states: list[list[bool]] = []  # each message's [settling, settled]
        self._scheduled = False
        self._send = send
        self._max_line = max_line
        self._loop: asyncio.AbstractEventLoop | None = None  # the client's; set by the first add

    def __bool__(self) -> bool:
        return bool(self._handles)

    def add(self, handle: str, state: list[bool]) -> asyncio.Future[None]:
        """Queues ``handle`` and returns the future of its acknowledgement;
        ``state[1]`` turns True when the server answered +OK."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._handles.append(handle)
        self._futures.append(fut)
        self._states.append(state)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self.flush)
        return fut

    def flush(self) -> None:
        """Writes every queued ack now (called by the loop, and by the client
        before it writes any other command)."""
        self._scheduled = False
        if not self._handles:
            return
        handles, futures, states = self._handles, self._futures, self._states
        self._handles, self._futures, self._states = [], [], []
        frames = ack_frames(handles, self._max_line())
        at = 0
        for frame in frames:
            k = frame.count(b" ")  # one space before each handle
            hs, fs, ss = handles[at : at + k], futures[at : at + k], states[at : at + k]
            at += k
            try:
                answer = self._send(frame)
            except FibrilError as e:
                _fail(fs, e)
                continue
            answer.add_done_callback(functools.partial(self._answered, handles=hs, futures=fs, states=ss))

    def _answered(
        self,
        answer: asyncio.Future[Any],
        *,
        handles: list[str],
        futures: list[asyncio.Future[None]],
        states: list[list[bool]],
    ) -> None:
        err = None if answer.cancelled() else answer.exception()
        if err is None:
            for f, st in zip(futures, states):
                st[1] = True
                if not f.done():
                    f.set_result(None)
            return
        if len(handles) > 1 and isinstance(err, FibrilError) and not isinstance(err, ConnectionClosedError):
            # A refused shared line: each handle on its own says which failed.
            for h, f, st in zip(handles, futures, states):
                self._single(h, f, st)
            return
        _fail(futures, err)

    def _single(self, handle: str, fut: asyncio.Future[None], state: list[bool]) -> None:
        try:
            answer = self._send(("ACK " + handle + "\r\n").encode())
        except FibrilError as e:
            _fail([fut], e)
            return
        answer.add_done_callback(functools.partial(self._answered, handles=[handle], futures=[fut], states=[state]))

    def fail_all(self, err: BaseException) -> None:
        """Fails every queued ack (the client closed or lost its connection)."""
        futures = self._futures
        self._handles, self._futures, self._states = [], [], []
        _fail(futures, err)


def _fail(futures: list[asyncio.Future[None]], err: BaseException) -> None:
    for f in futures:
        if not f.done():
            f.set_exception(err)
