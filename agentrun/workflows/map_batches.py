"""A map over a list longer than its batch: the elements run in batches, each a child workflow
(AgentRunBatch, `workflows.batch_run`) with an id of its own, `<run id>/<map key>/batch-<n>`.

No history holds more than a batch's events: the run's holds a few per batch. A worker that
restarts finds each finished batch's result in the run's history and starts none of them again.
At most `concurrency` elements are in flight: each batch runs `min(concurrency, batch)` at a time,
and as many batches are open as that allows. Under a budget one batch is open at a time, so each
starts from everything spent before it. The run keeps a summary of the elements (`RunState.maps`)
and one row for them all; the batches keep a row and an output per element.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

from agentrun.lang import ir
from agentrun.models.contract import BATCH_WORKFLOW, MapSummary, Note, TaskState, batch_id
from agentrun.workflows import batching, metrics, notes, sizes
from agentrun.workflows.batching import BATCH_TOO_BIG, ELEMENT_FAILED, BatchInput, BatchResult
from agentrun.workflows.budgets import BudgetExceeded
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.map_summary import Tally

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import RunKey, Scope

# Runs recorded before batches ran every element in the run's own history.
MAP_BATCHES = "map-batches"
MAX_OPEN = 500  # batches open at once; Temporal allows 2,000 pending child workflows per run
# Runs recorded before people's notes (`say`) reached a batch's prompts handed their batches none.
NOTES_TO_BATCHES = "notes-to-batches"


@dataclass(frozen=True)
class Part:
    """Elements of one batch handed to one child workflow: all of them, or (part 2, 3, …) those a
    paused budget stopped."""

    batch: int
    part: int
    indexes: list[int]


class Batched:
    def __init__(self, engine: Runtime, node: ir.Map, scope: Scope, items: list[Any]):
        assert scope.key is not None
        self.engine, self.node, self.scope, self.items = engine, node, scope, items
        self.key: RunKey = scope.key
        state = engine.state
        previous = state.maps.get(str(self.key))
        run = previous.run + 1 if previous else 1  # a loop's next round, a retry of the map
        self.reads = batching.reads(node.body)
        self.over = batching.steps_read(node.over)
        inner = [n.id for n in ir.walk(node.body) if n.budget is not None]
        self.agents = {n.agent for n in ir.walk(node.body) if isinstance(n, ir.Task)}
        self.note_steps = {str(self.key), *(n.id for n in ir.walk(node.body))}
        self.budget_steps = [*scope.budgets, *inner]
        self.budgeted = state.budget is not None or bool(self.budget_steps)
        self.open = 1 if self.budgeted else max(1, min(node.concurrency // node.batch, MAX_OPEN))
        self.concurrency = min(node.concurrency, node.batch)
        self.results: list[Any] = [None] * len(items)
        self.errors: list[dict[str, Any]] = []  # elements that failed under best_effort
        summary = MapSummary(
            key=str(self.key),
            row=f"{self.key}[*]",
            run=run,
            total=len(items),
            batch=node.batch,
            batches=-(-len(items) // node.batch),
            children=f"{state.run_id}/{self.key}" + (f".{run}" if run > 1 else ""),
            counts={"pending": len(items)},
        )
        state.add_map(summary)
        self.tally = Tally(state, summary, self._row(summary))
        plan = engine.inp.plan.model_copy(update={"root": node.body, "warnings": [], "memory": {}})
        params = self.reads.pick_params(engine.inp.params)
        self.run_input = engine.inp.model_copy(update={"plan": plan, "params": params})

    def _row(self, summary: MapSummary) -> TaskState:
        """The one row that stands for the elements, where the body's row was."""
        body = self.node.body
        agent = body.agent if isinstance(body, ir.Task) else body.call.provider if isinstance(body, ir.Provider) else ""
        row = TaskState(
            id=summary.row,
            title=f"{body.label} × {summary.total}",
            kind=body.kind,
            agent=agent,
            status="running",
            started_at=workflow.now(),
        )
        state = self.engine.state
        state.expand(body.id, [row])
        state.add_row(row)
        return row

    async def run(self) -> tuple[list[Any], list[dict[str, Any]], str]:
        """The results in the elements' order, the elements that failed under best_effort, and the
        run key of the row standing for them."""
        row = self.tally.row
        try:
            await self._batches()
        except TaskFailed as exc:
            row.mark("failed", exc.message)
            raise
        except asyncio.CancelledError:
            row.mark("cancelled")
            raise
        finally:
            row.end_at(workflow.now())
            self.tally.mark_taint()
            self._dropped_note()
            notes.release(self.engine.state, f"{self.tally.summary.children}/")
        row.mark("completed")
        self.engine.ran_under(str(self.key), row.id)
        return self.results, sorted(self.errors, key=lambda e: e["index"]), row.id

    async def _batches(self) -> None:
        size, total = self.node.batch, len(self.items)
        batches = range(self.tally.summary.batches)
        queue = deque(Part(b, 1, list(range(b * size, min((b + 1) * size, total)))) for b in batches)
        running: dict[asyncio.Future, Part] = {}
        try:
            while queue or running:
                while queue and len(running) < self.open:
                    part = queue.popleft()
                    await self._within_budget(part)
                    running[asyncio.ensure_future(self._child(part))] = part
                done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: (running[f].batch, running[f].part)):
                    part = running.pop(fut)
                    later = self._take(part, fut.result())
                    if later is not None:
                        queue.appendleft(later)
        finally:
            await self._stop(running)

    def _take(self, part: Part, result: BatchResult) -> Part | None:
        """Count a batch's result; the part still to run, if a paused budget stopped it."""
        for index, value in zip(part.indexes, result.results, strict=False):
            self.results[index] = value
        notes.take_back(self.engine.state, result.said)
        failed = result.failed.key if result.failed else None
        for index, note in zip(part.indexes, result.notes, strict=False):
            if note.status == "failed" and note.key != failed:
                self.errors.append({"index": index, "error": note.error})
        self.tally.add(result)
        summary = self.tally.summary
        done = summary.total - summary.counts.get("pending", 0)
        workflow.set_current_details(
            f"Running **{self.node.label}**: {done} of {summary.total} elements, "
            f"{summary.batches_done} of {summary.batches} batches done"
        )
        if result.failed is not None:
            raise TaskFailed(result.failed.key, result.failed.error)
        if result.deferred:
            later = Part(part.batch, part.part + 1, result.deferred)
            summary.split(part.batch, later.part)
            return later
        return None

    async def _stop(self, running: dict[asyncio.Future, Part]) -> None:
        """Cancel the batches still open (the map failed or was cancelled); count what they spent."""
        for fut in running:
            fut.cancel()
        if running:
            await workflow.wait(list(running))
        for fut in sorted(running, key=lambda f: (running[f].batch, running[f].part)):
            if not fut.cancelled() and fut.exception() is None:
                self.tally.add(fut.result())
                notes.take_back(self.engine.state, fut.result().said)

    async def _within_budget(self, part: Part) -> None:
        """Wait while a budget in reach that pauses is spent, as before a prompt."""
        if not self.budgeted:
            return
        try:
            await self.engine.budgets.wait_while_paused(self.budget_steps)
        except BudgetExceeded as exc:
            metrics.failed("budget")
            raise TaskFailed(self._element(part.indexes[0]), exc.message) from None

    async def _child(self, part: Part) -> BatchResult:
        child = batch_id(self.tally.summary.children, part.batch, part.part)
        inp = self._input(part, self._hand(child))
        first, last = part.indexes[0], part.indexes[-1]
        size = sizes.payload_bytes(inp)
        limit = sizes.sent_limit(size)
        if limit is not None:
            raise TaskFailed(
                self._element(first),
                f"the batch of elements {first}–{last} with what they read is {sizes.megabytes(size)}, over the "
                f"{sizes.megabytes(limit)} a run may send in one value; give the map a smaller batch (batch: N)",
            )
        again = f", part {part.part}" if part.part > 1 else ""
        try:
            return await workflow.execute_child_workflow(
                BATCH_WORKFLOW,
                inp,
                id=child,
                result_type=BatchResult,
                static_summary=f"{self.node.body.label}: elements {first}–{last} of {len(self.items)}{again}",
            )
        except ChildWorkflowError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type in (ELEMENT_FAILED, BATCH_TOO_BIG) and cause.details:
                result = BatchResult.model_validate(cause.details[0])
                if cause.type == ELEMENT_FAILED:
                    return result
                self.tally.add(result)
            raise TaskFailed(self._element(first), f"its batch {child} failed: {_reason(exc)}") from None

    def _hand(self, child: str) -> list[Note]:
        """The notes waiting for a prompt of the map (or of any step), handed to the batch starting
        now: one batch carries each, so two batches open at once never both deliver it."""
        state = self.engine.state
        if not state.notes or not workflow.patched(NOTES_TO_BATCHES):
            return []
        return [note.model_copy(update={"handed_to": ""}) for note in notes.hand(state, child, self.note_steps)]

    def _input(self, part: Part, handed: list[Note]) -> BatchInput:
        engine, state = self.engine, self.engine.state
        steps, memory = self.reads.pick_steps(state.steps), self.reads.pick_memory(state.memory)
        read = {*self.over, *steps, *memory}
        return BatchInput(
            run=self.run_input,
            run_id=state.run_id,
            map_id=self.key.node,
            map_elements=list(self.key.elements),
            batch=part.batch,
            part=part.part,
            indexes=part.indexes,
            items=[self.items[i] for i in part.indexes],
            total=len(self.items),
            concurrency=self.concurrency,
            best_effort=self.node.error_strategy == "best_effort",
            outcomes=self.node.outcomes,
            values=dict(self.scope.values),
            derived_from=self.over,
            budgets=list(self.scope.budgets),
            memory=memory,
            steps=steps,
            human=dict(state.human),
            taint={k: mark for k, mark in state.taint.items() if k in read},
            budget=state.budget,
            step_budgets={s: state.step_budgets[s] for s in self.budget_steps if s in state.step_budgets},
            spent=state.run_usage(),
            step_usage={s: state.step_usage[s] for s in self.budget_steps if s in state.step_usage},
            transcripts={a: t for a, t in engine.conversation.transcripts.items() if a in self.agents},
            notes=handed,
        )

    def _element(self, index: int) -> str:
        return str(self.key.element(index))

    def _dropped_note(self) -> None:
        summary = self.tally.summary
        if summary.notes_dropped:
            self.engine.state.warn(
                f"{summary.key}: {summary.notes_dropped} more warning(s) and error(s) of its elements are kept in "
                f"its batches (agentrun status {self.engine.state.run_id} --elements {summary.key})"
            )


def _reason(exc: ChildWorkflowError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause) if cause is not None else str(exc)
