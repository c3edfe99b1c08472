"""Hostile user code and outputs in real runs on a real worker process: the worker's secrets stay out
of what children see and out of history, user code cannot kill the worker, and a result too large
for Temporal fails its step once, saying how big it was."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from temporalio.client import WorkflowHistory

from agentrun.lang.load import load
from agentrun.models.contract import RunInput
from tests.conftest import run_id, start_worker, until, write_spec
from tests.runs import finish, run_spec

QUEUE = "hostile-runs"
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"  # what the worker's OPENAI_API_KEY holds in these tests

LEAKY = """
subtasks:
  look:
    instructions: Look around.
  publish:
    provider_call:
      provider: shell
      method: run
      params:
        command: 'echo "greeting=$GREETING key=${OPENAI_API_KEY:-unset}"; cat key.txt'
        env: {GREETING: hello}
"""
# Prints its whole environment and a file that happens to hold the worker's key.
LEAKY_AGENT = "command:sh -c 'cat >/dev/null; env; echo; cat key.txt; echo; echo COMPLETION_STATUS: COMPLETE'"


async def test_children_see_an_allow_listed_environment_and_no_secret_reaches_history(
    cli, client, address, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("AGENTRUN_PASS_ENV", "TEAM_REGION, NOT_SET_ANYWHERE")
    monkeypatch.setenv("TEAM_REGION", "eu-west-7")
    monkeypatch.setenv("UNLISTED_SETTING", "stays-in-the-worker")
    (tmp_path / "key.txt").write_text(f"key from a file: {SECRET}\n")
    spec = write_spec(tmp_path, LEAKY)
    rid = run_id("leaky")
    worker = start_worker(address, "--task-queue", QUEUE)
    try:
        done = cli("start", str(spec), "--agent", LEAKY_AGENT, "--id", rid, "--task-queue", QUEUE)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert done.code == 0, done.out + done.err
    history = await client.get_workflow_handle(rid).fetch_history()
    seen_by_agent, published = _activity_results(history)
    assert "PATH=" in seen_by_agent and "HOME=" in seen_by_agent and "AGENTRUN_TASK_ID=look" in seen_by_agent
    assert "TEAM_REGION=eu-west-7" in seen_by_agent  # allowed by the operator
    assert "OPENAI_API_KEY=" not in seen_by_agent and "UNLISTED_SETTING=" not in seen_by_agent
    assert "key from a file: [redacted OPENAI_API_KEY]" in seen_by_agent
    assert published.startswith("greeting=hello key=unset\n")  # the provider's env: map passes, the key does not
    assert "key from a file: [redacted OPENAI_API_KEY]" in published
    assert all(SECRET.encode() not in event.SerializeToString() for event in history.events)
    status, report = cli("status", rid, "--json"), cli("report", rid)
    assert json.loads(status.out)["status"] == "completed" and SECRET not in status.out
    assert "key from a file: [redacted OPENAI_API_KEY]" in report.out and SECRET not in report.out


def _activity_results(history: WorkflowHistory) -> list[str]:
    """The text each activity of the run returned, as Temporal recorded it, in order."""
    texts = []
    for event in history.events:
        if event.HasField("activity_task_completed_event_attributes"):
            [payload] = event.activity_task_completed_event_attributes.result.payloads
            texts.append(json.loads(payload.data)["text"])
    return texts


PARENT_KILLERS = {
    "check": """
subtasks:
  work:
    instructions: Work.
    success_criteria:
      python: |
        import os, time
        os.kill(os.getppid(), 9)
        time.sleep(30)
        result = True
""",
    "shell": """
subtasks:
  work:
    provider_call: {provider: shell, method: run, params: {command: 'kill -9 $PPID; sleep 30'}}
""",
}
DONE_AGENT = "command:sh -c 'cat >/dev/null; echo COMPLETION_STATUS: COMPLETE'"


async def test_user_code_that_kills_its_parent_does_not_kill_the_worker(client, address, tmp_path):
    worker = start_worker(address, "--task-queue", "hostile-signals")
    try:
        runs = {}
        for name, text in PARENT_KILLERS.items():
            plan = load(str(write_spec(tmp_path, text, f"{name}.yaml")))
            inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent=DONE_AGENT, heartbeat_s=5)
            handle = await client.start_workflow(
                "AgentRun", inp, id=run_id(name), task_queue="hostile-signals", execution_timeout=timedelta(minutes=5)
            )
            runs[name] = asyncio.create_task(finish(client, handle))
        await until(lambda: worker.poll() is not None or all(run.done() for run in runs.values()), timeout_s=240)
        assert worker.poll() is None, "the worker was killed"
        check, shell = runs["check"].result(), runs["shell"].result()
    finally:
        worker.terminate()
        assert worker.wait(timeout=30) == 0
    assert check.status == "failed" and shell.status == "failed"
    assert "the check was killed by signal 9 without a result" in check.errors[0]
    assert shell.errors[0] == "work: shell.run: 'kill -9 $PPID; sleep 30' was killed by signal 9"


def pipeline(*steps: str) -> str:
    agents = ", ".join(f"{s}: {{prompt: go}}" for s in steps)
    return f"workflow:\n  name: w\n  agents: {{{agents}}}\n  steps: [{', '.join(f'{{id: {s}, agent: {s}}}' for s in steps)}]\n"


@pytest.mark.usefixtures("worker")
async def test_a_reply_too_large_to_keep_fails_its_step_at_once_saying_how_big(cli, client, tmp_path, llm):
    llm.reply = "many words " * 1_500_000  # 16.5 MB
    spec = write_spec(tmp_path, pipeline("write", "review"))
    state = await asyncio.wait_for(run_spec(client, spec, "openai:m"), 240)  # a run left spinning fails here
    reason = "the reply of agent 'write' to task 'write' is 16.5 MB, over the 16.0 MB a step may return"
    assert state.status == "failed" and state.errors == [f"write: {reason}"]
    assert len(llm.requests_for("m")) == 1  # not asked (and paid) again
    shown = json.loads(cli("status", state.run_id, "--json").out)
    assert shown["status"] == "failed" and shown["tasks"][0]["error"] == reason
    assert reason in cli("report", state.run_id).out


@pytest.mark.usefixtures("worker")
async def test_outputs_that_together_grow_past_what_a_run_may_keep_fail_the_step_that_crosses(client, tmp_path, llm):
    llm.reply = "many words " * 1_000_000  # 11 MB each: fine alone, too much together
    spec = write_spec(tmp_path, pipeline("one", "two", "three", "four"))
    state = await asyncio.wait_for(run_spec(client, spec, "openai:m"), 240)
    assert state.status == "failed", state.errors
    [error] = state.errors
    assert error.startswith(
        "three: its output (11.0 MB) makes the run's state 33.3 MB, over the 32.0 MB a run may keep"
    )
    assert [t.status for t in state.tasks.values()] == ["completed", "completed", "failed", "pending"]
    assert state.steps["three"]["output"] == "(11.0 MB output dropped)"
    assert len(llm.requests_for("m")) == 3
