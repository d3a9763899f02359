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
``done <job> attempt=<n>``, ``retry <job> attempt=<n>``, ``stopped``).
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


async def work(sub: fibril.Subscription, args: argparse.Namespace) -> None:
    """One worker loop: take a job, run it, settle it; ends when the subscription closes."""
    while True:
        try:
            msg = await sub.next()
        except StopAsyncIteration:
            return
        except fibril.CorruptMessageError as e:
            log("corrupt", e)  # already handed back to the server for redelivery
            continue
        body = msg.data.decode("utf-8", "replace")
        log("start", body)
        try:
            await process(body, msg.delivery_count)
        except Exception:
            delay = backoff(msg.delivery_count, args.backoff, args.max_backoff)
            log("retry", body, f"attempt={msg.delivery_count}", f"delay={delay:g}")
            await msg.nack(delay=delay)
        else:
            await msg.ack()
            log("done", body, f"attempt={msg.delivery_count}")


async def main(argv: list[str] | None = None) -> int:
    """Runs the worker until SIGTERM/SIGINT; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="nats://127.0.0.1:4222")
    p.add_argument("--topic", default="jobs")
    p.add_argument("--group", default="workers")
    p.add_argument("-n", "--concurrency", type=int, default=8)
    p.add_argument("--backoff", type=float, default=0.1, help="first retry delay in seconds")
    p.add_argument("--max-backoff", type=float, default=30.0)
    p.add_argument("--grace", type=float, default=30.0, help="seconds jobs in progress get on shutdown")
    args = p.parse_args(argv)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async with fibril.connect(args.url, name="example-worker") as c:
        # Credit of twice the concurrency keeps every worker busy without
        # hoarding jobs other workers could take.
        sub = c.consume(args.topic, args.group, max_in_flight=2 * args.concurrency)
        await sub.start()
        workers = [asyncio.create_task(work(sub, args)) for _ in range(args.concurrency)]
        log("ready")
        await stop.wait()
        # Stop taking jobs: idle workers return, buffered jobs go back to the
        # server, busy workers finish and settle their current job.
        await sub.close()
        done, busy = await asyncio.wait(workers, timeout=args.grace)
        for t in busy:
            t.cancel()  # unsettled: the server redelivers when the lease ends
        for t in done:
            if t.exception() is not None:
                log("worker failed:", repr(t.exception()))
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
