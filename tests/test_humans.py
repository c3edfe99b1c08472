"""Humans in the loop, saga compensation, budgets and the run-state model, on the real AgentRun
workflow and a fake OpenAI-compatible server. Plans are built as IR here (tests/runs.py), so these
tests pin the engine's behaviour whatever language a spec was written in.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError

from agentrun.lang import ir
from agentrun.models import contract
from agentrun.models.contract import InvalidTransition, RunInput, RunState, RunStatus
from tests.conftest import TEST_QUEUE, run_id, sigkill, start_worker, until, write_spec
from tests.fakes.openai_server import FakeOpenAI
from tests.runs import answer, approval, finish, open_gate, plan, run_spec, state_of, task

pytestmark = pytest.mark.usefixtures("worker")


def undo(tid: str, prompt: str, agent: str = "undo", attempts: int = 1) -> ir.Task:
    return ir.Task(
        id=f"{tid}.compensate",
        agent=agent,
        prompt=prompt,
        protocol="plain",
        retry=ir.Retry(attempts=attempts, backoff="none", delay_s=0),
    )


async def start(client: Client, the_plan: ir.Plan, **options: Any) -> WorkflowHandle:
    agents = {leaf.agent: f"openai:{leaf.agent}" for leaf in _tasks(the_plan)}
    inp = RunInput(plan=the_plan, workdir=".", default_agent="openai:default", agents=agents, heartbeat_s=5, **options)
    return await client.start_workflow("AgentRun", inp, id=run_id("h"), task_queue=TEST_QUEUE)


def _tasks(the_plan: ir.Plan) -> list[ir.Task]:
    found = [n for n in the_plan.walk() if isinstance(n, ir.Task)]
    return found + [n.compensation for n in the_plan.walk() if isinstance(n.compensation, ir.Task)]


async def accepted_updates(handle: WorkflowHandle) -> int:
    events = [e async for e in handle.fetch_history_events()]
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in events)


async def test_an_approval_gate_waits_then_the_task_runs_and_reads_the_answer(client, llm: FakeOpenAI):
    llm.by_model.update({"plan": "the plan", "build": "built"})
    handle = await start(
        client,
        plan(
            task("plan", "Plan it."),
            task("build", "Build {{steps.plan.output}} ({{human.build}}).", gate=approval("build")),
        ),
    )
    state = await open_gate(handle, "build")
    assert state.status == "waiting" and state.waiting_for == "human_approval"
    assert state.waiting_since == state.gates["build"].opened_at
    assert llm.prompts_for("plan") == ["Plan it."] and llm.prompts_for("build") == []
    await until_listed(client, handle.id, "human_approval")
    given = await answer(handle, "build", "approve", "looks fine")
    final = await finish(client, handle)
    assert final.status == "completed", final.errors
    assert llm.prompts_for("build") == ["Build the plan (approve)."]
    recorded = final.gates["build"]
    assert (recorded.status, recorded.answer.value, recorded.answer.comment, recorded.answer.by) == (
        "answered",
        "approve",
        "looks fine",
        "ana",
    )
    assert recorded.answer.at == given.at and isinstance(given.at, datetime)
    assert final.human == {"build": "approve"} and final.waiting_for is None
    assert final.visited_nodes == ["workflow:h", "plan", "build"]


async def until_listed(client: Client, rid: str, waiting_for: str) -> None:
    """Temporal Web's list: the run shows up under AgentRunWaitingFor (visibility lags a little)."""
    query = f'WorkflowId="{rid}" AND AgentRunWaitingFor="{waiting_for}"'
    for _ in range(100):
        if [wf async for wf in client.list_workflows(query)]:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{rid} is not listed as waiting for {waiting_for}")


