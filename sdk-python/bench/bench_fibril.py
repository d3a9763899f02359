#!/usr/bin/env python3
"""Publish + consume throughput of the Python SDK against a real ``fibril serve``.

Usage::

    python bench/bench_fibril.py --bin /path/to/fibril [-n 50000] [--size 128]
    python bench/bench_fibril.py --url nats://127.0.0.1:4222

Phases (each on a fresh durable topic, durability ``group``):

* ``publish``: n confirmed publishes from one task, pipelined (``publish_async``,
  bounded by the server's ``max_unconfirmed``);
* ``consume``: push consumption of those n messages, ``msg.ack_async()`` each
  (coalesced into ACK lines; the phase ends when the last ack is confirmed);
* ``fetch``: pull consumption (POLL batches of 256), acked per batch.

Prints one line per phase and a JSON summary. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid

import fibril


def start(binary: str, data: str) -> tuple[subprocess.Popen[bytes], str]:
    """Starts ``fibril serve`` on a free port and returns it with its URL."""
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data", data, "--ready-json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, "nats://" + json.loads(line)["addr"]


async def publish_phase(c: fibril.Client, topic: str, n: int, body: bytes) -> float:
    t0 = time.perf_counter()
    futs = [await c.publish_async(topic, body) for _ in range(n)]
    await asyncio.gather(*futs)
    return time.perf_counter() - t0


async def consume_phase(c: fibril.Client, topic: str, n: int, inflight: int) -> float:
    """The README's loop: push consume, ``msg.ack_async()`` per message; the
    phase ends when the last ack is answered (confirmed: committed by the server)."""
    t0 = time.perf_counter()
    got = 0
    last: asyncio.Future[None] | None = None
    async with c.consume(topic, "bench", max_in_flight=inflight) as sub:
        async for msg in sub:
            last = msg.ack_async()
            got += 1
            if got == n:
                break
    assert last is not None
    await last
    return time.perf_counter() - t0


async def fetch_phase(c: fibril.Client, topic: str, n: int) -> float:
    t0 = time.perf_counter()
    got = 0
    while got < n:
        msgs = await c.fetch(topic, "pull", 256, wait=1.0)
        got += len(msgs)
        await c.ack(msgs)
    return time.perf_counter() - t0


async def run(url: str, n: int, size: int, inflight: int) -> dict[str, float]:
    body = b"x" * size
    out: dict[str, float] = {}
    async with fibril.connect(url, name="bench") as c:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        await c.create_topic(topic)
        await c.create_group(topic, "bench")
        await c.create_group(topic, "pull")
        c0 = time.process_time()
        dt = await publish_phase(c, topic, n, body)
        cpu = (time.process_time() - c0) / n * 1e6
        out["publish_msgs_per_s"], out["publish_cpu_us"] = n / dt, cpu
        print(f"publish  {n} x {size} B: {dt:.2f} s, {n / dt:,.0f} msg/s, {cpu:.1f} us CPU/msg", flush=True)
        c0 = time.process_time()
        dt = await consume_phase(c, topic, n, inflight)
        cpu = (time.process_time() - c0) / n * 1e6
        out["consume_msgs_per_s"], out["consume_cpu_us"] = n / dt, cpu
        print(f"consume  {n}: {dt:.2f} s, {n / dt:,.0f} msg/s, {cpu:.1f} us CPU/msg "
              f"(push, max_in_flight {inflight})", flush=True)
        dt = await fetch_phase(c, topic, n)
        out["fetch_msgs_per_s"] = n / dt
        print(f"fetch    {n}: {dt:.2f} s, {n / dt:,.0f} msg/s (POLL 256)", flush=True)
        await c.delete_topic(topic)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url")
    p.add_argument("--bin", help="fibril binary to start (when no --url)")
    p.add_argument("-n", type=int, default=50000)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--inflight", type=int, default=512)
    args = p.parse_args()
    proc = None
    url = args.url
    with tempfile.TemporaryDirectory(prefix="fibril-bench-") as data:
        if url is None:
            if not args.bin:
                p.error("give --url or --bin")
            proc, url = start(args.bin, data)
        try:
            res = asyncio.run(run(url, args.n, args.size, args.inflight))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
    print(json.dumps({k: round(v, 1) for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
