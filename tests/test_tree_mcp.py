"""`python -m client mcp` as an agent's MCP client meets it: the official SDK's client over stdio
and over streamable HTTP, driving behaviour trees to done and to failure, the phase machine's
refusals, and a crash of the MCP server and the worker in the middle of an execution."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import ROOT, start_worker, until
from tests.trees import action, composite, tree_file

TOOLS = {
    "say",
    "pending_tool_calls",
    "answer_tool_call",
    "start_execution",
    "resume_execution",
    "reset_execution",
    "next_step",
    "eval",
    "submit",
    "think",
    "var_read",
    "var_write",
    "const_read",
    "get_execution",
    "read_trace",
}


def deploy(folder: Path) -> Path:
    root = composite(
        "sequence",
        "Deploy",
        action(
            "Run_Tests",
            "instruct: Run tests; store coverage at $VAR.coverage.",
            "evaluate: $VAR.coverage > $CONST.threshold",
        ),
        composite("parallel", "Publish", action("Push", "instruct: push"), action("Notify", "instruct: notify")),
    )
    return tree_file(folder, root, var={"coverage": None}, const={"threshold": 80})


class Agent:
    """Calls tools as an agent does and reads their results back."""

    def __init__(self, session: Client, address: str):
        self.session, self.address = session, address

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, {"trace_output": self.address, **args})
        assert not result.is_error, getattr(result.content[0], "text", "")
        assert result.structured_content is not None
        return result.structured_content

    async def refused(self, tool: str, **args: Any) -> str:
        result = await self.session.call_tool(tool, {"trace_output": self.address, **args})
        assert result.is_error
        return getattr(result.content[0], "text", "")

    async def step(self, kind: str, name: str) -> dict[str, Any]:
        step = await self.call("next_step")
        assert (step.get("type"), step.get("name")) == (kind, name), step
        return step


def mcp_env(address: str) -> dict[str, str]:
    return {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}


def stdio_server(address: str, queue: str, root: Path) -> StdioServerParameters:
    """The server as an agent's client starts it, reading trees under `root` (the tests' trees are
    written outside the folder it runs in)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentrun.client", "mcp", "--task-queue", queue, "--root", str(root)],
        env=mcp_env(address),
        cwd=str(ROOT),
    )


