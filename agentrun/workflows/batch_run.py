"""AgentRunBatch: a batch of a long map's elements, run as a child workflow of the run.

It runs the map's body once per element, at most `concurrency` at a time, with the run's own
interpreter, so each element is asked, checked, retried and recorded as it would be in the run
(same run keys, `score[412]`). Its history holds this batch's events only. It hands back the
results in the elements' order, a note per element and what they spent; its own state (the `state`
query, and its memo once it ends) keeps every element's row and output, for
`agentrun status RUN --elements MAP` to page through.

A budget is checked as in the run: the batch starts from what the run had spent. A budget that
fails fails the prompt; one that pauses hands the elements not done back to the run
(`BatchResult.deferred`), which pauses and asks a person, then starts a batch for them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from agentrun.models import contract
from agentrun.models.calls import Usage
from agentrun.models.contract import ElementNote, ModelUsage, RunState, TaskStatus
from agentrun.workflows import sizes
from agentrun.workflows.batching import (
    BATCH_TOO_BIG,
    ELEMENT_FAILED,
    MAX_NOTES,
    BatchInput,
    BatchResult,
    BudgetReached,
    Spent,
    element_input,
    element_rows,
)
from agentrun.workflows.budgets import Budgets
from agentrun.workflows.conversation import Conversation
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.humans import Humans
from agentrun.workflows.interpreter import Interpreter
from agentrun.workflows.reuse import Reuse
from agentrun.workflows.saga import Saga
from agentrun.workflows.scope import Scope

# What a batch's state keeps of each element's output, so that a full batch fits in one payload;
# the whole output goes back to the run in the batch's results.
ELEMENT_OUTPUT_CHARS = 8_000


class BatchState(RunState):
    """A batch's state: the run's shape, each element's output cut to ELEMENT_OUTPUT_CHARS."""

    def finish(self, task_id: str, status: TaskStatus, now: datetime, output: str = "", error: str = "") -> None:
        super().finish(task_id, status, now, output=output, error=error)
        if task_id in self.outputs:
            self.outputs[task_id] = self.final_output = self.outputs[task_id][:ELEMENT_OUTPUT_CHARS]


@dataclass
class Outcome:
    """How the elements went, by position in the batch."""

    size: int
    results: dict[int, Any] = field(default_factory=dict)
    deferred: list[int] = field(default_factory=list)
    failure: tuple[int, TaskFailed] | None = None
    errors: dict[int, str] = field(default_factory=dict)  # failed under best_effort: the others went on
    reached: str = ""  # the budget a deferred element reached
    cancelled: bool = False

    @property
    def going(self) -> bool:
        return self.failure is None and not self.reached


@workflow.defn(name=contract.BATCH_WORKFLOW)
class AgentRunBatch:
    @workflow.init
    def __init__(self, inp: BatchInput) -> None:
        self.activities_scheduled = 0  # numbers the activity ids Temporal Web shows
        self.batch_state = _state(inp)

    @workflow.run
    async def run(self, inp: BatchInput) -> BatchResult:
        state = self.batch_state
        state.start(workflow.now())
        budgets = Budgets(state, _reached)
        conversation = Conversation(inp.run, state, budgets)
        conversation.transcripts = {agent: list(turns) for agent, turns in inp.transcripts.items()}
        # No person is asked in a batch (spec.check refuses gates in a map's body): Humans only
        # completes the interpreter.
        # A batch records no step log: a fork of the run runs a batched map's elements again.
        reuse = Reuse(state, None, recording=False)
        engine = Interpreter(
            inp.run, state, set(), Humans(state, state.settle), Saga(state), budgets, conversation, reuse
        )
        outcome = Outcome(len(inp.indexes))
        try:
            await _run_elements(engine, inp, outcome)
        except asyncio.CancelledError:
            outcome.cancelled = True  # the run was cancelled or stopped the map: say what was spent
        return self._ended(inp, outcome)

    @workflow.query(name=contract.STATE)
    def query_state(self) -> RunState:
        return self.batch_state

    def _ended(self, inp: BatchInput, outcome: Outcome) -> BatchResult:
        state = self.batch_state
        result = _result(inp, state, outcome)
        if outcome.reached:
            state.warn(f"{len(outcome.deferred)} element(s) left for the run: {outcome.reached}")
        status = "cancelled" if outcome.cancelled else "failed" if outcome.failure else "completed"
        state.move(status)
        state.ended(workflow.now())
        workflow.set_current_details(f"Batch **{status}**: {len(outcome.results)} of {len(inp.indexes)} elements done")
        workflow.upsert_memo({"state": state})
        if outcome.failure is not None:
            _, exc = outcome.failure
            raise ApplicationError(exc.message, _without_results(result), type=ELEMENT_FAILED, non_retryable=True)
        size = sizes.payload_bytes(result)
        limit = sizes.sent_limit(size)
        if limit is not None:
            raise ApplicationError(
                f"the results of its {len(inp.indexes)} elements are {sizes.megabytes(size)} together, over the "
                f"{sizes.megabytes(limit)} a run may send in one value; give the map a smaller "
                "batch (batch: N) or its elements shorter outputs",
                _without_results(result),
                type=BATCH_TOO_BIG,
                non_retryable=True,
            )
        return result


