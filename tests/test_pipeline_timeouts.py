"""A pipeline's three timeout levels and its retry backoff, on the time-skipping test server.

Held agents lock the server's clock, so each test moves it on with time_env.sleep while it awaits
the run (see the notes above time_env in conftest.py).
"""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agentrun.client.runs import fetch_state
from agentrun.explain import report
from agentrun.lang import params as spec_params
from agentrun.lang.load import load
from agentrun.models.contract import RunInput, RunState
from agentrun.worker.blobs import data_converter
from agentrun.worker.build import build_worker
from tests.conftest import SERVER_STARTUP, TIME_QUEUE, run_id, time_server_binary, write_spec
from tests.fakes.openai_server import FakeOpenAI


@pytest_asyncio.fixture(loop_scope="session")
async def llm(monkeypatch):
    with FakeOpenAI(api_key="sk-test") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server
        server.release()
        # Let activities of runs that already ended hear back before the next test moves the clock.
        await asyncio.sleep(1)


@pytest_asyncio.fixture(loop_scope="session")
async def own_env():
    """A time-skipping server of the test's own. A run that ends while an agent it cancelled is still
    busy leaves that activity holding the server's clock lock, so the next test could not skip time."""
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=time_server_binary(),
        data_converter=data_converter(),
        test_server_startup_timeout=SERVER_STARTUP,
    )
    async with build_worker(environment.client, TIME_QUEUE):
        yield environment
    await environment.shutdown()


async def start(env: WorkflowEnvironment, tmp_path, text: str, agents: list[str]) -> WorkflowHandle:
    plan = load(str(write_spec(tmp_path, text)))
    inp = RunInput(
        plan=plan,
        params=spec_params.bind(plan, {}),
        workdir=str(tmp_path),
        default_agent="",
        agents={a: f"openai:{a}" for a in agents},
        heartbeat_s=0,
        search_attributes=False,
    )
    return await env.client.start_workflow("AgentRun", inp, id=run_id(plan.name), task_queue=TIME_QUEUE)


async def finish(env: WorkflowEnvironment, handle: WorkflowHandle, step_s: float, steps: int = 10) -> RunState:
    """Await the run, moving the server's clock on by step_s at a time while agents hold it."""
    result = asyncio.ensure_future(handle.result())
    await asyncio.sleep(0.2)  # result() must be awaited before time can be skipped past an activity
    for _ in range(steps):
        if result.done():
            break
        await env.sleep(step_s)
        await asyncio.sleep(0.3)
    try:
        await asyncio.wait_for(result, 30)
    except WorkflowFailureError:
        pass
    return await fetch_state(env.client, handle.id)


async def timers(env: WorkflowEnvironment, run: str) -> list[float]:
    events = [e async for e in env.client.get_workflow_handle(run).fetch_history_events()]
    return [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
        for e in events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]


AGENT_TIMEOUT = """
workflow:
  name: agent-timeout
  agents:
    slow: {prompt: "Slow.", timeout: 1m, retry: {max_attempts: 2, backoff: linear, on_failure: "fallback:quick"}}
    quick: {prompt: "Quick for {{input}}."}
  steps:
    - {id: one, agent: slow, input: "lead"}
"""


@pytest.mark.usefixtures("time_worker")
async def test_agent_timeout_triggers_its_retries_then_its_fallback(time_env, llm, tmp_path):
    llm.hold("slow")
    llm.by_model["quick"] = "done quickly"
    wall = time.monotonic()
    handle = await start(time_env, tmp_path, AGENT_TIMEOUT, ["slow", "quick"])
    state = await finish(time_env, handle, 61)
    assert state.status == "completed", state.errors
    assert len(llm.requests_for("slow")) == 2 and llm.prompts_for("quick") == ["Quick for lead."]
    assert state.steps["one"]["output"] == "done quickly"
    assert 10.0 in await timers(time_env, handle.id)  # linear backoff: 5 s × attempt 2
    text = report.to_markdown(state)
    assert "one: attempt 1 failed (timed out" in text and "falling back to" in text
    assert time.monotonic() - wall < 30


