"""A supervised Agentfile goal whose supervisor said PAUSE, answered by a person after the worker
that held the run was SIGKILLed: the correction reaches the goal's next EXECUTE on a new worker,
and nothing done before the kill is asked again.

Real worker processes on a queue of the test's own; the agents are models of the fake OpenAI
server, so every prompt the run sent, before and after the kill, can be counted.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tests.conftest import run_id, sigkill, start_worker, write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages
from tests.runs import open_gate

AGENTFILE = """
NAME release
GOAL build "Build the release" SUPERVISED
RUN main USING build
"""
GATE = "main.build.supervise"
CORRECTION = "Build from the release branch."
PRE = {
    "interpretation": "build it",
    "scope_in": ["the build"],
    "scope_out": [],
    "approach": "make release",
    "predictions": [],
    "assumptions": [],
    "confidence": 0.9,
}


def _builder(messages: Messages) -> str:
    """The goal's agent. Its work falls short (a flag, so the supervisor is asked) until a prompt
    carries the person's correction; what it says depends on the prompt alone, so a prompt sent
    again would be answered, and counted, like the first."""
    prompt = messages[-1]["content"]
    if "Phase COMMIT" in prompt:
        return json.dumps(PRE)
    met, output = ("yes", "built from release") if CORRECTION in prompt else ("partial", "built from main")
    post = {"output": output, "tools_used": [], "commitment_met": met, "scope_changed": False}
    return f"Done.\n```json\n{json.dumps(post)}\n```"


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen]]:
    """The worker processes a test starts; those still running are stopped at its end."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


async def test_a_pause_answered_after_a_sigkill_reorients_the_goal_once(
    cli, client: Client, address, llm: FakeOpenAI, workers, tmp_path
):
    llm.by_model["builder"] = _builder
    llm.by_model["supervisor"] = json.dumps({"verdict": "PAUSE", "correction": "", "reason": "which branch?"})
    queue, rid = run_id("af-restart-q"), run_id("release")
    workers.append(start_worker(address, "--task-queue", queue))
    spec = write_spec(tmp_path, AGENTFILE, "Agentfile")
    agents = ["--agent", "openai:builder", "--agent", "supervisor=openai:supervisor"]
    started = cli("start", str(spec), *agents, "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0, started.err
    handle = client.get_workflow_handle(rid)
    try:
        await open_gate(handle, GATE)
        sigkill(workers[0])  # the worker holding the run in its cache dies while the run waits
        workers.append(start_worker(address, "--task-queue", queue))
        # LOGNAME is who `answer` says answered (as getpass reads it), so the report can name them.
        answered = cli("answer", rid, "--gate", GATE, CORRECTION, extra_env={"LOGNAME": "ana"})
        assert answered.code == 0, answered.err
        assert answered.out.strip() == f"gate {GATE} answered: {CORRECTION}"
        watched = cli("watch", rid)
        assert watched.code == 0, watched.out + watched.err
    finally:
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            await handle.terminate("test over")

    commit, first, second = llm.prompts_for("builder")
    assert "Phase COMMIT" in commit and "Phase EXECUTE" in first and "Phase EXECUTE" in second
    assert CORRECTION not in first
    assert f"Your supervisor corrects your last attempt; follow this now:\n{CORRECTION}" in second
    assert len(llm.prompts_for("supervisor")) == 1  # the second attempt raised no flag

    status = json.loads(cli("status", rid, "--json").out)
    assert status["status"] == "completed"
    first_try, second_try = status["supervision"]["main.build"]["attempts"]
    assert [(v["verdict"], v["by"], v["gate"]) for v in first_try["verdicts"]] == [
        ("PAUSE", "agent supervisor", ""),
        ("REORIENT", "ana", GATE),
    ]
    assert second_try["flags"] == [] and second_try["post"]["output"] == "built from release"
    report = cli("report", rid).out
    assert "## Supervision" in report
    assert f"REORIENT by ana at gate {GATE}; correction: {CORRECTION}" in report
