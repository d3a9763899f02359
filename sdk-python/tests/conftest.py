"""Test session fixtures: the real ``fibril serve`` on 127.0.0.1:0.

The server binary is ``$FIBRIL_BIN`` or is built from ``../cmd/fibril`` with
``go build`` into a temporary directory. Integration tests are skipped (with the
reason) only when neither exists, i.e. on a branch without the server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


@dataclass
class Server:
    """A running ``fibril serve`` process."""

    proc: subprocess.Popen[bytes]
    addr: str
    data_dir: str
    ready: dict[str, object]

    @property
    def url(self) -> str:
        return f"nats://{self.addr}"

    @property
    def host(self) -> str:
        return self.addr.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.addr.rsplit(":", 1)[1])


def _binary(tmp: Path) -> Path | None:
    env = os.environ.get("FIBRIL_BIN")
    if env:
        return Path(env)
    if not (REPO / "cmd" / "fibril").is_dir():
        return None
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = tmp / "fibril"
    r = subprocess.run([go, "build", "-o", str(out), "./cmd/fibril"], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"go build ./cmd/fibril failed:\n{r.stderr}")
    return out


def start_server(
    binary: Path, data_dir: str, *extra: str, listen: str = "127.0.0.1:0", timeout: float = 30.0
) -> Server:
    """Starts ``fibril serve`` and waits for its ready line (``--ready-json``)."""
    args = [str(binary), "serve", "--listen", listen, "--data", data_dir, "--ready-json", *extra]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    # readline blocks until the line or EOF (process exit); the deadline guards
    # a server that prints something else first.
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            proc.kill()
            raise RuntimeError(f"fibril serve exited ({proc.wait()}) before its ready line")
        try:
            ready = json.loads(line)
        except ValueError:
            continue
        if isinstance(ready, dict) and "addr" in ready:
            return Server(proc, str(ready["addr"]), data_dir, ready)
    proc.kill()
    raise RuntimeError("fibril serve printed no ready line in time")


def kill_server(s: Server) -> None:
    """Kills the server at once (SIGKILL), as a crash would."""
    s.proc.kill()
    s.proc.wait()
    if s.proc.stdout is not None:
        s.proc.stdout.close()


def stop_server(s: Server) -> None:
    s.proc.terminate()
    try:
        s.proc.wait(10)
    except subprocess.TimeoutExpired:
        s.proc.kill()
        s.proc.wait()
    if s.proc.stdout is not None:
        s.proc.stdout.close()


@pytest.fixture(scope="session")
def fibril_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the server binary (skips integration tests when there is none)."""
    b = _binary(tmp_path_factory.mktemp("bin"))
    if b is None:
        pytest.skip("no server: cmd/fibril is not on this branch and FIBRIL_BIN is unset")
    return b


@pytest.fixture(scope="session")
def server(fibril_bin: Path) -> Iterator[Server]:
    """One ``fibril serve`` for the whole session, with a temporary data directory."""
    with tempfile.TemporaryDirectory(prefix="fibril-py-") as data:
        s = start_server(fibril_bin, data)
        try:
            yield s
        finally:
            stop_server(s)


@pytest.fixture(scope="session")
def durable(server: Server) -> Server:
    """The session server, skipping the test when its durable engine is not
    usable yet (a branch where the broker is not fully wired in)."""
    import uuid

    from fibril import sync
    from fibril.errors import FibrilError

    probe = f"py-probe-{uuid.uuid4().hex[:8]}"
    with sync.connect(server.url) as c:
        try:
            c.create_topic(probe)
            c.delete_topic(probe)
        except FibrilError as e:
            if e.code in ("unknown_op", "unknown_operation") or "not available" in e.message:
                pytest.skip(f"server has no usable durable engine yet: {e}")
            raise
    return server
