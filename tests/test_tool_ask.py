"""The policy's `ask`: a tool call waits for a person before it runs, and runs exactly once if they
approve it. Counted by the call's side effect: deploy.sh appends a line to runs.log each time it
runs. Models are the fake OpenAI server; tools run for real in a work directory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from agentrun.client.run import Run
from agentrun.client.runs import fetch_state
from agentrun.errors import Refused
from agentrun.models.contract import Gate, RunState, open_gates
from agentrun.models.tool_policy import parse
from agentrun.policy import Asked, decide
from tests.conftest import run_id, sigkill, start_worker, wait_for, watched_by_a_new_worker, write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages, Reply, ToolUse
from tests.runs import finish, start_spec

POLICY = """
[bash]
ask = ["git push*", "./deploy.sh *"]

[write]
ask = ["migrations/**"]

[web_fetch]
ask = true

[mcp]
ask_tools = ["github:create_pull_request"]
"""
SPEC = """
workflow:
  name: deployer
  policy: tools-policy.toml
  agents:
    deployer:
      prompt: "Deploy to prod, then to staging."
      tools: [Bash, Write]
  steps:
    - id: deploy
      agent: deployer
"""
DEPLOY = '#!/bin/sh\necho "$1 $AGENTRUN_IDEMPOTENCY_KEY" >> runs.log\necho "deployed $1"\n'
SAID = "Deploying to prod now."


@pytest.mark.parametrize(
    ("tool", "arguments", "verdict"),
    [
        ("bash", {"command": "./deploy.sh prod"}, "ask"),
        ("bash", {"command": "ls && git push origin main"}, "ask"),  # any command of the line
        ("bash", {"command": "cd . ; env STAGE=1 ./deploy.sh prod"}, "ask"),
        ("bash", {"command": "./deploy.sh.bak"}, "allow"),
        ("bash", {"command": "sudo ./deploy.sh prod"}, "refuse"),  # a refusal is never a question
        ("write", {"path": "migrations/0001_users.sql"}, "ask"),
        ("write", {"path": "src/app.py"}, "allow"),
        ("web_fetch", {"url": "https://example.com/"}, "ask"),
    ],
)
def test_ask_is_a_verdict_of_the_policy(tool, arguments, verdict):
    policy = parse(POLICY)
    assert decide(policy, Asked("builtin", tool, arguments, workdir="/w")).verdict == verdict
    assert decide(policy, Asked("mcp", "github:create_pull_request")).verdict == "ask"
    assert decide(policy, Asked("mcp", "github:list_issues")).verdict == "allow"


def deployer(messages: Messages) -> Reply:
    """prod (with words before the call), then staging, then it says what it read last."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return ToolUse("bash", {"command": "./deploy.sh prod"}, text=SAID)
    if len(results) == 1:
        return ToolUse("bash", {"command": "./deploy.sh staging"})
    return "done: " + results[-1]


def prod_only(messages: Messages) -> Reply:
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return "done: " + results[-1] if results else ToolUse("bash", {"command": "./deploy.sh prod"}, text=SAID)


def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools-policy.toml").write_text(POLICY)
    work = tmp_path / "work"
    work.mkdir()
    (work / "deploy.sh").write_text(DEPLOY)
    (work / "deploy.sh").chmod(0o755)
    return work


async def gate_open(client, rid: str, tool_args: str) -> Gate:
    """The open gate of a tool call whose arguments hold `tool_args`, once it opens."""
    found: list[Gate] = []

    async def look() -> bool:
        state = await fetch_state(client, rid)
        found[:] = [g for g in open_gates(state) if g.call is not None and tool_args in g.call.arguments]
        return bool(found)

    for _ in range(600):
        if await look():
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no gate opened for {tool_args}")


@pytest.mark.usefixtures("worker")
async def test_approved_runs_once_rejected_never_and_ten_approvals_have_one_winner(client, llm: FakeOpenAI, tmp_path):
    work = workdir(tmp_path)
    llm.reply = deployer
    handle = await start_spec(client, write_spec(tmp_path, SPEC), "openai:deployer", workdir=work)
    run = Run(client, handle.id)

    prod = await gate_open(client, handle.id, "deploy.sh prod")
    assert prod.call is not None and not (work / "runs.log").exists()  # asked before it ran
    assert (prod.call.tool, prod.call.step, prod.call.words) == ("bash", "deploy", SAID)
    assert json.loads(prod.call.arguments) == {"command": "./deploy.sh prod"}
    assert prod.choices == ["approve", "reject", "approve-pattern"]
    # Temporal Web shows what the run waits for: the gate and the tool call.
    shown = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert shown.current_details.startswith('Waiting for a person: **deploy.bash** — deploy: run bash {"command": ')

    # Ten people approve at once: one answer is taken, nine are refused as already answered.
    tried = await asyncio.gather(
        *(run.approve(prod.id, by=f"p{n}", digest=prod.call.digest) for n in range(10)), return_exceptions=True
    )
    taken = [t for t in tried if not isinstance(t, BaseException)]
    refused = [str(t) for t in tried if isinstance(t, Refused)]
    assert len(taken) == 1 and len(refused) == 9, tried
    assert all("was already answered (approve)" in r for r in refused)

    # A changed argument is a new question: another gate, another digest; prod's approval is not its.
    staging = await gate_open(client, handle.id, "deploy.sh staging")
    assert staging.call is not None and staging.id != prod.id and staging.call.digest != prod.call.digest
    with pytest.raises(Refused, match="other arguments than the ones approved"):
        await run.approve(staging.id, digest=prod.call.digest)
    after = llm.hold_prompt("staging is frozen")  # the run stays up for the late answer
    await run.reject(staging.id, comment="not today: staging is frozen", by="ops")
    with pytest.raises(Refused, match="already answered"):
        await run.approve(staging.id)  # late
    after.set()

    state: RunState = await finish(client, handle)
    assert state.status == "completed", state.errors
    lines = (work / "runs.log").read_text().splitlines()
    assert lines == [f"prod {handle.id}/deploy/tool-1"]  # once, under the call's idempotency key
    told = llm.requests[-1].body["messages"][-1]["content"]
    assert "rejected this call by ops" in told and "not today: staging is frozen" in told
    assert [u.outcome for u in state.tool_calls["deploy"]] == ["ok", "refused"]


