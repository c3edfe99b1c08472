"""The evaluate node, the first kind built on the node registry: a precondition on an expression."""

from __future__ import annotations

import pytest

from agentrun.lang import ir
from agentrun.models.contract import RunInput
from tests.conftest import TEST_QUEUE, run_id
from tests.runs import finish

pytestmark = pytest.mark.usefixtures("worker")


def score(value: int) -> ir.Task:
    agent = f"command:sh -c 'cat >/dev/null; echo {{\\\"score\\\": {value}}}'"
    return ir.Task(id="score", agent=agent, prompt="score it", protocol="plain", output_format="json", step=True)


def check(**extra) -> ir.Evaluate:
    return ir.Evaluate(id="good_enough", condition="{{ steps.score.output.score }} > 50", **extra)


AFTER = ir.Task(id="after", agent="command:sh -c 'cat; echo done'", prompt="carry on", protocol="plain", step=True)


async def _run(client, tmp_path, *children: ir.Node):
    root = ir.Sequence(id="workflow:e", children=list(children))
    plan = ir.Plan(name="e", dialect="test", source=str(tmp_path / "e"), spec_dir=str(tmp_path), root=root)
    # Each task names its own agent as a URI; the plan's agent ids are those URIs.
    agents = {n.agent: n.agent for n in plan.walk() if isinstance(n, ir.Task)}
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent="", agents=agents, heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("eval"), task_queue=TEST_QUEUE)
    return await finish(client, handle)


async def test_a_condition_that_holds_lets_the_run_go_on(client, tmp_path):
    state = await _run(client, tmp_path, score(80), check(), AFTER)
    assert state.status == "completed"
    assert state.steps["after"]["output"].startswith("carry on")
    assert state.visited_nodes == ["workflow:e", "score", "good_enough", "after"]


async def test_a_condition_that_fails_fails_the_node_and_nothing_after_it_runs(client, tmp_path):
    state = await _run(client, tmp_path, score(20), check(), AFTER)
    assert state.status == "failed"
    assert state.errors == ["good_enough: precondition not met: {{ steps.score.output.score }} > 50"]
    assert state.tasks["after"].status == "pending" and "after" not in state.steps


async def test_a_failed_precondition_follows_its_failure_policy(client, tmp_path):
    state = await _run(client, tmp_path, score(20), check(on_failure="skip"), AFTER)
    assert state.status == "completed"
    assert (
        "good_enough: failed and skipped: precondition not met: {{ steps.score.output.score }} > 50" in state.warnings
    )
    assert state.steps["after"]["output"].startswith("carry on")