async def test_update_validators_refuse_with_a_reason_and_write_nothing(client, llm):
    question = ir.Human(id="size", prompt="Which size?", choices=["S", "M"], step=True)
    handle = await start(client, plan(question, task("make", "Make size {{human.size}}.")))
    await open_gate(handle, "size")
    refusals = []
    for gate, value in (("nosuch", "S"), ("size", "XL"), ("size", " ")):
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await answer(handle, gate, value)
        refusals.append(caught.value.cause.message)
    assert refusals[0] == f"run {handle.id} has no open gate 'nosuch' (open: size)"
    assert refusals[1] == "'XL' is not an answer to gate 'size': choose one of S, M"
    assert refusals[2] == "' ' is not an answer to gate 'size': choose one of S, M"
    with pytest.raises(WorkflowUpdateFailedError) as budget:
        await handle.execute_update(contract.RAISE_BUDGET, contract.BudgetInput(tokens=10), result_type=ir.Budget)
    assert "has no paused budget 'budget'" in budget.value.cause.message
    assert await accepted_updates(handle) == 0
    await answer(handle, "size", "M")
    with pytest.raises(WorkflowUpdateFailedError) as again:
        await answer(handle, "size", "S")
    assert again.value.cause.message.startswith("gate 'size' was already answered (M) by ana at ")
    final = await finish(client, handle)
    assert final.status == "completed" and llm.prompts_for("make") == ["Make size M."]
    assert final.steps["size"]["output"] == "M"
    assert await accepted_updates(handle) == 1


async def test_a_rejection_fails_the_run_or_skips_the_step_the_spec_says(client, llm):
    handle = await start(client, plan(task("deploy", "Deploy.", gate=approval("deploy")), task("after", "After.")))
    await open_gate(handle, "deploy")
    await answer(handle, "deploy", "reject", "not today")
    failed = await finish(client, handle)
    assert failed.status == "failed"
    assert failed.errors == ["deploy: rejected at gate 'deploy' by ana: not today"]
    assert llm.prompts_for("deploy") == [] and llm.prompts_for("after") == []

    handle = await start(
        client, plan(task("extra", "Extra.", gate=approval("extra", on_reject="skip")), task("after", "After."))
    )
    await open_gate(handle, "extra")
    await answer(handle, "extra", "reject")
    skipped = await finish(client, handle)
    assert skipped.status == "completed" and skipped.tasks["extra"].status == "skipped"
    assert llm.prompts_for("extra") == [] and llm.prompts_for("after") == ["After."]


async def test_compensations_run_in_reverse_order_after_a_failure_at_step_n(client, llm):
    llm.by_model.update({"a": "A-done", "b": "B-done", "c": "C-done", "d": "", "undo": "undone"})
    steps = [task(s, f"Do {s}.", compensation=undo(s, f"Undo {s}: {{{{output}}}}")) for s in "abc"]
    handle = await start(client, plan(*steps, task("d", "Do d.")))
    final = await finish(client, handle)
    assert llm.prompts_for("undo") == ["Undo c: C-done", "Undo b: B-done", "Undo a: A-done"]
    assert final.status == "compensated"
    assert [(c.action_id, c.status) for c in final.compensations] == [
        ("c", "completed"),
        ("b", "completed"),
        ("a", "completed"),
    ]
    assert final.compensation_stack == []
    assert final.tasks["c.compensate"].status == "completed" and final.tasks["c.compensate"].kind == "compensation"
    assert final.errors == ["d: the agent returned an empty output"]
    assert final.final_output == "C-done"  # what the run made, not what undoing it replied


async def test_a_failed_compensation_is_retried_then_named_and_the_rest_still_run(client, llm):
    llm.by_model.update({"a": "A", "b": "B", "c": "", "undo": "ok", "undo-b": ""})
    steps = [
        task("a", "Do a.", compensation=undo("a", "Undo a.")),
        task("b", "Do b.", compensation=undo("b", "Undo b.", agent="undo-b", attempts=2)),
        task("c", "Do c."),
    ]
    final = await finish(client, await start(client, plan(*steps)))
    assert llm.prompts_for("undo-b") == ["Undo b.", "Undo b."] and llm.prompts_for("undo") == ["Undo a."]
    assert final.status == "failed"
    assert [(c.action_id, c.status) for c in final.compensations] == [("b", "failed"), ("a", "completed")]
    assert final.errors[-1] == "compensations failed: b.compensate"