def test_a_worker_killed_after_the_approval_runs_the_call_once(cli, address, tmp_path):
    work = workdir(tmp_path)
    spec = write_spec(tmp_path, SPEC)
    queue, rid = "tool-ask-crash", run_id("ask-crash")
    with FakeOpenAI(prod_only, api_key="sk-test") as llm:
        env = {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-test"}
        after_prod = llm.hold_prompt("deployed prod")  # the model's turn after the call waits for a kill
        first = start_worker(address, "--task-queue", queue, env=env)
        try:
            started = cli(
                "start", str(spec), "--agent", "openai:deployer", "--id", rid, "--task-queue", queue,
                "--workdir", str(work), "--detach",
            )  # fmt: skip
            assert started.code == 0, started.err
            wait_for(lambda: "deploy.bash" in cli("pending").out)
        finally:
            sigkill(first)
        # The approval reaches the run's history while no worker holds it: the call is not made yet.
        queued = cli("approve", rid, "--gate", "deploy.bash", "--no-wait")
        assert queued.code == 0, queued.err
        assert not (work / "runs.log").exists()
        second = start_worker(address, "--task-queue", queue, env=env)
        try:
            wait_for(lambda: llm.in_flight("deployer") == 1)  # the call ran; killed before the next turn
        finally:
            sigkill(second)
        after_prod.set()
        watched = watched_by_a_new_worker(cli, address, rid, "--task-queue", queue, env=env)

    assert watched.code == 0, watched.out + watched.err
    assert (work / "runs.log").read_text().splitlines() == [f"prod {rid}/deploy/tool-1"]


def twice(messages: Messages) -> Reply:
    """Two deploys the same ask pattern takes, then what it read last."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if len(results) < 2:
        return ToolUse("bash", {"command": f"./deploy.sh {'ab'[len(results)]}"})
    return "done: " + results[-1]


@pytest.mark.usefixtures("worker")
async def test_a_pattern_approved_for_the_run_asks_no_more_and_a_timeout_rejects(client, llm: FakeOpenAI, tmp_path):
    work = workdir(tmp_path)
    llm.reply = twice
    handle = await start_spec(client, write_spec(tmp_path, SPEC), "openai:deployer", workdir=work)
    first = await gate_open(client, handle.id, "deploy.sh a")
    await Run(client, handle.id).approve(first.id, pattern=True)
    state = await finish(client, handle)
    assert state.status == "completed", state.errors
    assert [line.split()[0] for line in (work / "runs.log").read_text().splitlines()] == ["a", "b"]
    assert len(state.gates) == 1 and state.approved_patterns == ["bash ./deploy.sh *"]

    # No one answers within ask_timeout: the call is rejected, not run, and the model is told.
    (tmp_path / "tools-policy.toml").write_text(POLICY.replace("[bash]", "ask_timeout = 1\n\n[bash]"))
    (work / "runs.log").unlink()
    llm.reply = prod_only
    state = await finish(client, await start_spec(client, write_spec(tmp_path, SPEC), "openai:deployer", workdir=work))
    assert state.status == "completed", state.errors
    assert not (work / "runs.log").exists()
    assert "no one approved this call within 1s: it was not run" in llm.requests[-1].body["messages"][-1]["content"]
    (gate,) = state.gates.values()
    assert gate.status == "timed_out" and gate.answer is not None and gate.answer.value == "reject"


@pytest.mark.usefixtures("worker")
async def test_over_mcp_a_person_sees_the_call_and_rejects_it_for_the_other_arguments_only(
    client, llm: FakeOpenAI, address, tmp_path
):
    from mcp import Client as McpClient

    from tests.test_tree_mcp import stdio_server

    work = workdir(tmp_path)
    llm.reply = prod_only
    handle = await start_spec(client, write_spec(tmp_path, SPEC), "openai:deployer", workdir=work)
    gate = await gate_open(client, handle.id, "deploy.sh prod")
    async with McpClient(stdio_server(address, "unused", tmp_path)) as session:
        listed = await session.call_tool("pending_tool_calls", {})
        calls = json.loads(listed.content[0].text)["calls"]  # type: ignore[union-attr]
        shown = [q for q in calls if q["run_id"] == handle.id]
        assert [(q["gate"], q["call"]["tool"], q["call"]["arguments"]) for q in shown] == [
            ("deploy.bash", "bash", '{"command": "./deploy.sh prod"}')
        ]
        answer = {"run_id": handle.id, "gate": gate.id, "answer": "reject", "comment": "use the pipeline", "by": "ops"}
        wrong = await session.call_tool("answer_tool_call", {**answer, "digest": "0" * 64})
        assert wrong.is_error and "other arguments than the ones approved" in str(wrong.content)
        taken = await session.call_tool("answer_tool_call", {**answer, "digest": shown[0]["call"]["digest"]})
        assert not taken.is_error, taken.content
    state = await finish(client, handle)
    assert state.status == "completed" and not (work / "runs.log").exists()
    told = llm.requests[-1].body["messages"][-1]["content"]
    assert "rejected this call by ops via MCP" in told and "use the pipeline" in told
