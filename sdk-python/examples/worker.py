#!/usr/bin/env python3
"""A Fibril worker: processes jobs with concurrency N, acks, nacks with backoff.

Usage::

    python examples/worker.py --url nats://127.0.0.1:4222 --topic jobs --group workers -n 8

Each job body is text. The demo handler understands three kinds of job:

* ``sleep:<seconds>`` — works that long, then succeeds;
* ``fail:<k>`` — fails on its first ``k`` deliveries, then succeeds;
* anything else — succeeds at once.

A failed job is negatively acknowledged with exponential backoff
(``--backoff`` × 2^(delivery-1), capped by ``--max-backoff``); after the group's
``max_deliveries`` the server dead-letters it.

On SIGTERM (or SIGINT) the worker stops taking new jobs, hands buffered ones
back to the server, lets the jobs in progress finish and settle (up to
``--grace`` seconds), then closes the connection and exits 0.

It prints one line per event on stdout (``ready``, ``start <job>``,
``done <job> attempt=<n>``, ``retry <job> attempt=<n> delay=<s>``, ``corrupt``,
``stopped``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import fibril


def log(*parts: object) -> None:
    """Prints one event line and flushes (the test reads it through a pipe)."""
    print(*parts, flush=True)


async def process(body: str, attempt: int) -> None:
    """The demo job handler; raises to make the job fail."""
    kind, _, arg = body.partition(":")
    if kind == "sleep":
        await asyncio.sleep(float(arg))
    elif kind == "fail" and attempt <= int(arg):
        raise RuntimeError(f"job {body!r} failed on attempt {attempt}")


def backoff(attempt: int, base: float, cap: float) -> float:
    """Returns the redelivery delay after failed delivery number ``attempt``."""
    return min(cap, base * 2.0 ** (attempt - 1))


async def main(argv: list[str] | None = None) -> int:
    """Runs the worker until SIGTERM/SIGINT; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="nats://127.0.0.1:4222")
    p.add_argument("--topic", default="jobs")
    p.add_argument("--group", default="workers")
    p.add_argument("-n", "--concurrency", type=int, default=8)
    p.add_argument("--max-in-flight", type=int, default=0, help="deliveries held at once (default 2n)")
    p.add_argument("--backoff", type=float, default=0.1, help="first retry delay in seconds")
    p.add_argument("--max-backoff", type=float, default=30.0)
    p.add_argument("--grace", type=float, default=30.0, help="seconds jobs in progress get on shutdown")
    args = p.parse_args(argv)

    async def handle(msg: fibril.Msg) -> None:
        """One job: run it; returning acks it (batched), a failure nacks it with backoff."""
        body = msg.data.decode("utf-8", "replace")
        log("start", body)
        try:
            await process(body, msg.delivery_count)
        except Exception:
            delay = backoff(msg.delivery_count, args.backoff, args.max_backoff)
            log("retry", body, f"attempt={msg.delivery_count}", f"delay={delay:g}")
            await msg.nack(delay=delay)
        else:
            log("done", body, f"attempt={msg.delivery_count}")

    def report(e: BaseException) -> None:
        log("corrupt" if isinstance(e, fibril.CorruptMessageError) else "error", e)

    async with fibril.connect(args.url, name="example-worker") as c:
        # Credit of twice the concurrency keeps every worker busy without
        # hoarding jobs other workers could take.
        sub = c.consume(args.topic, args.group, max_in_flight=args.max_in_flight or 2 * args.concurrency)
        await sub.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        running = asyncio.ensure_future(sub.run(handle, concurrency=args.concurrency, on_error=report))
        log("ready")
        await asyncio.wait([running, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        # Stop taking jobs: buffered ones go back to the server at once, jobs
        # in progress finish and are settled (up to --grace; then they are
        # cancelled and handed back too).
        await sub.close()
        try:
            await asyncio.wait_for(running, args.grace)
        except asyncio.TimeoutError:
            pass
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
