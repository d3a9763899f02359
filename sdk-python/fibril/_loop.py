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


async def _bounded(coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
    # The timeout runs on the loop, not in the waiting thread: wait_for
    # cancels the call where it runs, and a result that arrived as the time ran
    # out is returned rather than dropped (a delivery must not vanish).
    if timeout is None:
        return await coro
    try:
        return await asyncio.wait_for(coro, timeout)
    except asyncio.TimeoutError:
        raise TimedOutError(f"no answer within {timeout} s") from None


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
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a fibril.sync call made on the client's own event-loop thread would deadlock")
        with self._lock:
            # Under the lock so stop() cannot slip between the check and the
            # scheduling: everything scheduled here runs before stop's cleanup.
            if self._stopped:
                coro.close()
                raise ClientClosedError("client closed")
            cf = asyncio.run_coroutine_threadsafe(_bounded(coro, timeout), self.loop)
        try:
            return cf.result()
        except concurrent.futures.CancelledError:
            raise ClientClosedError("client closed") from None
        except BaseException:
            # KeyboardInterrupt (or any escape) while waiting: stop the call on
            # the loop too. A finished future ignores this.
            cf.cancel()
            raise

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
