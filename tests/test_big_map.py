"""A map over a long list runs its elements in batches, each a child workflow of the run: every
element is asked once, the reducer gets all results in order, no history grows with the list, and
the run's state stays small however long the list is."""

from __future__ import annotations

import json
import re

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter

from agentrun.explain import report
from agentrun.lang import ir
from agentrun.lang import params as spec_params
from agentrun.lang.check import check
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.models import contract
from agentrun.models.contract import RunInput
from agentrun.workflows.batching import BatchInput, reads
from tests.conftest import TEST_QUEUE, run_id, write_spec
from tests.runs import finish, open_gate, prompts_out, run_spec

pytestmark = pytest.mark.usefixtures("worker")

# `cat` answers with the prompt it was given: as the reducer, it shows the results it got, in order.
ECHO = "command:cat"

# Writes each prompt it is given to calls.log in the work directory, and answers with it.
LOGGED = "command:tee -a calls.log"


def asked(folder) -> list[int]:
    """The items whose element was sent to the LOGGED agent, once per prompt."""
    path = folder / "calls.log"
    return sorted(int(n) for n in re.findall(r"<(\d+)>", path.read_text())) if path.exists() else []


async def start(client, folder, text: str, agent: str, items: list, agents: dict | None = None):
    plan = load(str(write_spec(folder, text)), given_params=["items"])
    inp = RunInput(
        plan=plan,
        params=spec_params.bind(plan, {"items": items}),
        workdir=str(folder),
        default_agent=agent,
        agents=agents or {},
        heartbeat_s=5,
    )
    return await client.start_workflow("AgentRun", inp, id=run_id("big"), task_queue=TEST_QUEUE)


def replies(folder, count: int, **special: str) -> str:
    """A scripted agent whose reply to element i is `<i>` (read once, however many elements ask)."""
    tasks = {f"each[{i}]": f"<{i}>" for i in range(count)} | special
    (folder / "replies.yaml").write_text(json.dumps({"tasks": tasks}))
    return "scripted:replies.yaml"


def big_map(concurrency: int, batch: int | None = None, reduce: bool = True, worker: str = "", step: str = "") -> str:
    """A pipeline mapping `worker` over the list param `items`. `worker` adds keys to the agent;
    `step` is YAML after the map step: `      budget: …` is the step's, `  budget: …` the run's."""
    options = f"concurrency: {concurrency}" + (f", batch: {batch}" if batch else "")
    return f"""workflow:
  name: big
  inputs:
    - {{name: items, type: json, required: true}}
  agents:
    worker: {{prompt: "<{{{{item}}}}>"{worker}}}
    reducer: {{prompt: "Combine."}}
  steps:
    - id: each
      type: map
      map: {{over: "{{{{inputs.items}}}}", agent: worker{", reduce: reducer" if reduce else ""}, {options}}}
{step}"""


async def children_of(client, run_id: str) -> list[str]:
    """The child workflows the run started, from its own history."""
    events = [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]
    started = [e for e in events if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED]
    return [e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id for e in started]


async def history_length(client, workflow_id: str) -> int:
    return len([e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()])


def payload_size(value) -> int:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


