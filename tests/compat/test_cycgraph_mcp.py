"""cycgraph side by side with an MCP tool: one graph whose agent calls a tool of an MCP server and
saves two memory keys with save_to_memory, run by the real @cycgraph/orchestrator (its own MCP
connection manager) and by agentrun, each against the same MCP server program (tests/fakes/
mcp_server.py, its calls counted in a file of each side's own) and a fake model scripted alike.

Compared: the calls the MCP server received, the tool results the model read back, the final
status and memory. Kept apart on purpose: the name a model calls the tool by (cycgraph offers an
MCP tool by its own name, `count`; agentrun as the Agentfile's real system does, `mcp_fake_count`,
so two servers' tools never collide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from agentrun.lang import params
from agentrun.lang.load import load
from agentrun.lang.mcp_servers import McpServer
from agentrun.models.contract import RunInput
from tests.compat.test_cycgraph_diff import HARNESS, cycgraph_package  # noqa: F401 - the fixture
from tests.conftest import TEST_QUEUE, run_id
from tests.fakes.openai_server import FakeOpenAI, ToolUse
from tests.runs import finish

SERVER = Path(__file__).resolve().parent.parent / "fakes" / "mcp_server.py"

GRAPH = {
    "name": "mcp_tally",
    "description": "Count a topic with an MCP tool and keep two keys",
    "inputs": {"topic": {"schema": {"type": "string"}, "required": True}},
    "nodes": [
        {
            "id": "tally",
            "type": "agent",
            "agent_id": "counter",
            "read_keys": ["topic"],
            "write_keys": ["count", "summary"],
            "tools": [
                {"type": "mcp", "server_id": "fake", "tool_names": ["count"]},
                {"type": "builtin", "name": "save_to_memory"},
            ],
        }
    ],
    "edges": [],
    "start_node": "tally",
    "end_nodes": ["tally"],
}


def script(count_tool: str) -> list:
    return [
        ToolUse(count_tool, {"note": "TOPIC-TIDES"}),
        ToolUse("save_to_memory", {"key": "count", "value": "COUNT-1"}),
        ToolUse("save_to_memory", {"key": "summary", "value": "SUMMARY-1"}),
        "TALLY-DONE",
    ]


def tool_answers(fake: FakeOpenAI) -> list[str]:
    last = fake.requests[-1].body["messages"]
    return [m["content"] for m in last if m["role"] == "tool"]


def calls_received(path: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in path.read_text().splitlines()] if path.exists() else []


def python_first(folder: Path) -> dict[str, str]:
    """An environment whose `python` is this suite's interpreter: cycgraph accepts only a few command
    names, and the suite may run as `.venv/bin/python -m pytest` with no venv on PATH."""
    shims = folder / "bin"
    shims.mkdir(exist_ok=True)
    shim = shims / "python"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"}


def theirs(package: Path, folder: Path) -> tuple[dict, list[str], list[str]]:
    counted = folder / "theirs.txt"
    with FakeOpenAI(by_model={"counter": script("count")}, api_key="sk-compat") as fake:
        case = {
            "name": "mcp_tally",
            "graph": GRAPH,
            "agents": [{"id": "counter", "model": "counter"}],
            "base_url": fake.url,
            "goal": GRAPH["description"],
            "memory": {"topic": "TOPIC-TIDES"},
            "mcp_servers": [
                {
                    "id": "fake",
                    "name": "fake",
                    "transport": {
                        "type": "stdio",
                        "command": "python",
                        "args": [str(SERVER), "--handshake-only"],
                        "env": {"FAKE_MCP_COUNT_FILE": str(counted)},
                    },
                }
            ],
        }
        given = json.dumps({"package": str(package), "cases": [case]})
        proc = subprocess.run(
            ["node", str(HARNESS)], input=given, capture_output=True, text=True, timeout=300, env=python_first(folder)
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = next(json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT "))
        assert result["error"] is None, result["error"]
        return result, calls_received(counted), tool_answers(fake)


async def ours(client, folder: Path, monkeypatch) -> tuple[dict, list[str], list[str]]:
    counted = folder / "ours.txt"
    spec = folder / "mcp_tally.yaml"
    spec.write_text(yaml.safe_dump(GRAPH, sort_keys=False))
    server = McpServer(
        id="fake",
        command=sys.executable,
        args=[str(SERVER), "--handshake-only"],
        env={"FAKE_MCP_COUNT_FILE": str(counted)},
        allow_write=[str(folder)],  # the count file, outside the server's cwd
    )
    with FakeOpenAI(by_model={"counter": script("mcp_fake_count")}, api_key="sk-test") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        plan = load(str(spec), given_params={"topic"})
        inp = RunInput(
            plan=plan,
            params=params.bind(plan, {"topic": "TOPIC-TIDES"}),
            workdir=str(folder),
            default_agent="openai:counter",
            mcp_servers={"fake": server},
        )
        handle = await client.start_workflow("AgentRun", inp, id=run_id("mcp-compat"), task_queue=TEST_QUEUE)
        state = await finish(client, handle)
        answers = tool_answers(fake)
    return {"status": state.status, "memory": state.memory}, calls_received(counted), answers


async def test_an_agent_with_an_mcp_tool_and_save_to_memory_side_by_side(
    client, worker, request, tmp_path, monkeypatch
):
    their_run, their_calls, their_answers = theirs(request.getfixturevalue("cycgraph_package"), tmp_path)
    our_run, our_calls, our_answers = await ours(client, tmp_path, monkeypatch)

    assert their_calls == our_calls == ["TOPIC-TIDES"]  # the server ran the tool once, with the same arguments
    assert their_run["status"] == our_run["status"] == "completed"
    for key, value in {"count": "COUNT-1", "summary": "SUMMARY-1", "topic": "TOPIC-TIDES"}.items():
        assert their_run["memory"].get(key) == our_run["memory"].get(key) == value, key
    # The model read the tool's answer, then each save acknowledged, on both sides.
    assert len(their_answers) == len(our_answers) == 3
    assert "1" in their_answers[0] and our_answers[0] == "1"
