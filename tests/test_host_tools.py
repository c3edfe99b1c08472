"""Host tools: a program's own functions offered to agents by name, as cycgraph's portable bundles
name them (`{type: custom, name: fetch_market_data}`) and leave the host to bind. The bundle runs
with the tool bound by a function of this test's worker, a scripted model calling it; unbound,
`start` refuses before the run; a run whose tool no worker has waits, pending, saying which."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from agentrun.client.engine import Engine
from agentrun.client.run import Run
from agentrun.client.runs import fetch_state
from agentrun.worker.host_tools import serving_tools
from tests.conftest import ROOT, TEST_QUEUE, sigkill, until, write_spec
from tests.fakes.openai_server import FakeOpenAI, ToolUse
from tests.runs import finish, run_spec, start_spec
from tests.test_tool_ask import gate_open
from tests.test_tool_loop import offered, tool_result

pytestmark = pytest.mark.usefixtures("worker")

BUNDLE = Path(__file__).parent / "data" / "market-analysis.bundle.json"
SECTOR = {"sector": "storage"}
CALLS: list[tuple[str, int, str]] = []  # what the function was called with, and the call's key


def fetch_market_data(sector: str, year: int, idempotency_key: str = "") -> dict:
    """Look up recent market figures for one sector from the warehouse."""
    CALLS.append((sector, year, idempotency_key))
    return {"sector": sector, "year": year, "shipments_gwh": 412, "avg_price_usd_per_kwh": 108}


def copy_bundle(tmp_path: Path) -> Path:
    spec = tmp_path / BUNDLE.name
    spec.write_text(BUNDLE.read_text())
    return spec


PIPELINE = """
workflow:
  name: figures
  agents:
    analyst:
      prompt: "Review the storage sector."
      tools: [Read, "host:fetch_market_data"]
  steps:
    - id: review
      agent: analyst
