#!/usr/bin/env python3
"""Fibril's Python SDK and nats-py (against nats-server JetStream) side by
side: runs bench/bench_fibril.py and bench/bench_nats.py alternately, --reps
times each, and prints the medians with what each side guarantees.

Usage (``make bench-peers`` sets it up)::

    python bench/compare.py --bin /path/to/fibril --nats-python /venv/bin/python [-n 20000] [--reps 3]

The nats-py interpreter must have nats-py installed and nats-server on PATH.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

GUARANTEES = {
    "publish": "Fibril: confirmed after fsync (durability group); JetStream: PubAck, file store, "
    "default sync_interval (not fsynced before the ack)",
    "consume": "Fibril: every ack confirmed (committed) before the phase ends; nats-py: msg.ack() "
    "is a plain publish, never confirmed",
}


def last_json(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    res: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True)
    p.add_argument("--nats-python", required=True)
    p.add_argument("-n", type=int, default=20000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--inflight", type=int, default=512, help="max_in_flight = max_ack_pending on both sides")
    args = p.parse_args()
    fib: list[dict[str, float]] = []
    nat: list[dict[str, float]] = []
    for i in range(args.reps):
        common = ["-n", str(args.n), "--inflight", str(args.inflight)]
        fib.append(last_json([sys.executable, str(HERE / "bench_fibril.py"), "--bin", args.bin, *common]))
        nat.append(last_json([args.nats_python, str(HERE / "bench_nats.py"), *common]))
        print(f"rep {i + 1}: fibril {fib[-1]}\n       nats-py {nat[-1]}", flush=True)

    def med(rs: list[dict[str, float]], k: str) -> float:
        return statistics.median(r[k] for r in rs)

    print(f"\nmedians of {args.reps} alternating runs, {args.n} x 128 B messages, window {args.inflight}")
    print("| phase | Fibril py msgs/s (CPU us/msg) | nats-py msgs/s (CPU us/msg) | ratio | guarantees |")
    print("| --- | --- | --- | --- | --- |")
    for ph in ("publish", "consume"):
        f, n = med(fib, f"{ph}_msgs_per_s"), med(nat, f"{ph}_msgs_per_s")
        fc, nc = med(fib, f"{ph}_cpu_us"), med(nat, f"{ph}_cpu_us")
        print(f"| {ph} | {f:,.0f} ({fc:.1f}) | {n:,.0f} ({nc:.1f}) | {f / n:.2f}x | {GUARANTEES[ph]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