async def test_two_thousand_elements_run_in_child_batches_and_reduce_in_order(client, tmp_path, cli):
    items = list(range(2000))
    spec = write_spec(tmp_path, big_map(200))
    state = await run_spec(client, spec, replies(tmp_path, 2000), params={"items": items}, agents={"reducer": ECHO})
    assert state.status == "completed", state.errors
    reduced = state.steps["each"]["output"]
    assert [int(n) for n in re.findall(r"<(\d+)>", reduced)] == items  # all results, in the elements' order

    children = await children_of(client, state.run_id)
    assert sorted(children) == sorted(f"{state.run_id}/each/batch-{b}" for b in range(20))
    for child in children:
        desc = await client.get_workflow_handle(child).describe()
        assert desc.parent_id == state.run_id and desc.workflow_type == "AgentRunBatch"
    first = await anext(aiter(client.get_workflow_handle(children[0]).fetch_history_events()))
    payload = first.workflow_execution_started_event_attributes.input.payloads[0]
    sent = pydantic_data_converter.payload_converter.from_payloads([payload], [BatchInput])[0]
    assert len(sent.items) == 100 and sent.run.params == {}  # the list goes once, a batch to each
    lengths = [await history_length(client, child) for child in children]
    parent = await history_length(client, state.run_id)
    assert max(lengths) < 1500 and parent < 500  # far below Temporal's 10,240-event warning

    summary = state.maps["each"]
    assert summary.counts == {"completed": 2000} and summary.batches_done == 20
    assert [t for t in state.tasks] == ["each[*]", "each.reducer"]
    assert state.iteration_count == 2001
    desc = await client.get_workflow_handle(state.run_id).describe()
    # Decoded: a memo of 256 KB or more is stored by reference, so its raw size says nothing.
    memo = await desc.memo_value("state", type_hint=contract.RunState)
    queried = await client.get_workflow_handle(state.run_id).query(contract.STATE, result_type=contract.RunState)
    assert payload_size(memo) < 1_000_000 and payload_size(queried) < 1_000_000

    # Details on request: a page of elements is read from the one batch that holds it.
    page = cli("status", state.run_id, "--elements", "each", "--page", "40", "--limit", "25", "--json")
    assert page.code == 0, page.err
    shown = json.loads(page.out)
    assert (shown["page"], shown["pages"], shown["total"]) == (40, 80, 2000)
    assert [(e["key"], e["status"], e["output"]) for e in shown["elements"]] == [
        (f"each[{i}]", "completed", f"<{i}>") for i in range(975, 1000)
    ]
    text = cli("report", state.run_id).out
    assert "- Total steps: 2001" in text and "| 1 | each[*] | worker | SUCCESS |" in text
    assert f"- each: 2000 elements in 20 batches of 100 (child workflows {state.run_id}/each/batch-0 … " in text
    assert "--elements each --page N" in text
    table = cli("report", state.run_id, "--elements", "each", "--page", "2", "--limit", "3").out
    assert "each: elements 3–5 of 2000, page 2 of 667" in table and "| each[4] | SUCCESS |" in table
    assert "## each[5]\n\n```\n<5>\n```" in table
    plain = cli("status", state.run_id).out
    assert (
        "  each[*]: 2000 of 2000 elements done in 20 of 20 batches (2000 completed); each one: --elements each" in plain
    )
    outputs = cli("report", state.run_id, "--outputs").out
    assert (
        f"2000 outputs, kept by the map's batches: `agentrun report {state.run_id} --elements each --page N`" in outputs
    )
    wrong = cli("status", state.run_id, "--page", "2")
    assert wrong.code == 2 and "add --elements MAP" in wrong.err


async def test_an_element_that_fails_fails_its_batch_and_the_map_with_its_own_error(client, tmp_path):
    agent = replies(tmp_path, 30, **{"each[13]": ""})
    state = await run_spec(
        client,
        write_spec(tmp_path, big_map(5, batch=10, reduce=False)),
        agent,
        params={"items": list(range(30))},
        agents={},
    )
    assert state.status == "failed"
    assert state.errors[-1] == "each[13]: the agent returned an empty output"
    summary = state.maps["each"]
    assert [(n.key, n.status) for n in summary.failures] == [("each[13]", "failed")]
    assert summary.counts["completed"] >= 10 and state.tasks["each[*]"].status == "failed"
    children = sorted(await children_of(client, state.run_id))
    assert children == [f"{state.run_id}/each/batch-0", f"{state.run_id}/each/batch-1"]  # batch 2 never started
    failed = await client.get_workflow_handle(children[1]).describe()
    assert failed.status is not None and failed.status.name == "FAILED"