async def _reached(gate: str, message: str) -> bool:
    """A budget that pauses is spent: only the run can ask a person, so the element stops here."""
    raise BudgetReached(message)


def _state(inp: BatchInput) -> BatchState:
    plan, body = inp.run.plan, inp.run.plan.root
    rows = {row.id: row for row in element_rows(body, inp.key, inp.indexes)}
    return BatchState(
        run_id=inp.run_id,
        spec=plan.name,
        dialect=plan.dialect,
        traits=plan.traits,
        budget=inp.budget,
        step_budgets=dict(inp.step_budgets),
        iteration_count=inp.spent.calls,
        usage=Usage(input_tokens=inp.spent.input_tokens, output_tokens=inp.spent.output_tokens),
        total_cost_usd=inp.spent.cost_usd,
        step_usage={step: used.model_copy() for step, used in inp.step_usage.items()},
        memory=dict(inp.memory),
        steps=dict(inp.steps),
        human=dict(inp.human),
        taint=dict(inp.taint),
        tasks=rows,
        notes=list(inp.notes),
        constants=plan.constants,
    )


async def _run_elements(engine: Interpreter, inp: BatchInput, outcome: Outcome) -> None:
    """Each element's run of the body, at most `concurrency` at a time. The first that fails stops
    the batch, as it fails the map; one that reaches a pausing budget stops new ones starting."""
    body = inp.run.plan.root
    key = inp.key
    base = Scope(key=key, values=inp.values, budgets=tuple(inp.budgets))
    running: dict[asyncio.Future, int] = {}
    started = 0
    try:
        for position, (index, item) in enumerate(zip(inp.indexes, inp.items, strict=True)):
            while len(running) >= inp.concurrency and outcome.going:
                await _collect(running, outcome, inp)
            if not outcome.going:
                break
            given = element_input(inp.outcomes, inp.values.get("input"), item, index, inp.total)
            element = base.with_values(item=item, index=index, input=given).derived(inp.derived_from)
            running[asyncio.ensure_future(engine.run(body, element, key.element(index)))] = position
            started = position + 1
            workflow.set_current_details(f"Running elements of **{body.label}**: {len(outcome.results)} done")
        while running and outcome.failure is None:
            await _collect(running, outcome, inp)
    finally:
        await _stop(running, outcome, inp.best_effort)
    if outcome.reached:
        outcome.deferred = sorted([*outcome.deferred, *range(started, outcome.size)])


async def _collect(running: dict[asyncio.Future, int], outcome: Outcome, inp: BatchInput) -> None:
    done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
    for fut in sorted(done, key=lambda f: running[f]):  # a set's order is not the same on replay
        _settle(fut, running.pop(fut), outcome, inp.best_effort)