async def test_an_agent_drives_trees_to_done_and_to_failure_over_stdio(address, tmp_path):
    tree = deploy(tmp_path)
    async with Client(stdio_server(address, f"mcp-{uuid.uuid4().hex[:6]}", tmp_path)) as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
        agent = Agent(session, f"traces/{uuid.uuid4().hex[:8]}.json")
        started = await agent.call("start_execution", tree_uri=str(tree))
        assert started["ok"] and started["var"] == {"coverage": None} and started["const"] == {"threshold": 80}
        assert "already exists" in await agent.refused("start_execution", tree_uri=str(tree))

        first = await agent.call("next_step")
        assert first["name"] == "Acknowledge_Protocol" and "next_step" in first["instruction"]
        assert await agent.call("next_step") == first  # asked again before an answer: the same step
        assert "not in evaluating phase (current: protocol)" in await agent.refused("eval", result=True)
        assert (await agent.call("submit", status="success"))["status"] == "protocol_accepted"
        assert "not in performing phase (current: idle)" in await agent.refused("submit", status="success")

        work = await agent.step("instruct", "Run_Tests")
        assert "$VAR.coverage" in work["instruction"]
        assert await agent.call("next_step") == work
        assert (await agent.call("var_write", path="coverage", value="92")) == {"path": "coverage", "value": 92}
        assert "read-only" in await agent.refused("var_write", path="threshold", value="1")
        assert (await agent.call("submit", status="running"))["status"] == "running"
        assert await agent.call("next_step") == work  # running: the same step again
        assert (await agent.call("submit", status="success", note="92% covered"))["status"] == "step_complete"
        check = await agent.step("evaluate", "Run_Tests")
        assert check["expression"] == "$VAR.coverage > $CONST.threshold"
        assert await agent.call("const_read", path="threshold") == {"path": "threshold", "value": 80}
        assert await agent.call("var_read") == {"coverage": 92}
        assert (await agent.call("think", thought="92 > 80"))["status"] == "recorded"
        assert (await agent.call("eval", result=True, note="92 > 80"))["status"] == "evaluation_passed"
        await agent.step("instruct", "Push")
        assert (await agent.call("submit", status="success"))["status"] == "action_complete"
        await agent.step("instruct", "Notify")
        await agent.call("submit", status="success")
        assert await agent.call("next_step") == {"status": "done"}

        trace = (await agent.call("get_execution"))["trace"]
        assert [(e["kind"], e["name"], e["submitted"], e["outcome"]) for e in trace] == [
            ("protocol", "Acknowledge_Protocol", "accept", "protocol_accepted"),
            ("instruct", "Run_Tests", "running", "running"),
            ("instruct", "Run_Tests", "success", "step_complete"),
            ("think", "Run_Tests", "92 > 80", "recorded"),
            ("evaluate", "Run_Tests", "true", "evaluation_passed"),
            ("instruct", "Push", "success", "action_complete"),
            ("instruct", "Notify", "success", "action_complete"),
        ]
        assert trace[2]["note"] == "92% covered" and trace[2]["cursor"] == '{"path":[0],"step":0}'
        sliced = await agent.call("read_trace", **{"from": 1, "to": 3})
        assert sliced["total"] == 7 and [e["outcome"] for e in sliced["trace"]] == ["running", "step_complete"]
        # Each entry as abtree documents it: {ts, kind, cursor, name, submitted, outcome, note?}.
        running, done = sliced["trace"]
        assert sorted(running) == ["cursor", "kind", "name", "outcome", "submitted", "ts"]
        assert sorted(done) == ["cursor", "kind", "name", "note", "outcome", "submitted", "ts"]
        assert done == trace[2] and datetime.fromisoformat(done["ts"]) <= datetime.now(UTC)
        assert (await agent.call("resume_execution"))["status"] == "complete"

        failing = Agent(session, f"traces/{uuid.uuid4().hex[:8]}.json")
        await failing.call("start_execution", tree_uri=str(tree))
        await failing.call("next_step")
        await failing.call("submit", status="success")
        await failing.step("instruct", "Run_Tests")
        await failing.call("submit", status="success")
        await failing.step("evaluate", "Run_Tests")
        assert (await failing.call("eval", result=False))["status"] == "evaluation_failed"
        assert await failing.call("next_step") == {"status": "failure"}
        assert (await failing.call("resume_execution"))["status"] == "failed"
        assert "call reset_execution" in await failing.refused("submit", status="success")
        assert await failing.call("reset_execution") == {"status": "reset"}
        fresh = await failing.call("get_execution")
        assert (fresh["status"], fresh["phase"], fresh["trace"], fresh["var"]) == (
            "running",
            "idle",
            [],
            {"coverage": None},
        )
        assert (await failing.call("next_step"))["name"] == "Acknowledge_Protocol"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_server(address: str, port: int, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrun.client", "mcp", "--http", str(port), *args],
        env=mcp_env(address),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc


async def listening(port: int) -> None:
    def up() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    await until(up, timeout_s=60)


async def test_the_mcp_server_and_worker_die_mid_execution_and_resume_continues(address, tmp_path):
    """Over streamable HTTP; the server keeps nothing, so a new one carries on where the agent was."""
    tree = deploy(tmp_path)
    queue, port = f"mcp-{uuid.uuid4().hex[:6]}", free_port()
    worker = start_worker(address, "--task-queue", queue)
    server = http_server(address, port, "--task-queue", queue, "--no-worker", "--root", str(tmp_path))
    address_ = f"traces/{uuid.uuid4().hex[:8]}.json"
    try:
        await listening(port)
        async with Client(f"http://127.0.0.1:{port}/mcp") as session:
            agent = Agent(session, address_)
            await agent.call("start_execution", tree_uri=str(tree))
            await agent.call("next_step")
            await agent.call("submit", status="success")
            await agent.call("var_write", path="coverage", value="95")
            work = await agent.step("instruct", "Run_Tests")
        for proc in (server, worker):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

        worker = start_worker(address, "--task-queue", queue)
        server = http_server(address, port, "--task-queue", queue, "--no-worker", "--root", str(tmp_path))
        await listening(port)
        async with Client(f"http://127.0.0.1:{port}/mcp") as session:
            agent = Agent(session, address_)
            resumed = await agent.call("resume_execution")
            assert (resumed["status"], resumed["phase"], resumed["protocol_accepted"]) == (
                "running",
                "performing",
                True,
            )
            assert await agent.call("next_step") == work
            assert await agent.call("var_read", path="coverage") == {"path": "coverage", "value": 95}
            await agent.call("submit", status="success")
            await agent.step("evaluate", "Run_Tests")
            await agent.call("eval", result=True)
            for name in ("Push", "Notify"):
                await agent.step("instruct", name)
                await agent.call("submit", status="success")
            assert await agent.call("next_step") == {"status": "done"}
    finally:
        for proc in (server, worker):
            proc.kill()
            proc.wait()


@pytest.mark.usefixtures("worker_process")
def test_list_shows_a_driven_execution_and_report_its_trace(cli, address, tmp_path):
    """An execution is a run like any other: listed, reported with its blackboard and trace."""
    import asyncio

    async def drive() -> str:
        async with Client(stdio_server(address, "agentrun", tmp_path)) as session:
            agent = Agent(session, f"traces/{uuid.uuid4().hex[:8]}.json")
            started = await agent.call("start_execution", tree_uri=str(deploy(tmp_path)))
            await agent.call("next_step")
            await agent.call("submit", status="failure", note="not today")
            assert await agent.call("next_step") == {"status": "failure"}
            return started["run_id"]

    run_id = asyncio.run(drive())
    assert run_id in cli("list").out
    report = cli("report", run_id)
    assert "Acknowledge_Protocol" in report.out and "not today" in report.out, report.out
    assert json.loads(cli("status", run_id, "--json").out)["constants"] == {"threshold": 80}
