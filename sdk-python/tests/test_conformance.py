"""The conformance scenarios (conformance/scenarios/*.json) with this SDK.

Scenarios needing a feature this runner or server lacks are skipped with the
reason; scenarios in known_failures.json must still fail (the test fails once
one passes, so the entry gets removed), except ``flaky:`` ones.

With ``FIBRIL_CONFORMANCE_JSONL=<file>`` every scenario also appends its result
as one JSON line, for ``go run ./cmd/fibril-conformance -merge <file>`` (the
top-level ``make conformance`` does this).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conformance_runner import (
    DEFAULT_DIR,
    RUNNER,
    Scenario,
    load_known_failures,
    load_scenarios,
    missing_features,
    server_info,
    unsupported,
)
from cluster import Cluster
from conftest import Server, kill_server, start_server, stop_server

DIR = Path(os.environ.get("FIBRIL_CONFORMANCE_DIR", str(DEFAULT_DIR)))
SCENARIOS = load_scenarios(DIR) if (DIR / "scenarios").is_dir() else []
KNOWN = load_known_failures(DIR) if SCENARIOS else {}
JSONL = os.environ.get("FIBRIL_CONFORMANCE_JSONL")


def record(name: str, status: str, detail: str) -> None:
    """Appends one result line to $FIBRIL_CONFORMANCE_JSONL, if set."""
    if JSONL:
        with open(JSONL, "a", encoding="utf-8") as f:
            f.write(json.dumps({"scenario": name, "runner": RUNNER, "status": status, "detail": detail}) + "\n")


def params() -> list[Any]:
    if not SCENARIOS:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no scenarios in {DIR}/scenarios"))]
    return [pytest.param(sc, id=sc["name"]) for sc in SCENARIOS]


async def run_scenario(sc: dict[str, Any], server: Server, fibril_bin: Path) -> None:
    info = await server_info(server.addr)
    restartable = "restart" in sc.get("requires", [])
    missing = missing_features(sc, info, can_restart=True)
    if missing:
        pytest.skip("missing " + ", ".join(missing))
    gaps = unsupported(sc)
    if gaps:
        pytest.skip("the py-sdk runner does not support " + ", ".join(gaps) + " yet")
    if sc.get("cluster"):
        await run_cluster_scenario(sc, fibril_bin)
        return
    if not restartable:
        await Scenario(server.addr, info).run(sc)
        return
    # Restart scenarios get their own server, killed and started again on the
    # same address and data directory.
    with tempfile.TemporaryDirectory(prefix="fibril-restart-") as data:
        own = [start_server(fibril_bin, data)]

        async def restart() -> None:
            kill_server(own[0])
            own[0] = await asyncio.to_thread(start_server, fibril_bin, data, listen=own[0].addr)

        try:
            await Scenario(own[0].addr, info, restart).run(sc)
        finally:
            stop_server(own[0])


async def run_cluster_scenario(sc: dict[str, Any], fibril_bin: Path) -> None:
    """A cluster scenario gets a fresh cluster of its own; kill_node and
    restart_node act on its nodes."""
    with tempfile.TemporaryDirectory(prefix="fibril-cluster-") as d:
        c = await asyncio.to_thread(Cluster, fibril_bin, d, int(sc["cluster"]))
        try:
            info = await server_info(c.addrs[0])

            async def node_op(op: str, i: int) -> None:
                if op == "kill_node":
                    await asyncio.to_thread(c.kill, i)
                else:
                    await asyncio.to_thread(c.restart, i)

            await Scenario(c.addrs[0], info, nodes=c.addrs, node_op=node_op).run(sc)
        finally:
            await asyncio.to_thread(c.close)


@pytest.mark.parametrize("sc", params())
def test_scenario(sc: dict[str, Any], server: Server, fibril_bin: Path) -> None:
    name = sc["name"]
    known = KNOWN.get(name)
    try:
        asyncio.run(run_scenario(sc, server, fibril_bin))
    except pytest.skip.Exception as e:
        record(name, "skip", str(e))
        raise
    except Exception as e:
        record(name, "FAIL", str(e) or type(e).__name__)
        if known is not None and isinstance(e, AssertionError):
            pytest.xfail(f"known failure ({known}): {e}")
        raise
    record(name, "pass", "")
    if known is not None and not known.startswith("flaky:"):
        pytest.fail(f"{name} is listed in known_failures.json ({known}) but passes: remove the entry")