EXPONENTIAL = """
workflow:
  name: backoff
  agents:
    flaky: {prompt: "Flaky.", retry: {max_attempts: 3, backoff: exponential}}
  steps:
    - {id: one, agent: flaky}
"""


@pytest.mark.usefixtures("time_worker")
async def test_exponential_backoff_waits_two_to_the_attempt(time_env, llm, tmp_path):
    llm.by_model["flaky"] = ["", "", "third time"]
    handle = await start(time_env, tmp_path, EXPONENTIAL, ["flaky"])
    state = await finish(time_env, handle, 1)
    assert state.status == "completed" and state.steps["one"]["output"] == "third time"
    assert await timers(time_env, handle.id) == [4.0, 8.0]
    assert state.tasks["one"].retries == 2


GLOBAL = """
workflow:
  name: global
  timeout: 2m
  agents:
    fast: {prompt: "Fast."}
    slow: {prompt: "Slow.", timeout: 10m}
    never: {prompt: "Never."}
  steps:
    - {id: first, agent: fast}
    - {id: second, agent: slow}
    - {id: third, agent: never}
"""


async def test_global_timeout_cancels_running_agents_and_keeps_partial_results(own_env, llm, tmp_path):
    llm.by_model["fast"] = "first result"
    llm.hold("slow")
    handle = await start(own_env, tmp_path, GLOBAL, ["fast", "slow", "never"])
    state = await finish(own_env, handle, 121)
    assert state.status == "timeout"
    assert [t.status for t in state.tasks.values()] == ["completed", "cancelled", "pending"]
    assert state.steps["first"]["output"] == "first result" and llm.requests_for("never") == []
    text = report.to_markdown(state)
    assert (
        "- Status: TIMED OUT (partial: 1 of 3 steps completed)" in text
        and "the run's timeout (120s) was reached" in text
    )
    assert "| first | fast | SUCCESS |" in text


STEP_TIMEOUT = """
workflow:
  name: step-timeout
  agents:
    a: {prompt: "A."}
    b: {prompt: "B.", retry: {on_failure: skip}}
    c: {prompt: "C.", retry: {on_failure: POLICY}}
    agg: {prompt: "a={{steps.fan.outputs.a}} b={{steps.fan.outputs.b}}"}
  steps:
    - id: fan
      type: parallel
      parallel: [{agent: a}, {agent: b}, {agent: c}]
      wait: all
      timeout: 1m
    - {id: sum, agent: agg}
"""


async def test_step_timeout_applies_each_unfinished_agents_policy(own_env, llm, tmp_path):
    llm.by_model.update({"a": "A", "c": "C", "agg": "summed"})
    llm.hold("b")
    handle = await start(own_env, tmp_path, STEP_TIMEOUT.replace("POLICY", "abort"), ["a", "b", "c", "agg"])
    state = await finish(own_env, handle, 61, steps=1)
    assert state.status == "completed", state.errors
    assert state.tasks["fan.b"].status == "skipped" and state.steps["fan"]["outputs"]["b"] is None
    assert llm.prompts_for("agg") == ["a=A b="]
    assert "fan.b: step fan timed out after 60s; skipped" in report.to_markdown(state)


async def test_step_timeout_fails_the_step_for_an_agent_that_aborts(own_env, llm, tmp_path):
    llm.by_model.update({"a": "A", "b": "B", "agg": "summed"})
    llm.hold("c")
    handle = await start(own_env, tmp_path, STEP_TIMEOUT.replace("POLICY", "abort"), ["a", "b", "c", "agg"])
    state = await finish(own_env, handle, 61, steps=1)
    assert state.status == "failed" and llm.requests_for("agg") == []
    assert any("step fan timed out after 60s" in e for e in state.errors)
    assert "- Status: FAILED (partial: 2 of " in report.to_markdown(state)  # fan.a and fan.b had finished
