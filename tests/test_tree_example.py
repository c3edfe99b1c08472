"""The README's behaviour-tree examples, offline, as a user runs them: the engine walks
examples/trees/ship.yaml asking the local tree agent, and the example MCP client drives it itself
through `python -m client mcp`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SHIP = "examples/trees/ship.yaml"


@pytest.mark.usefixtures("worker_process")
def test_the_engine_walks_ship_yaml_with_the_local_tree_agent(cli):
    result = cli("start", SHIP, "--agent", f"command:{sys.executable} ../agents/tree_agent.py")
    assert result.code == 0, result.err + result.out
    assert "- Status: COMPLETE" in result.out
    assert "| $VAR | coverage | 92 |" in result.out
    assert "| 3 | " in result.out and "| evaluate | Reuse_Cached_Build | false | evaluation_failed |" in result.out
    # The summary's counts add up to its total: the steps not taken and those not run are counted too.
    counts = dict(line[2:].split(": ", 1) for line in result.out.splitlines() if line.startswith("- Steps "))
    total = int(next(line.split(": ")[1] for line in result.out.splitlines() if line.startswith("- Total steps: ")))
    assert sum(int(n) for n in counts.values()) == total, result.out


def test_the_example_mcp_client_drives_ship_yaml_itself(address):
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "examples/agents/mcp_driver.py", SHIP],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("execution traces/ship-") and lines[0].endswith(": started")
    assert [line.split(":")[0].split() for line in lines[1:-1]] == [
        ["instruct", "Run_Tests"],
        ["evaluate", "Run_Tests"],
        ["evaluate", "Reuse_Cached_Build"],
        ["instruct", "Fresh_Build"],
        ["instruct", "Checksum"],
        ["instruct", "Announce"],
    ]
    assert lines[-1] == "tree done"