async def test_a_skipped_element_leaves_a_null_result_and_a_partial_run(client, tmp_path, cli):
    agent = replies(tmp_path, 30, **{"each[13]": ""})
    text = big_map(5, batch=10, reduce=False, worker=", tools: [WebSearch], retry: {max_attempts: 2, on_failure: skip}")
    state = await run_spec(client, write_spec(tmp_path, text), agent, params={"items": list(range(30))}, agents={})
    assert state.status == "completed", state.errors
    results = state.steps["each"]["output"]
    assert results[13] is None and results[:3] == ["<0>", "<1>", "<2>"] and len(results) == 30
    summary = state.maps["each"]
    assert summary.counts == {"completed": 29, "skipped": 1} and summary.batches_done == 3
    assert state.tasks["each[*]"].retries == 1  # each[13]'s second attempt
    # Copied from its batch: a failure the spec routes (skip) is said as a warning, not an error.
    assert state.errors == []
    assert "each[13]: failed and skipped: the agent returned an empty output" in state.warnings
    assert state.taint["each[*]"].source == "tool:WebSearch"  # an agent with tools: its outputs are marked
    assert state.taint["each"].derived_from == ["each[*]"]
    text = report.to_markdown(state)
    assert "- Status: COMPLETE (partial: 1 of 30 steps skipped)" in text and "- Steps skipped: 1" in text
    assert "  - each[13] (SKIPPED): the agent returned an empty output" in text
    said = cli("logs", f"{state.run_id}/each/batch-1", "--task", "each[13]")  # a batch's own conversation
    assert said.code == 0 and said.out.count("<13>") == 2, said.out + said.err


async def test_a_step_budget_counts_every_batch_and_fails_the_element_past_it(client, tmp_path):
    # One element at a time: a step's budget counts a prompt once it is answered.
    text = big_map(1, batch=10, reduce=False, step="      budget: {iterations: 25}\n")
    state = await run_spec(client, write_spec(tmp_path, text), LOGGED, params={"items": list(range(60))}, agents={})
    assert state.status == "failed"
    assert state.errors[0] == "each[25]: budget exceeded in step each: 25 prompts sent, as many as the budget allows"
    assert asked(tmp_path) == list(range(25))  # what earlier batches spent counted in the later ones
    assert state.iteration_count == 25 and state.step_usage["each"].calls == 25
    assert state.maps["each"].counts["completed"] == 25


async def test_a_paused_budget_stops_a_batch_and_its_rest_runs_once_a_person_raises_it(client, tmp_path):
    text = big_map(5, batch=10, step="  budget: {iterations: 15, on_exceeded: pause}\n")
    handle = await start(client, tmp_path, text, LOGGED, list(range(30)), {"reducer": ECHO})
    waiting = await open_gate(handle, "budget")
    assert waiting.gates["budget"].prompt == "budget exceeded: 15 prompts sent, as many as the budget allows"
    assert asked(tmp_path) == list(range(15))
    await handle.execute_update(contract.RAISE_BUDGET, contract.BudgetInput(iterations=100), result_type=ir.Budget)
    state = await finish(client, handle)
    assert state.status == "completed", state.errors
    assert asked(tmp_path) == list(range(30))  # each element once: none that was done ran again
    assert [int(n) for n in re.findall(r"<(\d+)>", state.steps["each"]["output"])] == list(range(30))
    children = sorted(await children_of(client, handle.id))
    assert children == [f"{handle.id}/each/batch-{b}" for b in ("0", "1", "1.2", "2")]
    assert state.maps["each"].parts == {1: 2} and state.iteration_count == 31


async def test_a_cancelled_run_cancels_its_open_batch(client, tmp_path):
    (tmp_path / "slow.yaml").write_text("default: done\ndelay_s: 600\n")
    handle = await start(client, tmp_path, big_map(5, batch=10, reduce=False), "scripted:slow.yaml", list(range(30)))
    batch = client.get_workflow_handle(f"{handle.id}/each/batch-0")
    await prompts_out(batch, 5)  # the first batch has its elements with the agent
    await handle.cancel()
    state = await finish(client, handle)
    assert state.status == "cancelled" and state.tasks["each[*]"].status == "cancelled"
    assert state.iteration_count == 5  # what the cancelled batch spent is counted
    closed = await batch.describe()
    # The batch ends as cancelled and hands back what its elements spent, so its workflow completes.
    assert closed.status is not None and closed.status.name == "COMPLETED", closed.status
    assert (await closed.memo_value("state", type_hint=contract.RunState)).status == "cancelled"
    assert await children_of(client, handle.id) == [batch.id]