async def test_a_token_budget_fails_the_run_before_the_next_prompt(client, llm):
    llm.by_model.update({"w": "one two three four five six seven eight nine ten"})
    steps = [task(f"s{i}", "Write ten words please.", agent="w") for i in range(1, 5)]
    final = await finish(client, await start(client, plan(*steps, budget=ir.Budget(tokens=25))))
    # each call: 4 prompt words + 10 reply words = 14 tokens, so the third prompt would go over
    assert len(llm.prompts_for("w")) == 2
    assert final.total_tokens_used == 28 and final.status == "failed"
    assert final.errors == ["s3: budget exceeded: 28 tokens used, over the budget of 25"]


async def test_a_prompt_budget_is_seed_001s_max_iterations(client, llm):
    llm.by_model.update({"w": "done"})
    steps = [task(f"s{i}", "Go.", agent="w") for i in range(1, 5)]
    final = await finish(client, await start(client, plan(*steps, budget=ir.Budget(iterations=3))))
    assert len(llm.prompts_for("w")) == 3 and (final.iteration_count, final.max_iterations) == (3, 3)
    assert final.errors == ["s4: budget exceeded: 3 prompts sent, as many as the budget allows"]


async def test_a_paused_budget_waits_for_a_person_to_raise_it(client, llm):
    llm.by_model.update({"w": "one two three four five six seven eight nine ten"})
    steps = [task(f"s{i}", "Write ten words please.", agent="w") for i in range(1, 4)]
    handle = await start(client, plan(*steps, budget=ir.Budget(tokens=20, on_exceeded="pause")))
    state = await open_gate(handle, "budget")
    assert state.status == "waiting" and state.waiting_for == "resource_limit"
    assert state.gates["budget"].prompt == "budget exceeded: 28 tokens used, over the budget of 20"
    with pytest.raises(WorkflowUpdateFailedError) as low:
        await handle.execute_update(contract.RAISE_BUDGET, contract.BudgetInput(tokens=28), result_type=ir.Budget)
    assert low.value.cause.message == "28 tokens is not above the 28 already used"
    with pytest.raises(WorkflowUpdateFailedError) as approve:
        await answer(handle, "budget", "approve")
    assert "is a paused budget: raise it with `python -m client budget" in approve.value.cause.message
    raised = await handle.execute_update(contract.RAISE_BUDGET, contract.BudgetInput(tokens=100), result_type=ir.Budget)
    assert raised.tokens == 100
    final = await finish(client, handle)
    assert final.status == "completed" and len(llm.prompts_for("w")) == 3
    assert final.budget.tokens == 100 and final.gates["budget"].answer.value == "raised to 100 tokens"


async def test_a_step_budget_counts_only_its_own_agents_and_costs_come_from_the_price_table(client, llm):
    llm.by_model.update({"cheap": "a b c d e f", "dear": "a b c d e f"})
    inner = ir.Sequence(
        id="research",
        step=True,
        budget=ir.Budget(usd=0.000005),
        children=[task("r1", "Go one.", agent="dear"), task("r2", "Go two.", agent="dear")],
    )
    prices = {"cheap": ir.Price(input=1.0, output=2.0), "dear": ir.Price(input=1.0, output=1.0)}
    the_plan = plan(task("warm", "Warm up.", agent="cheap"), inner, prices=prices)
    final = await finish(client, await start(client, the_plan))
    assert llm.prompts_for("dear") == ["Go one."]
    assert final.errors == ["r2: budget exceeded in step research: $0.000008 spent, over the budget of $0.000005"]
    assert final.usage_by_model["cheap"].cost_usd == pytest.approx((2 * 1.0 + 6 * 2.0) / 1e6)
    assert final.step_usage["research"].cost_usd == pytest.approx((2 + 6) / 1e6)
    assert final.total_cost_usd == pytest.approx(14e-6 + 8e-6)
    assert final.tasks["r1"].cost_usd == pytest.approx(8e-6)


