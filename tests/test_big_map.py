"""A map over a long list runs its elements in batches, each a child workflow of the run: every
element is asked once, the reducer gets all results in order, no history grows with the list, and
the run's state stays small however long the list is."""

from __future__ import annotations

import json
import re
import time

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter

from tests.conftest import write_spec
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

# Replies by run key, read once: an element's reply names its own item. `cat` answers the reducer
# with the prompt it was given, so the test reads the results it got, in the order it got them.
ECHO = "command:cat"


def replies(folder, count: int) -> str:
    (folder / "replies.yaml").write_text(json.dumps({"tasks": {f"each[{i}]": f"<{i}>" for i in range(count)}}))
    return "scripted:replies.yaml"


def big_map(concurrency: int, batch: int | None = None, reduce: bool = True) -> str:
    options = f"concurrency: {concurrency}" + (f", batch: {batch}" if batch else "")
    return f"""workflow:
  name: big
  inputs:
    - {{name: items, type: json, required: true}}
  agents:
    worker: {{prompt: "<{{{{item}}}}>"}}
    reducer: {{prompt: "Combine."}}
  steps:
    - id: each
      type: map
      map: {{over: "{{{{inputs.items}}}}", agent: worker{", reduce: reducer" if reduce else ""}, {options}}}
"""


async def children_of(client, run_id: str) -> list[str]:
    """The child workflows the run started, from its own history."""
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    started = [e for e in events if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED]
    return [e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id for e in started]


async def history_length(client, workflow_id: str) -> int:
    return len([e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()])


def payload_size(value) -> int:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


async def test_two_thousand_elements_run_in_child_batches_and_reduce_in_order(client, tmp_path):
    items = list(range(2000))
    began = time.monotonic()
    spec = write_spec(tmp_path, big_map(200))
    state = await run_spec(client, spec, replies(tmp_path, 2000), params={"items": items}, agents={"reducer": ECHO})
    took = time.monotonic() - began
    assert state.status == "completed", state.errors
    reduced = state.steps["each"]["output"]
    assert [int(n) for n in re.findall(r"<(\d+)>", reduced)] == items  # all results, in the elements' order

    children = await children_of(client, state.run_id)
    assert sorted(children) == sorted(f"{state.run_id}/each/batch-{b}" for b in range(20))
    for child in children:
        desc = await client.get_workflow_handle(child).describe()
        assert desc.parent_id == state.run_id and desc.workflow_type == "AgentRunBatch"
    lengths = [await history_length(client, child) for child in children]
    parent = await history_length(client, state.run_id)
    print(f"2000 elements: {took:.1f}s; run history {parent} events, batches {min(lengths)}-{max(lengths)}")
    assert max(lengths) < 1500 and parent < 500  # far below Temporal's 10,240-event warning

    summary = state.maps["each"]
    assert summary.counts == {"completed": 2000} and summary.batches_done == 20
    assert [t for t in state.tasks] == ["each[*]", "each.reducer"]
    assert state.iteration_count == 2001
    desc = await client.get_workflow_handle(state.run_id).describe()
    memo = desc.raw_description.workflow_execution_info.memo.fields["state"]
    assert memo.ByteSize() < 1_000_000 and payload_size(state) < 1_000_000
