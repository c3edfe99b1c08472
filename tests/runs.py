"""Running specs and plans through the real AgentRun workflow from a test, and talking to a run
as people do (gates, answers). Shared by the engine, human-in-the-loop, timeout and replay tests.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from agentrun.client.runs import fetch_state
from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.lang import params as spec_params
from agentrun.lang.load import load
from agentrun.models import contract
from agentrun.models.contract import Answer, RunInput, RunState
from tests.conftest import ROOT, TEST_QUEUE, run_id

SHELL_BRAIN = [sys.executable, str(ROOT / "examples" / "agents" / "shell_agent.py")]


def sh(line: str) -> str:
    """A task instruction the shell agent carries out, as a YAML (JSON) string."""
    return json.dumps(f"Step.\n```sh\n{line}\n```")


async def run_spec(
    client: Client,
    spec: Path,
    agent: str,
    *,
    params: dict[str, Any] | None = None,
    workdir: Path | None = None,
    **options: Any,
) -> RunState:
    return await finish(client, await start_spec(client, spec, agent, params=params, workdir=workdir, **options))


async def start_spec(
    client: Client,
    spec: Path,
    agent: str,
    *,
    params: dict[str, Any] | None = None,
    workdir: Path | None = None,
    **options: Any,
) -> WorkflowHandle:
    """Start a run of the spec file on the in-process worker; its handle, the run going on."""
    plan = load(str(spec), given_params=(params or {}).keys())
    inp = RunInput(
        plan=plan,
        params=spec_params.bind(plan, params or {}),
        workdir=str(workdir or spec.parent),
        default_agent=agent,
        heartbeat_s=5,
        **options,
    )
    return await client.start_workflow("AgentRun", inp, id=run_id(plan.name), task_queue=TEST_QUEUE)


async def finish(client: Client, handle: WorkflowHandle) -> RunState:
    """Wait for the run to end, failed or not; its final state."""
    try:
        await handle.result()
    except WorkflowFailureError:
        pass
    return await fetch_state(client, handle.id)


# Plans built as IR, so a test pins the engine's behaviour whatever language a spec was written in.


def task(tid: str, prompt: str, agent: str | None = None, **extra: Any) -> ir.Task:
    return ir.Task(id=tid, agent=agent or tid, prompt=prompt, protocol="plain", step=True, **extra)


def approval(gid: str, **extra: Any) -> ir.Human:
    return ir.Human(id=gid, prompt=f"Approve {gid}?", approval=True, choices=[ir.APPROVE, ir.REJECT], **extra)


def plan(*steps: ir.Node, **extra: Any) -> ir.Plan:
    return ir.Plan(
        name="h",
        dialect="pipeline",
        source="h.yaml",
        spec_dir=".",
        lifecycle="refresh",
        root=ir.Sequence(id="workflow:h", children=list(steps)),
        **extra,
    )


async def state_of(handle: WorkflowHandle) -> RunState:
    return await handle.query("state", result_type=RunState)


async def prompts_out(handle: WorkflowHandle, count: int) -> None:
    """Wait until the workflow (a run, or a batch that may not have started yet) has sent `count` prompts."""
    for _ in range(300):
        try:
            if (await state_of(handle)).iteration_count == count:
                return
        except RPCError:
            pass  # not started yet
        await asyncio.sleep(0.05)
    raise AssertionError(f"{handle.id} never had {count} prompt(s) out")


async def open_gate(handle: WorkflowHandle, gate: str) -> RunState:
    """Wait until the run waits on `gate`; its state then."""
    state = await state_of(handle)
    for _ in range(300):
        if gate in state.gates and state.gates[gate].status == "open":
            return state
        await asyncio.sleep(0.05)
        state = await state_of(handle)
    raise AssertionError(f"gate {gate} never opened; gates: {list(state.gates)}")


async def answer(handle: WorkflowHandle, gate: str, value: str, comment: str = "") -> Answer:
    return await handle.execute_update(
        contract.ANSWER,
        contract.AnswerInput(gate=GateId(gate), value=value, comment=comment, by="ana"),
        result_type=Answer,
    )
