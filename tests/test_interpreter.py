"""IR nodes no dialect here produces yet (parallel, selector, node retries, skip, fallback), run from Plans."""

from __future__ import annotations

import pytest

from agentrun.lang import ir
from agentrun.models.contract import RunInput
from tests.conftest import TEST_QUEUE, run_id
from tests.runs import finish

pytestmark = pytest.mark.usefixtures("worker")

OK = "command:sh -c 'cat >/dev/null; echo COMPLETION_STATUS: COMPLETE'"
SLOW = "command:sh -c 'cat >/dev/null; sleep 30; echo COMPLETION_STATUS: COMPLETE'"
FAIL = "command:sh -c 'cat >/dev/null; echo boom >&2; exit 1'"


async def _run(client, tmp_path, root: ir.Node, agents: dict[str, str]):
    plan = ir.Plan(name="ir", dialect="test", source=str(tmp_path / "ir"), spec_dir=str(tmp_path), root=root)
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent=OK, agents=agents, heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("ir"), task_queue=TEST_QUEUE)
    return await finish(client, handle)


def task(name: str, agent: str = "default", **kw) -> ir.Task:
    return ir.Task(id=name, agent=agent, prompt=f"do {name}", **kw)


async def test_parallel_wait_any_cancels_the_rest(client, tmp_path):
    root = ir.Parallel(id="p", wait="any", children=[task("fast"), task("slow", "slow")])
    state = await _run(client, tmp_path, root, {"slow": SLOW})
    assert state.status == "completed"
    assert state.tasks["fast"].status == "completed" and state.tasks["slow"].status == "cancelled"
    assert any("1 branch(es) cancelled" in w for w in state.warnings)


async def test_parallel_all_fails_when_one_branch_fails(client, tmp_path):
    root = ir.Parallel(id="p", children=[task("good"), task("bad", "bad")])
    state = await _run(client, tmp_path, root, {"bad": FAIL})
    assert state.status == "failed" and state.tasks["bad"].status == "failed"
    assert "exit" in state.tasks["bad"].error and "boom" in state.tasks["bad"].error


async def test_selector_takes_the_first_success(client, tmp_path):
    root = ir.Selector(id="s", children=[task("first", "bad"), task("second"), task("third")])
    state = await _run(client, tmp_path, root, {"bad": FAIL})
    assert state.status == "completed"
    # The failure the selector routed is not taken, not a failure of the run (words that match what happened).
    assert [t.status for t in state.tasks.values()] == ["not_taken", "completed", "pending"]


async def test_node_retries_then_skip_or_fallback(client, tmp_path):
    retry = ir.Retry(attempts=2, backoff="none", delay_s=0)
    root = ir.Sequence(
        id="r",
        children=[
            task("skipped", "bad", retry=retry, on_failure="skip"),
            task("fallen", "bad", on_failure="fallback", fallback=task("fallen.fallback")),
            task("last"),
        ],
    )
    state = await _run(client, tmp_path, root, {"bad": FAIL})
    assert state.status == "completed"
    assert [t.status for t in state.tasks.values()] == ["skipped", "not_taken", "completed", "completed"]
    warnings = " | ".join(state.warnings)
    assert "skipped: attempt 1 failed" in warnings and "skipped: failed and skipped" in warnings
    assert "falling back to fallen.fallback" in warnings