"""


@pytest.mark.parametrize("language", ["cycgraph", "pipeline"])
def test_start_refuses_a_spec_whose_host_tool_is_bound_nowhere(cli, llm, tmp_path, language):
    # Before any test here serves the tool: its queue has had no poller this session.
    spec = copy_bundle(tmp_path) if language == "cycgraph" else write_spec(tmp_path, PIPELINE)
    said = cli("validate", str(spec))
    assert said.code == 0 and "warning: host tool 'fetch_market_data' must be bound by the host" in said.out + said.err

    result = cli("start", str(spec), "-p", "sector=grid storage", "--agent", "openai:analyst")

    assert result.code == 2, result
    assert "the spec needs host tools that no worker has: fetch_market_data" in result.err
    assert "engine.worker(tools=[" in result.err and "host_tools: in agentrun.yaml" in result.err
    assert "run_id" not in result.out  # nothing started


async def test_the_bundle_runs_with_its_tool_bound_by_a_function_of_the_worker(
    client: Client, llm: FakeOpenAI, tmp_path
):
    CALLS.clear()
    llm.reply = [
        ToolUse("fetch_market_data", {"sector": "grid storage", "year": "2026"}),  # "2026": pydantic's lax int
        ToolUse("fetch_market_data", {"sector": "grid storage"}),
        "Demand is up; prices fell to 108 USD/kWh; the risk is supply.",
    ]
    async with serving_tools(client, [fetch_market_data]):
        handle = await start_spec(client, copy_bundle(tmp_path), "openai:analyst", params={"sector": "grid storage"})
        state = await finish(client, handle)

    assert state.status == "completed", state.errors
    assert state.memory["analysis"].startswith("Demand is up")
    # The model was offered the function, by its name, with the schema its signature makes.
    tool = next(t["function"] for t in llm.requests[0].body["tools"])
    assert tool["name"] == "fetch_market_data"
    assert tool["description"] == "Look up recent market figures for one sector from the warehouse."
    assert tool["parameters"]["required"] == ["sector", "year"]
    assert "idempotency_key" not in tool["parameters"]["properties"]
    # It read the function's answer, then the validation error of a call that left out `year`.
    assert json.loads(tool_result(llm.requests[1].body["messages"]) or "")["shipments_gwh"] == 412
    assert tool_result(llm.requests[2].body["messages"]) == "error: missing argument 'year'"
    ((sector, year, key),) = CALLS  # the second call never reached the function
    assert (sector, year) == ("grid storage", 2026) and key.endswith("/tool-1")
    assert [(u.tool, u.source, u.outcome) for u in state.tool_calls["analyze"]] == [
        ("fetch_market_data", "host", "ok"),
        ("fetch_market_data", "host", "error"),
    ]


async def test_a_run_waits_for_a_worker_that_has_its_tool(client: Client, llm: FakeOpenAI, tmp_path):
    CALLS.clear()
    llm.reply = [ToolUse("fetch_market_data", {"sector": "storage", "year": 2025}), "done"]
    handle = await start_spec(client, copy_bundle(tmp_path), "openai:analyst", params={"sector": "storage"})
    # The test's worker has no such tool: the run waits on the tool's queue, which it names.
    pending = []
    for _ in range(100):
        pending = (await handle.describe()).raw_description.pending_activities
        if pending:
            break
        await asyncio.sleep(0.1)
    (waiting,) = pending
    assert waiting.activity_id == "waiting for a worker that has host tool fetch_market_data"
    assert waiting.activity_type.name == "describe_host_tool"
    state = await fetch_state(client, handle.id)
    for _ in range(100):  # after a few seconds the run's state says it too (`status` shows it)
        state = await fetch_state(client, handle.id)
        if state.warnings:
            break
        await asyncio.sleep(0.1)
    assert "analyze: waiting for a worker that has host tool fetch_market_data" in state.warnings[0]
    assert llm.requests == [] and CALLS == []
    async with serving_tools(client, [fetch_market_data]):
        state = await finish(client, handle)

    assert state.status == "completed", state.errors
    assert CALLS[0][:2] == ("storage", 2025)
    assert offered(llm.requests[0].body) == ["fetch_market_data"]


def with_policy(tmp_path: Path, policy: str) -> Path:
    """The bundle with a policy.toml beside it, named at its top."""
    (tmp_path / "policy.toml").write_text(policy)
    bundle = json.loads(BUNDLE.read_text()) | {"policy": "policy.toml"}
    spec = tmp_path / BUNDLE.name
    spec.write_text(json.dumps(bundle))
    return spec


async def test_the_policy_denies_a_host_tool_and_asks_a_person_about_one(client: Client, llm: FakeOpenAI, tmp_path):
    CALLS.clear()
    call = ToolUse("fetch_market_data", {"sector": "storage", "year": 2025})
    llm.reply = lambda messages: "done" if messages[-1]["role"] == "tool" else call
    async with serving_tools(client, [fetch_market_data]):
        denied = await run_spec(
            client, with_policy(tmp_path, "[fetch_market_data]\nenabled = false\n"), "openai:analyst", params=SECTOR
        )
        assert denied.status == "completed", denied.errors
        assert tool_result(llm.requests[1].body["messages"]) == (
            "refused: tool fetch_market_data is disabled by the policy"
        )
        assert CALLS == []  # never called

        handle = await start_spec(
            client, with_policy(tmp_path, "[fetch_market_data]\nask = true\n"), "openai:analyst", params=SECTOR
        )
        gate = await gate_open(client, handle.id, '"sector": "storage"')
        assert gate.call is not None and (gate.call.tool, gate.call.source) == ("fetch_market_data", "host")
        assert CALLS == []  # asked before it ran
        await Run(client, handle.id).approve(gate.id, digest=gate.call.digest)
        asked = await finish(client, handle)
    assert asked.status == "completed", asked.errors
    assert [c[:2] for c in CALLS] == [("storage", 2025)]  # approved: run once


FIGURES = """import json, sys
asked = json.load(sys.stdin)
open("calls.log", "a").write(f"{asked['sector']} {asked['year']}\\n")
print(json.dumps({"sector": asked["sector"], "shipments_gwh": 412, "source": "command"}))
"""
SCHEMA = {
    "type": "object",
    "properties": {"sector": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["sector", "year"],
}


def bind_in_agentrun_yaml(folder: Path, kind: str) -> Path:
    """agentrun.yaml beside the bundle binding fetch_market_data; the file each call adds a line to."""
    log = folder / "calls.log"
    if kind == "mcp":
        server = {
            "command": sys.executable,
            "args": ["-m", "tests.fakes.mcp_server"],
            "cwd": str(ROOT),
            "env": {"PYTHONPATH": str(ROOT), "FAKE_MCP_COUNT_FILE": str(log)},
            "allow_write": [str(folder)],
        }
        config = {
            "mcp_servers": {"market": server},
            "host_tools": {"fetch_market_data": {"mcp": "market:market_figures"}},
        }
    else:
        (folder / "figures.py").write_text(FIGURES)
        binding = {"command": "python3 figures.py", "description": "Figures for a sector.", "input_schema": SCHEMA}
        config = {"host_tools": {"fetch_market_data": binding}}
    (folder / "agentrun.yaml").write_text(json.dumps(config))
    return log


@pytest.mark.parametrize("kind", ["mcp", "command"])
async def test_agentrun_yaml_binds_the_tool_to_an_mcp_tool_or_a_command(
    client: Client, llm: FakeOpenAI, tmp_path, kind
):
    log = bind_in_agentrun_yaml(tmp_path, kind)
    call = ToolUse("fetch_market_data", {"sector": "storage", "year": 2025})
    llm.reply = lambda messages: "done" if messages[-1]["role"] == "tool" else call
    engine = Engine(client, TEST_QUEUE)
    run = await engine.start(copy_bundle(tmp_path), params=SECTOR, agents="openai:analyst")
    state = await finish(client, client.get_workflow_handle(run.id))

    assert state.status == "completed", state.errors
    assert offered(llm.requests[0].body) == ["fetch_market_data"]
    answer = tool_result(llm.requests[1].body["messages"]) or ""
    assert json.loads(answer)["source"] == kind and json.loads(answer)["shipments_gwh"] == 412
    assert log.read_text() == "storage 2025\n"  # called once


def start_tool_worker(address: str, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.host_tool_worker", address, str(log)], cwd=ROOT, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and b"worker polling" in proc.stdout.readline(), "the tool worker did not start"
    return proc


async def test_a_tool_worker_killed_mid_call_runs_that_call_again_and_no_completed_one(
    client: Client, llm: FakeOpenAI, address, tmp_path
):
    log = tmp_path / "calls.log"
    calls = [ToolUse("fetch_market_data", {"sector": s, "year": 2025}) for s in ("storage", "slow")]
    llm.reply = lambda messages: [*calls, "done"][sum(m["role"] == "tool" for m in messages)]
    first = start_tool_worker(address, log)
    try:
        handle = await start_spec(client, copy_bundle(tmp_path), "openai:analyst", params=SECTOR)
        await until(lambda: log.exists() and "start slow" in log.read_text())
    finally:
        sigkill(first)
    (tmp_path / "go").touch()
    second = start_tool_worker(address, log)
    try:
        state = await finish(client, handle)
    finally:
        second.terminate()
        second.wait(timeout=30)

    assert state.status == "completed", state.errors
    # The completed call is in history: not run again; the one cut short ran again, once, to its end.
    assert log.read_text().splitlines() == ["start storage", "end storage", "start slow", "start slow", "end slow"]
    said = tool_result(llm.requests[2].body["messages"]) or ""
    assert said.startswith("[ran again after the worker running it stopped")
    assert [u.attempts for u in state.tool_calls["analyze"]] == [1, 2]


async def test_the_example_program_serves_its_function_to_the_bundle(client: Client, llm: FakeOpenAI, tmp_path):
    loaded = importlib.util.spec_from_file_location("host_tools_example", ROOT / "examples/python/host_tools.py")
    assert loaded is not None and loaded.loader is not None
    example = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(example)
    call = ToolUse("fetch_market_data", {"sector": "grid storage", "year": 2026})
    llm.reply = lambda messages: "Demand is up 31%." if messages[-1]["role"] == "tool" else call

    engine = Engine(client, "host-tools-example")  # a queue of its own: no other worker takes the run
    analysis = await example.analyse(engine, str(copy_bundle(tmp_path)), "grid storage", "openai:analyst")

    assert analysis == "Demand is up 31%."
    figures = json.loads(tool_result(llm.requests[1].body["messages"]) or "")
    assert figures["shipments_gwh"] == 412 and figures["key"]  # the call's idempotency key reached it
