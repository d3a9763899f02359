"""Servers for the nats-py tests: ``fibril serve`` (built once from
../../cmd/fibril, or $FIBRIL_BIN) and nats-server ($NATS_SERVER_BIN, $PATH or
~/go/bin) on free loopback ports, each stopped when its test ends."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fibril_bin() -> Iterator[str]:
    if os.environ.get("FIBRIL_BIN"):
        yield os.environ["FIBRIL_BIN"]
        return
    d = tempfile.mkdtemp(prefix="fibril-stock-py-bin-")
    out = os.path.join(d, "fibril")
    subprocess.run(["go", "build", "-o", out, "./cmd/fibril"], cwd=ROOT, check=True)
    yield out
    shutil.rmtree(d, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _nats_server_bin() -> str | None:
    if os.environ.get("NATS_SERVER_BIN"):
        return os.environ["NATS_SERVER_BIN"]
    found = shutil.which("nats-server")
    if found:
        return found
    home = Path.home() / "go" / "bin" / "nats-server"
    return str(home) if home.exists() else None


@pytest.fixture(params=["fibril", "nats-server"])
def server_url(request: pytest.FixtureRequest, fibril_bin: str) -> Iterator[str]:
    """The URL of a fresh fibril serve, then of a fresh nats-server (control)."""
    yield from _serve(request, fibril_bin, jetstream=False)


@pytest.fixture(params=["fibril", "nats-server"])
def js_server_url(request: pytest.FixtureRequest, fibril_bin: str) -> Iterator[str]:
    """server_url with JetStream on the nats-server control."""
    yield from _serve(request, fibril_bin, jetstream=True)


def _serve(request: pytest.FixtureRequest, fibril_bin: str, jetstream: bool) -> Iterator[str]:
    data = tempfile.mkdtemp(prefix="fibril-stock-py-")
    if request.param == "fibril":
        proc = subprocess.Popen(
            [fibril_bin, "serve", "--listen", "127.0.0.1:0", "--data", data, "--ready-json", "--log-level", "warn"],
            stdout=subprocess.PIPE,
        )
        assert proc.stdout is not None
        url = "nats://" + json.loads(proc.stdout.readline())["addr"]
    else:
        binary = _nats_server_bin()
        if binary is None:
            shutil.rmtree(data, ignore_errors=True)
            if os.environ.get("CI"):
                pytest.fail("nats-server not found (.ci/run installs it)")
            pytest.skip("nats-server not installed")
        port = _free_port()
        extra = ["-js", "-sd", data] if jetstream else []
        proc = subprocess.Popen([binary, "-a", "127.0.0.1", "-p", str(port), *extra], stderr=subprocess.DEVNULL)
        url = f"nats://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
    yield url
    proc.kill()
    proc.wait()
    shutil.rmtree(data, ignore_errors=True)