async def test_cancel_with_rollback_undoes_finished_steps_and_ends_cancelled(client, llm):
    llm.by_model.update({"book": "booking 42", "undo": "cancelled booking"})
    steps = [
        task("book", "Book.", compensation=undo("book", "Cancel {{output}}.")),
        task("pay", "Pay.", gate=approval("pay")),
    ]
    handle = await start(client, plan(*steps))
    state = await open_gate(handle, "pay")
    assert [e.action_id for e in state.compensation_stack] == ["book"]
    assert await handle.execute_update(contract.ROLLBACK, result_type=int) == 1
    await handle.cancel()
    final = await finish(client, handle)
    assert final.status == "cancelled"
    assert llm.prompts_for("undo") == ["Cancel booking 42."] and llm.prompts_for("pay") == []
    assert [(c.action_id, c.status) for c in final.compensations] == [("book", "completed")]


async def test_cancel_reaches_the_running_agent(client, llm):
    llm.by_model.update({"slow": "never seen"})
    llm.hold("slow")
    handle = await start(client, plan(task("slow", "Think long.")))
    await until(lambda: llm.in_flight("slow") == 1)
    await handle.cancel()
    final = await finish(client, handle)
    assert final.status == "cancelled" and final.tasks["slow"].status == "cancelled"
    await until(lambda: any(r.abandoned for r in llm.requests_for("slow")))
    llm.release()


async def test_data_from_a_provider_is_tainted_and_so_is_what_is_derived_from_it(client, llm):
    fetch = ir.Provider(
        id="fetch",
        step=True,
        store_as="page",
        call=ir.ProviderSpec(provider="shell", method="run", params={"command": "echo outside"}),
    )
    the_plan = plan(
        fetch, task("sum", "Sum up {{steps.fetch.output}}."), task("plain", "Say hi."), task("again", "Use {{page}}.")
    )
    final = await finish(client, await start(client, the_plan))
    assert final.status == "completed", final.errors
    assert final.taint["fetch"].source == "provider:shell"
    assert final.taint["sum"].derived_from == ["fetch"]
    assert final.taint["again"].derived_from == ["page"] and "plain" not in final.taint


def test_status_moves_only_along_the_lifecycle():
    state = RunState()
    state.move("running")
    state.move("waiting")
    state.move("running")
    state.move("failed")
    state.move("compensated")
    moves: list[tuple[RunStatus, RunStatus]] = [
        ("completed", "running"),
        ("pending", "waiting"),
        ("cancelled", "completed"),
    ]
    for start_at, bad in moves:
        with pytest.raises(InvalidTransition, match=f"from {start_at} to {bad}"):
            RunState(status=start_at).move(bad)


async def test_an_answer_after_the_worker_was_killed_continues_the_run_exactly_once(client, address, llm):
    """kill -9 of the only worker while the run waits on a person; a new worker takes the answer."""
    llm.by_model.update({"before": "prepared", "after": "shipped"})
    the_plan = plan(task("before", "Prepare."), task("after", "Ship {{steps.before.output}}.", gate=approval("ship")))
    agents = {a: f"openai:{a}" for a in ("before", "after")}
    inp = RunInput(plan=the_plan, workdir=".", default_agent="openai:default", agents=agents, heartbeat_s=5)
    first = start_worker(address, "--task-queue", CRASH_QUEUE)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("kill"), task_queue=CRASH_QUEUE)
    await open_gate(handle, "ship")
    sigkill(first)
    second = start_worker(address, "--task-queue", CRASH_QUEUE)
    try:
        await answer(handle, "ship", "approve")
        final = await finish(client, handle)
    finally:
        second.terminate()
        second.wait(timeout=30)
    assert final.status == "completed", final.errors
    assert llm.prompts_for("before") == ["Prepare."] and llm.prompts_for("after") == ["Ship prepared."]
    assert await accepted_updates(handle) == 1


