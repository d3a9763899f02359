"""A request of the asyncio client: its frame, its caller's future and how
its answer is read; and the not_leader backoff of a publish (SPEC.md 11.1).

No I/O: the client owns the FIFO these requests wait in and the timers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from . import _proto as proto
from ._common import KIND_PLAIN

#: Backoff of a publish answered not_leader: first delay and largest, seconds.
NOT_LEADER_FIRST, NOT_LEADER_MAX = 0.05, 1.0


class Request:
    """One command awaiting its answer.

    Attributes:
        frame: The encoded command, sent again as is on a resend.
        future: The caller's future, or None when nobody awaits the answer.
        kind: How the ``+OK`` argument is read (``_common.KIND_*``).
        retry: Sent again on the next connection when the connection drops
            before the answer (publishes and POLLs).
        msgs: Deliveries of a POLL gathered before its ``+OK``.
        backoff: ``(next delay, deadline)`` on the loop clock once answered
            ``not_leader``; None before.
    """

    __slots__ = ("frame", "future", "kind", "retry", "msgs", "backoff")

    def __init__(self, frame: bytes, future: asyncio.Future[Any] | None, kind: int = KIND_PLAIN, retry: bool = False):
        self.frame = frame
        self.future = future
        self.kind = kind
        self.retry = retry
        self.msgs: list[proto.Msg] = []
        self.backoff: tuple[float, float] | None = None

    @property
    def given_up(self) -> bool:
        """True once the caller's future is done (answered, failed or cancelled)."""
        return self.future is not None and self.future.done()

    def resolve(self, value: Any) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result(value)

    def fail(self, err: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(err)


def not_leader_wait(req: Request, now: float, timeout: float) -> float | None:
    """Returns how long to wait before sending ``req`` again after a
    ``not_leader`` answer at ``now``: 50 ms, doubling up to 1 s, never past
    ``timeout`` seconds after its first such answer; None once that has
    passed (then it fails with the not_leader error). Advances ``req.backoff``."""
    delay, deadline = req.backoff or (NOT_LEADER_FIRST, now + timeout)
    if now >= deadline:
        return None
    req.backoff = (min(delay * 2, NOT_LEADER_MAX), deadline)
    return min(delay, deadline - now)
