"""Timeouts through the real workflow on the time-skipping test server: minutes of run time, seconds of wall time.

A running activity locks the server's clock, so a test that waits out an agent's timeout skips the time
itself, with time_env.sleep while it awaits the result (see the notes above time_env in conftest.py).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from agentrun.client.runs import fetch_state
from agentrun.explain import report
from agentrun.lang import params as spec_params
from agentrun.lang.load import load
from agentrun.models.contract import RunInput, RunState
from tests.conftest import TIME_QUEUE, run_id, until, write_spec
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.usefixtures("time_worker")
WEDGED_S = 30  # a skip or a result slower than this in wall time means the session's server is stuck


@pytest.fixture
def llm(monkeypatch):
    with FakeOpenAI(reply="ok\nCOMPLETION_STATUS: COMPLETE", api_key="sk-test") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server
        server.release()


async def start(client: Client, spec: Path, agent: str, **options) -> WorkflowHandle:
    plan = load(str(spec), given_params=())
    options = {"heartbeat_s": 0, "search_attributes": False, **options}
    inp = RunInput(
        plan=plan, params=spec_params.bind(plan, {}), workdir=str(spec.parent), default_agent=agent, **options
    )
    return await client.start_workflow("AgentRun", inp, id=run_id(plan.name), task_queue=TIME_QUEUE)


async def finish(env: WorkflowEnvironment, handle: WorkflowHandle, skip_s: float) -> RunState:
    """Await the run, moving the server's clock on by skip_s once. The clock is locked by the client and
    by the running activity; awaiting result() releases the first, env.sleep the second, in either order."""
    result = asyncio.ensure_future(handle.result())
    await asyncio.wait_for(env.sleep(skip_s), WEDGED_S)
    try:
        await asyncio.wait_for(result, WEDGED_S)
    except WorkflowFailureError:
        pass
    return await fetch_state(env.client, handle.id)


async def test_a_held_agent_fails_its_task_when_the_task_timeout_passes(time_env, llm, tmp_path):
    spec = write_spec(
        tmp_path,
        """
name: slow
subtasks:
  A:
    instructions: "Think for a long time."
    timeout: 3m
  B:
    instructions: "Never reached."
""",
    )
    llm.hold("m-slow")
    wall = time.monotonic()
    handle = await start(time_env.client, spec, "openai:m-slow")
    await until(lambda: llm.in_flight("m-slow") == 1)
    state = await finish(time_env, handle, 181)
    wall = time.monotonic() - wall

    assert state.status == "failed"
    a, b = state.tasks["A"], state.tasks["B"]
    assert (a.status, b.status) == ("failed", "pending")
    assert "timed out" in a.error and a.error.endswith("no reply from agent 'default' within 180s")
    assert 180 <= a.duration_s < 200, "the task's timeout bounds its whole activity, retries included"
    assert len(llm.requests_for("m-slow")) == 1 and llm.prompts_for("m-slow")[0].startswith("Think")
    markdown = report.to_markdown(state)
    assert "| A | default | FAILED |" in markdown and "- ERROR A: timed out" in markdown
    assert wall < 10, f"took {wall:.1f}s of wall time"


async def test_retry_backoff_is_skipped_while_no_agent_is_running(time_env, llm, tmp_path):
    spec = write_spec(
        tmp_path,
        """
name: patient
subtasks:
  A:
    instructions: "Answer when the rate limit lifts."
""",
    )
    llm.fail_next(2, 429, retry_after=600)
    wall = time.monotonic()
    handle = await start(time_env.client, spec, "openai:m-busy")
    await asyncio.wait_for(handle.result(), WEDGED_S)
    state = await fetch_state(time_env.client, handle.id)
    wall = time.monotonic() - wall

    assert state.status == "completed" and state.outputs["A"].startswith("ok")
    assert len(llm.requests_for("m-busy")) == 3
    assert state.tasks["A"].duration_s >= 1200, "two Retry-After waits of 10 minutes each, in server time"
    assert wall < 10, f"took {wall:.1f}s of wall time"
