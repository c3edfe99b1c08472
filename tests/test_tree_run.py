"""A behaviour tree walked by the engine, as its agent and its user see it: what each prompt shows,
how replies are read, `running` asked again after a durable wait, $CONST writes refused, parallel
branches at the same time, and the engine's gates, budgets and compensations on tree nodes."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.client import WorkflowFailureError

from agentrun.client.runs import fetch_state
from agentrun.lang.load import load
from agentrun.models.contract import RunInput
from tests.conftest import TEST_QUEUE, TIME_QUEUE, run_id
from tests.runs import run_spec
from tests.trees import Brain, action, composite, tree_file

pytestmark = pytest.mark.usefixtures("worker")


async def test_a_step_prompt_shows_the_values_its_text_names_and_var_writes_reach_the_blackboard(client, llm, tmp_path):
    root = composite(
        "sequence",
        "Deploy",
        action(
            "Run_Tests",
            "instruct: Run tests. Store coverage at $VAR.coverage.",
            "evaluate: $VAR.coverage > $CONST.threshold",
        ),
    )
    tree = tree_file(tmp_path, root, var={"coverage": None, "unused": 1}, const={"threshold": 80, "registry": "r"})
    brain = Brain([("instruct", "Run_Tests", "success", {"coverage": 92}), ("evaluate", "Run_Tests", True)])
    llm.reply = brain
    state = await run_spec(client, tree, "openai:tree")
    assert state.status == "completed", state.errors
    first, second = brain.prompts
    assert "Run tests. Store coverage at $VAR.coverage." in first and "- $VAR.coverage = null" in first
    assert "$VAR.unused" not in first and "$CONST.registry" not in first
    assert "- $VAR.coverage = 92\n- $CONST.threshold = 80" in second
    assert state.memory == {"coverage": 92, "unused": 1} and state.constants == {"threshold": 80, "registry": "r"}
    assert [(e.kind, e.outcome) for e in state.trace] == [
        ("instruct", "step_complete"),
        ("evaluate", "evaluation_passed"),
    ]


async def test_a_write_to_a_const_is_refused_and_fails_the_step(client, llm, tmp_path):
    tree = tree_file(tmp_path, action("Tune", "instruct: Lower the bar."), var={"x": 0}, const={"threshold": 80})
    llm.reply = json.dumps({"status": "success", "var": {"x": 1, "threshold": 10}})
    state = await run_spec(client, tree, "openai:tree")
    assert state.status == "failed"
    assert "write refused: 'threshold' is a $CONST value and read-only" in state.errors[0]
    assert state.memory == {"x": 0}, "no write of a refused answer is made"
    assert state.trace[-1].outcome == "write_refused"


async def test_a_reply_that_is_not_the_json_gets_one_reminder_then_fails_the_step(client, llm, tmp_path):
    tree = tree_file(tmp_path, composite("selector", "Try", action("A", "instruct: a"), action("B", "instruct: b")))

    def reply(messages) -> str:
        prompt = messages[-1]["content"]
        if "could not be read" in prompt:
            return "Still prose."
        return "I did it!" if "action A" in prompt else '{"status": "success"}'

    llm.reply = reply
    state = await run_spec(client, tree, "openai:tree")
    prompts = [r.prompt or "" for r in llm.requests]
    assert "action A" in prompts[0] and prompts[1].startswith("Your reply could not be read: no JSON object")
    assert "action B" in prompts[2] and len(prompts) == 3
    assert state.status == "completed"
    assert "the reply is not the step's JSON answer, twice" in state.tasks["Try/A@1"].error


async def test_parallel_branches_run_at_once_and_the_first_failure_cancels_the_rest(client, llm, tmp_path):
    root = composite("parallel", "Both", action("Slow", "instruct: slow"), action("Fails", "instruct: fails"))
    tree = tree_file(tmp_path, root)
    held = llm.hold_prompt("action Slow")
    llm.reply = lambda m: '{"status": "failure", "note": "broke"}' if "action Fails" in m[-1]["content"] else "{}"
    plan = load(str(tree))
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent="openai:tree", heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("bt"), task_queue=TEST_QUEUE)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    held.set()
    state = await fetch_state(client, handle.id)
    assert state.tasks["Both/Slow@1"].status == "cancelled"
    assert state.tasks["Both/Fails@1"].error == "the agent reported failure: broke"


async def test_gate_budget_and_compensation_work_on_tree_nodes(client, llm, tmp_path):
    root = composite(
        "sequence",
        "Ship",
        action("Build", "instruct: build", compensate="Delete the build."),
        action("Publish", "instruct: publish", approval={"prompt": "Publish?", "on_reject": "fail"}),
    )
    tree = tree_file(tmp_path, root)
    llm.reply = '{"status": "success"}'
    plan = load(str(tree))
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent="openai:tree", heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("bt"), task_queue=TEST_QUEUE)

    while not (await fetch_state(client, handle.id)).gates:
        await asyncio.sleep(0.1)
    await handle.execute_update("answer", {"gate": "Ship/Publish", "value": "reject"})
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    state = await fetch_state(client, handle.id)
    assert state.status == "compensated"
    assert [c.action_id for c in state.compensations] == ["Ship/Build"]
    undo = [r.prompt or "" for r in llm.requests if "Delete the build." in (r.prompt or "")]
    assert undo and "undo Build" in undo[0]


@pytest.mark.usefixtures("time_worker")
async def test_running_is_asked_again_after_a_durable_wait_that_doubles(time_env, llm, tmp_path):
    tree = tree_file(
        tmp_path, action("Deploy", "instruct: Roll out."), running={"wait": "30s", "max_wait": "1m", "max_asks": 5}
    )
    llm.reply = ['{"status": "running"}', '{"status": "running"}', '{"status": "running"}', '{"status": "success"}']
    plan = load(str(tree))
    inp = RunInput(
        plan=plan, workdir=str(tmp_path), default_agent="openai:tree", search_attributes=False, heartbeat_s=0
    )
    handle = await time_env.client.start_workflow("AgentRun", inp, id=run_id("bt"), task_queue=TIME_QUEUE)
    await handle.result()
    assert len(llm.requests) == 4
    history = await handle.fetch_history()
    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToSeconds()
        for e in history.events
        if e.HasField("timer_started_event_attributes")
    ]
    assert timers == [30, 60, 60], "30 s, doubled, then held at max_wait"


async def test_a_budget_on_a_tree_node_stops_the_prompt_past_it(client, llm, tmp_path):
    root = composite(
        "sequence", "Root", action("Two_Steps", "instruct: one", "instruct: two", budget={"iterations": 1})
    )
    llm.reply = '{"status": "success"}'
    state = await run_spec(client, tree_file(tmp_path, root), "openai:tree")
    assert state.status == "failed"
    assert len(llm.requests) == 1
    assert "budget" in state.errors[0] and "Root/Two_Steps@2" in state.errors[0], state.errors