def _settle(fut: asyncio.Future, position: int, outcome: Outcome, best_effort: bool) -> None:
    if fut.cancelled():
        return
    exc = fut.exception()
    if isinstance(exc, BudgetReached):
        outcome.deferred.append(position)
        outcome.reached = outcome.reached or exc.message
    elif isinstance(exc, TaskFailed) and best_effort:
        outcome.errors[position] = exc.message
    elif isinstance(exc, TaskFailed):
        outcome.failure = outcome.failure or (position, exc)
    elif exc is not None:
        raise exc
    else:
        outcome.results[position] = fut.result()


async def _stop(running: dict[asyncio.Future, int], outcome: Outcome, best_effort: bool) -> None:
    """Cancel the elements still running; keep what the ones that ended meanwhile gave."""
    for fut in running:
        fut.cancel()
    if running:
        await workflow.wait(list(running))
    for fut in sorted(running, key=lambda f: running[f]):
        _settle(fut, running[fut], outcome, best_effort)


def _result(inp: BatchInput, state: RunState, outcome: Outcome) -> BatchResult:
    key = inp.key
    keys = [str(key.element(i)) for i in inp.indexes]
    notes = [_note(state, k, p, outcome) for p, k in enumerate(keys)]
    marked = [state.taint[k] for k in keys if k in state.taint]
    lines = [*state.warnings, *state.errors]
    failed = outcome.failure
    return BatchResult(
        results=[outcome.results.get(p) for p in range(len(keys))],
        notes=notes,
        deferred=[inp.indexes[p] for p in outcome.deferred],
        failed=notes[failed[0]] if failed else None,
        cancelled=outcome.cancelled,
        spent=_spent(inp, state),
        warnings=state.warnings[:MAX_NOTES],
        errors=state.errors[: max(MAX_NOTES - len(state.warnings), 0)],
        dropped=max(len(lines) - MAX_NOTES, 0),
        tainted_count=len(marked),
        taint_source=marked[0].source if marked else "",
        taint_from=list(dict.fromkeys(k for mark in marked for k in mark.derived_from))[:MAX_NOTES],
        said=state.notes,
    )


def _note(state: RunState, key: str, position: int, outcome: Outcome) -> ElementNote:
    """The element as its row says, where its body is a leaf; else from how its run ended. One that
    gave a value completed (its row may say failed: a fallback then made it) or was skipped."""
    row = state.tasks[key]
    status: TaskStatus = row.status
    error = row.error
    if position in outcome.results:
        status = "skipped" if status == "skipped" else "completed"
        error = error if status == "skipped" else ""
    elif outcome.failure is not None and outcome.failure[0] == position:
        status, error = "failed", outcome.failure[1].message
    elif position in outcome.errors:
        status, error = "failed", outcome.errors[position]
    elif position in outcome.deferred:
        status, error = "pending", ""
        row.mark("pending")
    elif status in ("running", "waiting"):
        status = "cancelled"
    return ElementNote(
        key=key,
        status=status,
        duration_s=row.duration_s,
        retries=max(row.attempts - 1, 0) + row.retries,
        output_size=row.output_size,
        error=error,
    )


def _spent(inp: BatchInput, state: RunState) -> Spent:
    """What the batch spent beyond what the run had when it started."""
    by_step = {step: used.minus(inp.step_usage.get(step, ModelUsage())) for step, used in state.step_usage.items()}
    return Spent(
        prompts=state.iteration_count - inp.spent.calls,
        usage=Usage(
            input_tokens=state.usage.input_tokens - inp.spent.input_tokens,
            output_tokens=state.usage.output_tokens - inp.spent.output_tokens,
        ),
        cost_usd=state.total_cost_usd - inp.spent.cost_usd,
        by_model=dict(state.usage_by_model),
        by_step=by_step,
        retries=state.retry_count,
    )


def _without_results(result: BatchResult) -> BatchResult:
    """A failed batch's report for the run: its results are not needed, and may be too big."""
    return result.model_copy(update={"results": []})
