"""The conformance scenarios (conformance/scenarios/*.json) with this SDK.

Scenarios needing a feature this runner or server lacks are skipped with the
reason; scenarios in known_failures.json must still fail (the test fails once
one passes, so the entry gets removed), except ``flaky:`` ones.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conformance_runner import (
    DEFAULT_DIR,
    Scenario,
    load_known_failures,
    load_scenarios,
    missing_features,
    server_info,
    unsupported,
)
from conftest import Server, kill_server, start_server, stop_server

DIR = Path(os.environ.get("FIBRIL_CONFORMANCE_DIR", str(DEFAULT_DIR)))
SCENARIOS = load_scenarios(DIR) if (DIR / "scenarios").is_dir() else []
KNOWN = load_known_failures(DIR) if SCENARIOS else {}


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


@pytest.mark.parametrize("sc", params())
def test_scenario(sc: dict[str, Any], server: Server, fibril_bin: Path) -> None:
    name = sc["name"]
    known = KNOWN.get(name)
    try:
        asyncio.run(run_scenario(sc, server, fibril_bin))
    except AssertionError as e:
        if known is not None:
            pytest.xfail(f"known failure ({known}): {e}")
        raise
    if known is not None and not known.startswith("flaky:"):
        pytest.fail(f"{name} is listed in known_failures.json ({known}) but passes: remove the entry")

