"""The commands people type all day answer at once: `--help`, `validate`, `inspect` and `dry-run` load
nothing of Temporal (its package alone costs 0.1 s), OpenTelemetry's SDK or the MCP SDK, nor the run
contract (0.15 s of pydantic models); those that read runs load no worker (bench/overhead.py prints
how long each command takes)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = (
    "temporalio",
    "temporalio.client",
    "temporalio.worker",
    "opentelemetry.sdk",
    "mcp",
    "agentrun.models.contract",
    "starlette",
    "uvicorn",
)
COMMANDS = [
    ["--help"],
    ["ui", "--help"],
    ["validate", "examples/quickstart.yaml"],
    ["inspect", "examples/graphs/fan_out.yaml"],
    ["dry-run", "examples/quickstart.yaml"],
    ["dry-run", "examples/trees/ship.yaml"],
    ["dry-run", "examples/agentfile/Agentfile", "-p", "change=a typo fix"],
]


MARK = "-- modules --"
# `python -m client ARGS`, writing the names in sys.modules as it leaves, by SystemExit or by the
# CLI's os._exit: `-X importtime` misses a module imported with importlib (as the language
# registry loads a compiler).
PROBE = f"""
import os, runpy, sys
def modules():
    sys.stderr.write("\\n{MARK}\\n" + "\\n".join(sys.modules))
    sys.stderr.flush()
leave = os._exit
os._exit = lambda code: (modules(), leave(code))
try:
    runpy.run_module("client", run_name="__main__", alter_sys=True)
finally:
    modules()
"""


def imported(*args: str, env: dict[str, str] | None = None, code: int = 0) -> set[str]:
    """The modules `python -m client ARGS` had imported when it exited."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == code, done.stderr[-2000:]
    return set(done.stderr.rsplit(MARK, 1)[1].split())


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_an_everyday_command_loads_no_temporal_telemetry_mcp_or_run_contract(args):
    assert sorted(imported(*args) & set(HEAVY)) == []


WORKER = ("temporalio.worker", "agentrun.worker.build", "agentrun.workflows.agent_run", "agentrun.activities.agent")


@pytest.mark.parametrize("args", [["list"], ["status", "some-run"], ["pending"]], ids=" ".join)
def test_a_command_that_reads_runs_loads_the_client_and_no_worker(args):
    """What the test above looks for is there when it should be: against an address nothing listens
    on, the command loads Temporal's client, then says it cannot connect. A worker (the workflows,
    the activities: a quarter of a second) is not loaded to read a run."""
    found = imported(*args, env={"TEMPORAL_ADDRESS": "127.0.0.1:1"}, code=3)
    assert "temporalio.client" in found and sorted(found & set(WORKER)) == []


def test_validate_loads_only_the_compiler_of_the_files_language():
    """Every language is asked whether the file is its own; only the one that claims it compiles."""
    loaded = imported("validate", "examples/quickstart.yaml")
    compilers = {name for name in loaded if name.startswith("agentrun.") and name.endswith(".compiler")}
    assert compilers == {"agentrun.lang.dialects.task_tree.compiler"}