CRASH_QUEUE = "human-crash-tests"


async def test_a_task_tree_compensation_reads_the_output_and_its_error_status_counts(client, llm, tmp_path):
    """Task trees undo with the task's agent and protocol: COMPLETION_STATUS: ERROR is a failed undo."""
    llm.reply = lambda messages: _tree_reply(messages[-1]["content"])
    spec = write_spec(
        tmp_path,
        """
name: tree
subtasks:
  tag:
    instructions: Tag the release.
    compensate: {instructions: "Remove tag {{ output }}", max_attempts: 2}
  note:
    instructions: Write a note.
    compensate:
      provider_call: {provider: shell, method: run, params: {argv: [echo, undo-note, "{{ output }}"]}}
  publish:
    instructions: Publish.
""",
    )
    state = await run_spec(client, spec, "openai:tree")
    assert state.status == "failed"
    assert [c.action_id for c in state.compensations] == ["note", "tag"]
    assert [c.status for c in state.compensations] == ["completed", "failed"]
    removes = [r.prompt for r in llm.requests if r.prompt and r.prompt.startswith("Remove tag")]
    # The task's output is its reply without the protocol's status line.
    assert removes[0].startswith(
        "Remove tag v1\n\nWhen you have finished, end your reply with the line `COMPLETION_STATUS: COMPLETE`"
    )
    assert len(removes) == 2  # its two attempts
    assert "undo-note" in state.outputs["note.compensate"]


def _tree_reply(prompt: str) -> str:
    if prompt.startswith("Tag"):
        return "v1\nCOMPLETION_STATUS: COMPLETE"
    if prompt.startswith("Write"):
        return "noted\nCOMPLETION_STATUS: COMPLETE"
    if prompt.startswith("Remove"):
        return "cannot\nCOMPLETION_STATUS: ERROR"
    return "broken\nCOMPLETION_STATUS: ERROR"


async def test_task_tree_tasks_write_and_read_the_memory_blackboard_by_key(client, llm, tmp_path):
    llm.by_model["tree"] = lambda messages: (
        ("42" if "Count" in messages[-1]["content"] else "ok") + "\nCOMPLETION_STATUS: COMPLETE"
    )
    spec = write_spec(
        tmp_path,
        """
name: mem
subtasks:
  count: {instructions: Count the files., store_as: file_count}
  report: {instructions: "Report on {{ file_count }}."}
""",
    )
    state = await run_spec(client, spec, "openai:tree")
    assert state.status == "completed", state.errors
    # What a task writes is its reply without the protocol's status line, so the next prompt reads it plainly.
    assert state.memory == {"file_count": "42"}
    assert llm.prompts_for("tree")[1].startswith("Report on 42.")


async def test_a_run_backing_off_before_a_retry_is_retrying_with_its_last_error(client, llm):
    llm.by_model["flaky"] = ["", "fine"]
    flaky = task("flaky", "Try.", retry=ir.Retry(attempts=2, backoff="none", delay_s=3))
    handle = await start(client, plan(flaky))
    seen: list[RunState] = []

    async def retrying() -> bool:
        seen.append(await state_of(handle))
        return seen[-1].status == "retrying"

    for _ in range(100):
        if await retrying():
            break
        await asyncio.sleep(0.05)
    assert seen[-1].status == "retrying"
    assert (seen[-1].retry_count, seen[-1].last_error) == (1, "flaky: the agent returned an empty output")
    final = await finish(client, handle)
    assert final.status == "completed" and llm.prompts_for("flaky") == ["Try.", "Try."]
