"""A cluster of ``fibril serve`` processes on loopback, for tests and the
conformance runner's cluster scenarios (conformance/README.md, "Clusters").

Certificates come from ``fibril certs``; each node has its own data directory
and an admin listener (``--http``) whose ``GET /api/cluster`` says which node
leads the metadata group. Nothing started here is left running by ``close``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import Server, kill_server, start_server


def _free_ports(n: int) -> list[str]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]
    finally:
        for s in socks:
            s.close()


def _meta_leader(http: str) -> str:
    try:
        with urllib.request.urlopen(f"http://{http}/api/cluster", timeout=1) as r:
            v = json.loads(r.read(1 << 20))
    except (OSError, ValueError):
        return ""
    for n in v.get("nodes") or []:
        if n.get("leader_of_meta"):
            return str(n.get("name", ""))
    return ""


class Cluster:
    """``n`` nodes named n1..n<n>; ``addrs`` are their client addresses in
    node order, the same across ``restart``."""

    def __init__(self, binary: Path, directory: str, n: int = 3, timeout: float = 30.0) -> None:
        self.binary = binary
        self.names = [f"n{i + 1}" for i in range(n)]
        certs = Path(directory) / "certs"
        subprocess.run([str(binary), "certs", "--dir", str(certs), *self.names], check=True, capture_output=True)
        ports = _free_ports(3 * n)
        links, self.http, self.addrs = ports[:n], ports[n : 2 * n], ports[2 * n :]
        self.args: list[list[str]] = []
        self.data: list[str] = []
        for i, name in enumerate(self.names):
            peers = ",".join(f"{o}@{links[j]}" for j, o in enumerate(self.names) if j != i)
            data = Path(directory) / name
            data.mkdir(parents=True, exist_ok=True)
            self.data.append(str(data))
            self.args.append([
                "--cluster-name", name, "--cluster-listen", links[i], "--cluster-peers", peers,
                "--cluster-ca", str(certs / "ca.pem"), "--cluster-cert", str(certs / f"{name}.pem"),
                "--cluster-key", str(certs / f"{name}-key.pem"), "--http", self.http[i],
            ])
        self.nodes: list[Server | None] = [None] * n
        try:
            # Started together, in case a node's ready line waits for its peers.
            with ThreadPoolExecutor(n) as pool:
                for f in [pool.submit(self.restart, i, timeout) for i in range(n)]:
                    f.result()
            self.wait_meta_leader(timeout)
        except BaseException:
            self.close()
            raise

    def wait_meta_leader(self, timeout: float) -> None:
        """Waits until every node names the same metadata leader (before
        that, TOPIC CREATE is answered not_leader)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leaders = {_meta_leader(h) for h in self.http}
            if len(leaders) == 1 and "" not in leaders:
                return
            time.sleep(0.05)
        raise RuntimeError(f"no metadata leader all nodes agree on within {timeout:g} s")

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` and wait until it is gone."""
        s = self.nodes[i]
        if s is not None:
            kill_server(s)
            self.nodes[i] = None

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start node ``i`` on its address and data directory, retrying while
        its port is still taken."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.nodes[i] = start_server(self.binary, self.data[i], *self.args[i], listen=self.addrs[i])
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        for i in range(len(self.nodes)):
            self.kill(i)
