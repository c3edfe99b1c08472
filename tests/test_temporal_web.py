"""What Temporal Web shows of a run, read through Temporal's API (the same data the UI renders): each
activity named by its task and loop round, a rolled-back run's failure saying so first with no
stack trace of the engine, and the summary a run is started with."""

from __future__ import annotations

import json

import pytest
import yaml
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from tests.conftest import SHELL_AGENT, run_id, write_spec
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

LOOPED = """\
name: rounds
system_instructions: You are a careful build engineer working in the folder out/.
subtasks:
  research:
    instructions: Research.
    loop_until: {status: DONE}
  build:
    instructions: Build.
"""

ROLLED = """\
name: rolled
subtasks:
  tag:
    instructions: Tag.
    compensate: Remove the tag.
  publish:
    instructions: Publish.
"""


async def _close_and_summaries(handle: WorkflowHandle, ids: list[str] | None = None) -> tuple[object, list[str]]:
    summaries, close = [], None
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            summaries.append(json.loads(event.user_metadata.summary.data))
            if ids is not None:
                ids.append(event.activity_task_scheduled_event_attributes.activity_id)
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            close = event.workflow_execution_failed_event_attributes.failure
    return close, summaries


def _replies(tmp_path, tasks: dict) -> str:
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump({"tasks": tasks}))
    return f"scripted:{tmp_path / 'replies.yaml'}"


async def test_activities_are_named_by_task_and_round_not_by_the_shared_system_text(client, tmp_path):
    agent = _replies(
        tmp_path,
        {
            "research": ["Found a lead. COMPLETION_STATUS: CONTINUE", "COMPLETION_STATUS: DONE"],
            "build": ["Built, I think.", "COMPLETION_STATUS: COMPLETE"],
        },
    )
    state = await run_spec(client, write_spec(tmp_path, LOOPED), agent)
    assert state.status == "completed", state.errors
    ids: list[str] = []
    _, summaries = await _close_and_summaries(client.get_workflow_handle(state.run_id), ids)
    assert summaries == ["research — round 1", "research — round 2", "build", "build: reminder"]
    # Temporal Web's Pending Activities card shows the id, not the summary.
    assert ids == ["1: research — round 1", "2: research — round 2", "3: build", "4: build: reminder"]


async def test_a_rolled_back_run_fails_saying_so_first_without_an_engine_stack_trace(client, tmp_path):
    agent = _replies(
        tmp_path,
        {
            "tag": "Tagged. COMPLETION_STATUS: COMPLETE",
            "tag.compensate": "Removed. COMPLETION_STATUS: COMPLETE",
            "publish": "No permission. COMPLETION_STATUS: ERROR",
        },
    )
    state = await run_spec(client, write_spec(tmp_path, ROLLED), agent)
    assert state.status == "compensated"
    failure, _ = await _close_and_summaries(client.get_workflow_handle(state.run_id))
    assert failure.message.startswith(
        "rolled back after task publish failed: the agent reported COMPLETION_STATUS: ERROR"
    )
    assert failure.stack_trace == "" and failure.application_failure_info.type == "RunFailed"


async def test_a_run_is_started_with_a_summary_of_its_spec(cli, client, tmp_path):
    rid = run_id("summed")
    spec = write_spec(tmp_path, 'name: summed\nsubtasks:\n  one: {instructions: "```sh\\necho hi\\n```"}\n')
    assert cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", run_id("q")).code == 0
    description = await client.get_workflow_handle(rid).describe()
    assert await description.static_summary() == "summed (task-tree, 1 task)"
