"""Runs every code block of README.md (issue 31: the quickstarts hung; every
block must run in the tests): the install commands in a fresh virtualenv, the
quickstart (its output compared with the README's), the worker (SIGTERM'd,
it exits within 1 s) and the blocking example, each on a new server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, start_server, stop_server
from helpers import run

import fibril

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from readme_blocks import Block, blocks  # noqa: E402

SDK = Path(__file__).resolve().parent.parent
README_URL = "nats://127.0.0.1:4222"


def kind(b: Block) -> str:
    """Says which runner a block needs; a block no runner knows fails the test."""
    if b.lang == "sh":
        return "install"
    if b.lang == "python" and 'if __name__ == "__main__":' in b.code:
        return "quickstart"
    if b.lang == "python" and "signal.SIGTERM" in b.code:
        return "worker"
    if b.lang == "python" and "from fibril import sync" in b.code:
        return "sync"
    return "unknown"


BLOCKS = blocks()


def of(k: str) -> list[Block]:
    return [b for b in BLOCKS if kind(b) == k]


@pytest.fixture
def fresh(fibril_bin: Path) -> Iterator[Server]:
    """A server of the test's own: the quickstart's output assumes a new one."""
    with tempfile.TemporaryDirectory(prefix="fibril-readme-") as data:
        s = start_server(fibril_bin, data)
        try:
            yield s
        finally:
            stop_server(s)


def script(b: Block, url: str, tmp: Path, name: str) -> Path:
    p = tmp / name
    p.write_text(b.code.replace(README_URL, url))
    return p


def test_every_block_has_a_runner() -> None:
    assert [kind(b) for b in BLOCKS if kind(b) == "unknown"] == [], [b.line for b in BLOCKS if kind(b) == "unknown"]
    assert len(of("install")) == 2 and len(of("quickstart")) == 1 and len(of("worker")) == 1 and len(of("sync")) == 1


def test_quickstart_prints_what_the_readme_says(fresh: Server, tmp_path: Path) -> None:
    (b,) = of("quickstart")
    p = script(b, fresh.url, tmp_path, "quickstart.py")
    out = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b.output
    # Run again: exist_ok, and the next three are stored after the first three.
    again = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "total 60"


def test_worker_runs_until_sigterm(fresh: Server, tmp_path: Path) -> None:
    (b,) = of("worker")
    p = script(b, fresh.url, tmp_path, "worker.py")

    async def body() -> float:
        async with fibril.connect(fresh.url) as c:
            await c.create_topic("orders", exist_ok=True)
            await c.create_group("orders", "billing", exist_ok=True)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(p), stdout=asyncio.subprocess.PIPE, cwd=tmp_path
            )
            assert proc.stdout is not None
            try:
                for i in range(3):
                    await c.publish("orders", str(i))
                lines = [(await asyncio.wait_for(proc.stdout.readline(), 15)).decode().strip() for _ in range(3)]
                assert sorted(lines) == ["order 0", "order 1", "order 2"]
                t0 = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(proc.wait(), 5) == 0
                took = time.monotonic() - t0
                gi = await c.group_info("orders", "billing")
                assert (gi["pending"], gi["inflight"]) == (0, 0), gi
                return took
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    took = run(body())
    assert took < 1.0, f"the README worker took {took:.2f} s to stop"


def test_blocking_example(fresh: Server, tmp_path: Path) -> None:
    (b,) = of("sync")
    p = script(b, fresh.url, tmp_path, "blocking.py")
    out = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "settled 1001\n"


def test_install_commands_in_a_fresh_venv(fresh: Server, tmp_path: Path) -> None:
    """The README's install commands, run as written from a directory holding
    the repository's sdk-python, each into a new virtualenv; the quickstart
    then runs on what they installed."""
    (b,) = of("quickstart")
    work = tmp_path / "clone"
    work.mkdir()
    (work / "sdk-python").symlink_to(SDK)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}", VIRTUAL_ENV=str(venv))
    env.pop("PYTHONPATH", None)
    py = str(venv / "bin" / "python")
    p = script(b, fresh.url, work, "quickstart.py")
    for inst in of("install"):  # one venv: the second command installs over the first
        res = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", inst.code], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, f"README line {inst.line}:\n{res.stdout}\n{res.stderr}"
        out = subprocess.run([py, str(p)], capture_output=True, text=True, timeout=60, cwd=work, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.endswith("total 60\n")
        where = subprocess.run(
            [py, "-c", "import fibril; print(fibril.__file__)"], capture_output=True, text=True, cwd=work, env=env,
            check=True,
        ).stdout
        assert str(venv) in where, f"fibril imported from {where} instead of the new venv"
