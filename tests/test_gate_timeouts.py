"""Gate timeouts on the time-skipping server: a person who never answers, hours of run time in seconds.

A waiting run holds no activity open, only a timer, so the server skips to it as soon as the test
awaits the result.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from agentrun.client.runs import fetch_state
from agentrun.lang import ir
from agentrun.models.contract import RunInput, RunState
from tests.conftest import TIME_QUEUE, run_id
from tests.runs import approval, plan, task

pytestmark = pytest.mark.usefixtures("time_worker")
HOUR = 3600.0


async def run(client: Client, the_plan: ir.Plan) -> tuple[RunState, float]:
    """Run to the end; the state and the wall-clock seconds it took."""
    agents = {n.agent: f"openai:{n.agent}" for n in the_plan.walk() if isinstance(n, ir.Task)}
    inp = RunInput(
        plan=the_plan,
        workdir=".",
        default_agent="openai:default",
        agents=agents,
        heartbeat_s=0,
        search_attributes=False,
    )
    handle: WorkflowHandle = await client.start_workflow("AgentRun", inp, id=run_id("gt"), task_queue=TIME_QUEUE)
    began = time.monotonic()
    try:
        await asyncio.wait_for(handle.result(), 60)
    except WorkflowFailureError:
        pass
    return await fetch_state(client, handle.id), time.monotonic() - began


def question(on_timeout: str, timeout_s: float = 2 * HOUR) -> ir.Human:
    return ir.Human(
        id="size", prompt="Which size?", choices=["S", "M"], on_timeout=on_timeout, timeout_s=timeout_s, step=True
    )


async def test_an_unanswered_gate_fails_the_run_when_its_timeout_passes(time_env, llm):
    state, wall_s = await run(time_env.client, plan(question("fail"), task("make", "Make {{human.size}}.")))
    assert state.status == "failed"
    assert state.errors == ["size: no answer to gate 'size' within 7200s"]
    assert state.gates["size"].status == "timed_out" and state.tasks["size"].status == "failed"
    assert state.ended_at and state.started_at and (state.ended_at - state.started_at).total_seconds() >= 2 * HOUR
    assert llm.prompts_for("make") == []
    assert wall_s < 2 * HOUR  # skipped, not waited


async def test_on_timeout_continue_goes_on_without_an_answer(time_env, llm):
    llm.by_model["make"] = "made"
    state, _ = await run(time_env.client, plan(question("continue"), task("make", "Make [{{human.size}}].")))
    assert state.status == "completed", state.errors
    assert llm.prompts_for("make") == ["Make []."]
    assert state.warnings == ["size: no answer to gate 'size' within 7200s; going on without one"]
    assert state.gates["size"].answer.timed_out and state.gates["size"].answer.value is None


async def test_on_timeout_a_choice_is_taken_as_the_answer(time_env, llm):
    llm.by_model["make"] = "made"
    state, _ = await run(time_env.client, plan(question("M"), task("make", "Make {{human.size}}.")))
    assert state.status == "completed" and llm.prompts_for("make") == ["Make M."]
    assert state.steps["size"]["output"] == "M" and state.human == {"size": "M"}


async def test_an_approval_gate_times_out_before_its_task(time_env, llm):
    gate = approval("deploy", timeout_s=HOUR)
    state, _ = await run(time_env.client, plan(task("deploy", "Deploy.", gate=gate), task("after", "After.")))
    assert state.status == "failed"
    assert state.errors == ["deploy: no answer to gate 'deploy' within 3600s"]
    assert llm.prompts_for("deploy") == [] and llm.prompts_for("after") == []
