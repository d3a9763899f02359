"""An asyncio event loop in a daemon thread: how :mod:`fibril.sync` blocks.

The blocking client owns one :class:`LoopThread`; every call it makes is a
coroutine of the asyncio client handed to this loop, while the calling thread
waits for its result. This module owns no protocol state. It must never run
user code on the loop thread: a blocking call made there would wait for itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .errors import ClientClosedError, TimedOutError

T = TypeVar("T")


class _Call:
    """One coroutine handed to the loop: its task, its timer and the caller's future."""

    __slots__ = ("coro", "timeout", "result", "task", "timer", "timed_out")

    def __init__(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> None:
        self.coro = coro
        self.timeout = timeout
        self.result: concurrent.futures.Future[Any] = concurrent.futures.Future()
        # Running at once: a caller's cancel() must not race the loop's
        # set_result (the call goes on where it runs; cancel it there).
        self.result.set_running_or_notify_cancel()
        self.task: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timed_out = False

    # The methods below run on the loop thread.

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.task = loop.create_task(self.coro)
        self.task.add_done_callback(self._done)
        if self.timeout is not None:
            # The timeout runs on the loop, where the call runs: it is
            # cancelled there, and a result that arrived as the time ran out
            # is returned rather than dropped (a delivery must not vanish).
            self.timer = loop.call_later(self.timeout, self._expire)

    def _expire(self) -> None:
        self.timed_out = True
        if self.task is not None:
            self.task.cancel()

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
        else:
            self.coro.close()

    def _done(self, task: asyncio.Task[Any]) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if task.cancelled():
            if self.timed_out:
                self.result.set_exception(TimedOutError(f"no answer within {self.timeout} s"))
            else:
                # The loop is stopping (or the caller gave up and is gone).
                self.result.set_exception(ClientClosedError("client closed"))
        elif (e := task.exception()) is not None:
            self.result.set_exception(e)
        else:
            self.result.set_result(task.result())


class LoopThread:
    """A private event loop running in a daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopped

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs ``coro`` on the loop and blocks the calling thread until it ends.

        Args:
            coro: The coroutine (closed unstarted when the loop is stopped).
            timeout: Seconds before the call is cancelled (None = no limit).

        Returns:
            The coroutine's result; its exception is raised as it is.

        Raises:
            TimedOutError: ``timeout`` passed first.
            ClientClosedError: The loop was stopped before or during the call.
            RuntimeError: Called from the loop thread itself.
        """
        call = self._schedule(coro, timeout)
        try:
            return call.result.result()  # type: ignore[no-any-return]
        except BaseException:
            # KeyboardInterrupt (or any escape) while waiting: stop the call on
            # the loop too. A finished call ignores this.
            if not call.result.done():
                with self._lock:
                    if not self._stopped:
                        self.loop.call_soon_threadsafe(call.cancel)
            raise

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Starts ``coro`` on the loop and returns a future of its result at once.

        The future cannot be cancelled; it fails with ClientClosedError when
        the loop stops first.

        Raises:
            ClientClosedError: The loop was stopped.
        """
        return self._schedule(coro, None).result

    def _schedule(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> _Call:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a fibril.sync call made on the client's own event-loop thread would deadlock")
        call = _Call(coro, timeout)
        with self._lock:
            # Under the lock so stop() cannot slip between the check and the
            # scheduling: everything scheduled here starts before stop's cleanup.
            if self._stopped:
                coro.close()
                raise ClientClosedError("client closed")
            self.loop.call_soon_threadsafe(call.start, self.loop)
        return call

    def stop(self) -> None:
        """Cancels whatever still runs on the loop, stops it and joins its thread.

        Idempotent. Callers blocked in :meth:`run` get ClientClosedError.

        Raises:
            RuntimeError: Called from the loop thread itself.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("a fibril.sync client cannot be stopped from its own event-loop thread")
        with self._lock:
            if self._stopped:
                return
            self._stopped = True

        async def cancel_all() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()