async def test_a_note_sent_while_a_batch_runs_reaches_one_prompt_of_the_next_batch(client, tmp_path):
    # Each element waits for the file `go`, then logs its prompt: batch 0 is out with the agent when
    # the note comes, so the first prompt that can carry it is element 2's, in batch 1.
    agent = "command:sh -c 'while [ ! -e go ]; do sleep 0.05; done; tee -a calls.log'"
    handle = await start(client, tmp_path, big_map(1, batch=2, reduce=False), agent, list(range(6)))
    batch = client.get_workflow_handle(f"{handle.id}/each/batch-0")
    await prompts_out(batch, 1)  # element 0's prompt is with the agent
    note = contract.NoteInput(text="Answer in French.", step="each", by="ana")
    await handle.execute_update(contract.SAY, note, result_type=contract.Note)
    one = contract.NoteInput(text="Only this one.", step="each[4]")
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(contract.SAY, one, result_type=contract.Note)
    assert "step 'each[4]' is an element of the long map 'each'" in str(refused.value.cause)
    (tmp_path / "go").touch()
    state = await finish(client, handle)
    assert state.status == "completed", state.errors
    prompts = (tmp_path / "calls.log").read_text().split("<")[1:]
    assert [p.startswith(f"{i}>") for i, p in enumerate(prompts)] == [True] * 6  # one at a time, in order
    assert ["Answer in French." in p for p in prompts] == [False, False, True, False, False, False]
    assert "- from ana: Answer in French." in prompts[2]
    assert [(n.delivered_to, n.delivered_turn, n.handed_to) for n in state.notes] == [("each[2]", 1, "")]
    assert "- Note 1 from ana: 'Answer in French.' delivered to each[2] (prompt 1)" in report.to_markdown(state)


def test_a_map_body_that_would_ask_a_person_per_element_is_refused(tmp_path):
    plan = load(str(write_spec(tmp_path, big_map(5))), given_params=["items"])
    body = plan.root.children[0].body.model_copy(update={"gate": ir.Human(id="ok", prompt="Go on?", approval=True)})
    root = plan.root.model_copy(update={"children": [plan.root.children[0].model_copy(update={"body": body})]})
    with pytest.raises(SpecError) as refused:
        check(plan.model_copy(update={"root": root}))
    assert "'worker' in the body of map 'each' has an approval gate" in str(refused.value)


def test_a_batch_is_sent_only_the_values_its_elements_read():
    body = ir.Task(
        id="w", protocol="plain", prompt="{{ item }} for {{ inputs.topic }} in {{ steps.plan.output.x }} by {{ style }}"
    )
    seen = reads(body)
    assert seen.pick_steps({"plan": 1, "split": [0] * 9}) == {"plan": 1}
    assert seen.pick_params({"topic": "t", "items": [0] * 9}) == {"topic": "t"}
    assert seen.pick_memory({"style": "s", "other": 2}) == {"style": "s"}
    for everything in (
        body.model_copy(update={"input": ir.ALL_PRIOR}),
        body.model_copy(update={"criteria": ir.Criteria(python="result = True")}),
        body.model_copy(update={"prompt": "{% for s in steps %}{{ s }}{% endfor %}"}),
        ir.Loop(id="l", body=body, until="true"),
    ):
        assert reads(everything).pick_steps({"split": 1}) == {"split": 1}


def test_a_batch_too_big_for_one_history_is_refused_where_it_is_written(tmp_path):
    with pytest.raises(SpecError) as refused:
        load(str(write_spec(tmp_path, big_map(5, batch=900))), given_params=["items"])
    assert str(refused.value).startswith(f"{tmp_path / 'spec.yaml'}:11:")
    assert "map.batch: Input should be less than or equal to 500" in str(refused.value)
    assert "hint: use a whole number of at most 500" in str(refused.value)
