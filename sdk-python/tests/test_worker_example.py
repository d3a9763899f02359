"""Runs examples/worker.py against the real server: concurrency, ack, nack with
backoff, and a clean SIGTERM shutdown that finishes the job in progress."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

from conftest import Server
from helpers import run, unique

from fibril import sync

WORKER = Path(__file__).resolve().parent.parent / "examples" / "worker.py"


def test_backoff_schedule() -> None:
    sys.path.insert(0, str(WORKER.parent))
    try:
        import worker
    finally:
        sys.path.pop(0)
    assert [worker.backoff(a, 0.1, 0.5) for a in (1, 2, 3, 4)] == [0.1, 0.2, 0.4, 0.5]


def test_worker_processes_retries_and_stops_on_sigterm(durable: Server) -> None:
    topic = unique("jobs")
    jobs = [f"job{i}" for i in range(8)] + ["fail:2"]
    with sync.connect(durable.url) as c:
        c.create_topic(topic)
        c.create_group(topic, "workers", max_deliveries=5)
        for j in jobs:
            c.publish(topic, j)

    async def body() -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), "--url", durable.url, "--topic", topic, "--group", "workers",
            "-n", "3", "--backoff", "0.05", "--grace", "10",
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        lines: list[str] = []

        async def until(pred: str) -> None:
            while pred not in lines:
                raw = await asyncio.wait_for(proc.stdout.readline(), 15)  # type: ignore[union-attr]
                if not raw:
                    raise AssertionError(f"worker exited before {pred!r}; output: {lines}")
                lines.append(raw.decode().strip())

        try:
            await until("ready")
            for j in jobs[:-1]:
                await until(f"done {j} attempt=1")
            await until("done fail:2 attempt=3")
            assert [ln for ln in lines if ln.startswith("retry fail:2")] == [
                "retry fail:2 attempt=1 delay=0.05",
                "retry fail:2 attempt=2 delay=0.1",
            ]
            with sync.connect(durable.url) as c:
                c.publish(topic, "sleep:0.5")
            await until("start sleep:0.5")
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            await until("stopped")
            # Idle workers stop at once; only the 0.5 s job is waited for (grace is 10 s).
            assert time.monotonic() - t0 < 5
            assert await asyncio.wait_for(proc.wait(), 10) == 0
            # The job in progress at SIGTERM was finished and acked before exit.
            assert lines.index("done sleep:0.5 attempt=1") < lines.index("stopped")
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    run(body())
    with sync.connect(durable.url) as c:
        assert c.fetch(topic, "workers", 10, wait=0.3) == []


def test_worker_sigterm_with_backlog_exits_at_once(durable: Server) -> None:
    """SIGTERM'd with about a hundred 50 ms jobs buffered, the worker finishes
    the jobs in progress and exits within 1 s; every job it did not finish is
    pending again at once (the group's lease is 10 minutes)."""
    topic = unique("jobs")
    total = 200
    with sync.connect(durable.url) as c:
        c.create_topic(topic, partitions=1)
        c.create_group(topic, "workers", lease=600)
        for f in [c.publish_async(topic, "sleep:0.05") for _ in range(total)]:
            f.result()

    async def body() -> float:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), "--url", durable.url, "--topic", topic, "--group", "workers",
            "-n", "2", "--max-in-flight", "100",
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        lines: list[str] = []
        try:
            while sum(ln.startswith("done ") for ln in lines) < 10:
                raw = await asyncio.wait_for(proc.stdout.readline(), 15)
                assert raw, f"worker exited early: {lines}"
                lines.append(raw.decode().strip())
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.stdout.read(), 5)
            assert await asyncio.wait_for(proc.wait(), 5) == 0
            return time.monotonic() - t0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    took = run(body())
    assert took < 1.0, f"the worker took {took:.2f} s to exit after SIGTERM"
    with sync.connect(durable.url) as c:
        gi = c.group_info(topic, "workers")
        done = total - gi["pending"]
        assert gi["inflight"] == 0 and 0 < done < total, gi
