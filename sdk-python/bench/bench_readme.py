#!/usr/bin/env python3
"""Runs the README quickstart's consume loop on a backlog and reports its rate.

The loop is the README's own code: the quickstart block is read from
README.md (tools/readme_blocks.py) and loaded as a module, and its
``consume(c, count)`` is called on a fresh ``fibril serve`` whose topic
``orders`` holds ``n`` messages for the group ``billing``. The rate counts
messages taken and acked, until the last ack is answered. Not part of
``make test``: ``make bench-readme`` runs it.

Usage::

    python bench/bench_readme.py --bin /path/to/fibril [-n 50000] [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import fibril

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fibril import start  # noqa: E402
from readme_blocks import blocks  # noqa: E402


def readme_module() -> types.ModuleType:
    """Loads the README's quickstart block as a module (its main does not run)."""
    (code,) = [b.code for b in blocks() if b.lang == "python" and 'if __name__ == "__main__":' in b.code]
    mod = types.ModuleType("readme_quickstart")
    exec(compile(code, "README.md", "exec"), mod.__dict__)
    return mod


async def one(url: str, n: int, consume: types.FunctionType) -> tuple[float, float]:
    async with fibril.connect(url, name="bench-readme") as c:
        await c.create_topic("orders", exist_ok=True)
        await c.create_group("orders", "billing", exist_ok=True)
        futs = [await c.publish_async("orders", "1") for _ in range(n)]
        await asyncio.gather(*futs)
        t0, c0 = time.perf_counter(), time.process_time()
        total = await consume(c, n)
        await c.ping()  # every ack answered
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert total == n, total
        return n / wall, cpu / n * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="fibril binary")
    p.add_argument("-n", type=int, default=50000)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    consume = readme_module().consume
    rates, cpus = [], []
    for _ in range(args.reps):
        with tempfile.TemporaryDirectory(prefix="fibril-bench-readme-") as data:
            proc, url = start(args.bin, data)
            try:
                rate, cpu = asyncio.run(one(url, args.n, consume))
            finally:
                proc.terminate()
                proc.wait()
        rates.append(rate)
        cpus.append(cpu)
        print(f"README consume loop: {args.n} msgs, {rate:,.0f} msgs/s acked, {cpu:.1f} us CPU/msg", flush=True)
    print(json.dumps({"readme_consume_msgs_per_s": round(statistics.median(rates)),
                      "cpu_us_per_msg": round(statistics.median(cpus), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
