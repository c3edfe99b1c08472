"""What Temporal Web shows of a run, read through Temporal's API (the same data the UI renders): each
activity named by its task and loop round, a rolled-back run's failure saying so first with no
stack trace of the engine, and the summary a run is started with."""

from __future__ import annotations

import json

import pytest
import yaml
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from tests.conftest import ROOT, SHELL_AGENT, run_id, write_spec
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


FANNED = """\
graph:
  id: main
  name: fanned
  description: Answer a topic question by question
  inputs:
    topic: {schema: {type: string}, required: true}
  nodes:
    - id: split
      type: agent
      agent_id: planner
      read_keys: [topic]
      write_keys: [questions]
      instructions: Reply with a JSON list of three short questions about the topic.
    - id: research
      type: map
      read_keys: [questions]
      map_reduce_config:
        worker_node_id: answer
        items_path: $.memory.questions
        synthesizer_node_id: combine
        max_concurrency: 3
    - id: answer
      type: agent
      agent_id: researcher
      write_keys: [notes]
      instructions: Answer the question in map_item in two sentences.
    - id: combine
      type: synthesizer
      agent_id: writer
      write_keys: [summary]
      instructions: Combine the answers into one paragraph.
  edges:
    - {source: split, target: research}
  start_node: split
  end_nodes: [combine]
"""


async def test_a_maps_elements_are_named_by_element_and_graph_steps_leave_the_goal_out(client, tmp_path):
    agent = _replies(
        tmp_path,
        {
            "split": '["Why?", "How?", "When?"]',
            **{f"research[{i}]": f"Answer {i}." for i in range(3)},
            "combine": "All of it.",
        },
    )
    spec = write_spec(tmp_path, FANNED, "fanned.yaml")
    state = await run_spec(client, spec, agent, params={"topic": "tides"})
    assert state.status == "completed", state.errors
    _, summaries = await _close_and_summaries(client.get_workflow_handle(state.run_id))
    # Each bar says which element it is, as `status` and the report do; none repeats the run's goal.
    assert sorted(summaries) == ["combine", "research[0]", "research[1]", "research[2]", "split"]


async def test_the_runs_params_are_in_its_memo(cli, client, tmp_path):
    rid = run_id("memo")
    spec = write_spec(tmp_path, FANNED, "fanned.yaml")
    started = cli(
        "start",
        str(spec),
        "-p",
        "topic=tides",
        "--agent",
        SHELL_AGENT,
        "--id",
        rid,
        "--task-queue",
        run_id("q"),
        "--detach",
    )
    assert started.code == 0, started.err
    description = await client.get_workflow_handle(rid).describe()
    memo = await description.memo_value("params")
    # Temporal Web shows the memo in the run's details, apart from the input (the whole compiled plan): the params a person gave, with
    # the graph's own goal and constraints that its steps read.
    assert memo == {"topic": "tides", "goal": "Answer a topic question by question", "constraints": []}


async def _patches(handle: WorkflowHandle) -> list[str]:
    """The ids of the run's `core_patch` markers: Temporal's record of each `workflow.patched` it asked."""
    found = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attributes = event.marker_recorded_event_attributes
            assert attributes.marker_name == "core_patch"
            found.append(json.loads(attributes.details["patch-data"].payloads[0].data)["id"])
    return found


async def test_every_core_patch_marker_a_run_records_is_explained_in_the_docs(client, tmp_path):
    agent = _replies(
        tmp_path,
        {
            "split": '["Why?", "How?", "When?"]',
            **{f"research[{i}]": f"Answer {i}." for i in range(3)},
            "combine": "All of it.",
            "research": ["Found a lead. COMPLETION_STATUS: CONTINUE", "COMPLETION_STATUS: DONE"],
            "build": "COMPLETION_STATUS: COMPLETE",
        },
    )
    docs = (ROOT / "docs" / "observability.md").read_text()
    seen: set[str] = set()
    for text, name, params in ((FANNED, "fanned.yaml", {"topic": "tides"}), (LOOPED, "rounds.yaml", None)):
        state = await run_spec(client, write_spec(tmp_path, text, name), agent, params=params)
        assert state.status == "completed", state.errors
        seen |= set(await _patches(client.get_workflow_handle(state.run_id)))
    assert seen and {"summaries-name-elements", "activity-ids-name-steps"} <= seen
    assert [patch for patch in sorted(seen) if f"`{patch}`" not in docs] == []
