"""Walking a Plan: composite nodes here, leaves in `leaves.py`, plus each node's failure policy.

`scope` carries the values a node's templates see besides the run's (input, item, index, feedback).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from jinja2 import TemplateError
from temporalio import workflow

from spec import expressions, ir
from spec.render import render
from spec.rules import extract_json
from workflows import taint
from workflows.humans import GateTimedOut, Humans
from workflows.leaves import BUDGETS, Leaves, TaskFailed
from workflows.saga import Saga
from workflows.state import Answer, RunState, TaskState

Scope = dict[str, Any]


class Interpreter:
    def __init__(self, leaves: Leaves, state: RunState, skip: set[str], humans: Humans, saga: Saga):
        self.leaves, self.state, self.skip, self.humans, self.saga = leaves, state, skip, humans, saga

    async def run(self, node: ir.NodeBase, scope: Scope | None = None, *, visit: bool = True) -> Any:
        """Run `node` with its gate, retries and failure policy; `visit` False for a task-tree task's
        own work, which shares the task's id and its entry in visited_nodes."""
        scope = self._budget_scope(node, scope or {})
        if visit:
            self.state.visited_nodes.append(node.id)
        if node.gate and node.id not in self.skip and not await self._gate(node, scope):
            value, done = self._skip(node, f"not approved at gate '{node.gate.id}'; skipped"), False
        else:
            value, done = await self._attempts(node, scope)
        self._keep(node, value, done)
        return value

    def _keep(self, node: ir.NodeBase, value: Any, done: bool) -> None:
        """Where a node's value goes: steps and memory for later templates; its taint; its undo."""
        if done and not isinstance(node, (ir.Task, ir.Provider)):
            children = [c.id for c in ir.children_of(node)] + [
                k for k in self.state.taint if k.startswith(f"{node.id}[")
            ]
            taint.mark_composite(node, children, self.state)
        if node.step:
            self.state.record_step(node.id, value, node.store_as)
        elif node.store_as:
            self.state.memory[node.store_as] = value
        if node.store_as:
            taint.copy_to(node.store_as, node.id, self.state)
        if done and node.compensation:
            self.saga.push(node, value)

    def _budget_scope(self, node: ir.NodeBase, scope: Scope) -> Scope:
        """A node with a budget counts what everything under it spends."""
        if node.budget is None:
            return scope
        self.state.step_budgets.setdefault(node.id, node.budget)
        return {**scope, BUDGETS: [*scope.get(BUDGETS, []), node.id]}

    async def _gate(self, node: ir.NodeBase, scope: Scope) -> bool:
        """Ask before `node` runs: False when a rejection means skipping it."""
        gate = node.gate
        answer = await self._ask(gate, node.id, scope)
        if answer.value != ir.REJECT or gate.on_reject == "continue":
            return True
        if gate.on_reject == "fail":
            raise TaskFailed(node.id, _rejected(gate.id, answer))
        return False

    async def _human(self, node: ir.Human, scope: Scope) -> Any:
        task = self.state.begin(node.id, workflow.now())
        task.status, task.agent = "waiting", "human"
        try:
            answer = await self._ask(node, node.id, scope)
            if node.approval and answer.value == ir.REJECT and node.on_reject == "fail":
                raise TaskFailed(node.id, _rejected(node.id, answer))
        except TaskFailed as exc:
            self.state.finish(node.id, "failed", workflow.now(), error=exc.message)
            raise
        except asyncio.CancelledError:
            self.state.finish(node.id, "cancelled", workflow.now(), error="cancelled")
            raise
        self.state.finish(node.id, "completed", workflow.now(), output=answer.value or "")
        return answer.value

    async def _ask(self, gate: ir.Human, guards: str, scope: Scope) -> Answer:
        try:
            text = render(gate.prompt, self.leaves.context(**scope))
        except (TemplateError, TypeError) as exc:
            self.state.warnings.append(f"{gate.id}: its question could not be filled in ({exc}); asked as written")
            text = gate.prompt
        try:
            return await self.humans.ask(gate, guards, text)
        except GateTimedOut as exc:
            raise TaskFailed(guards, exc.message) from None

    async def _attempts(self, node: ir.NodeBase, scope: Scope) -> tuple[Any, bool]:
        """The node's value, and whether it did its work (False when it was skipped)."""
        if isinstance(node, (ir.Task, ir.Provider)) and node.id in self.skip:
            self.state.tasks[node.id].status = "skipped"
            return None, False
        for attempt in range(1, node.retry.attempts + 1):
            try:
                return await self._dispatch(node, scope), True
            except TaskFailed as exc:
                if attempt == node.retry.attempts:
                    return await self._on_failure(node, exc, scope)
                await self._backoff(node, attempt, exc)
        return None, True

    async def _backoff(self, node: ir.NodeBase, attempt: int, exc: TaskFailed) -> None:
        delay = backoff_s(node.retry, attempt + 1)
        if node.id in self.state.tasks:
            self.state.tasks[node.id].retries += 1
        self.state.retry_count += 1
        self.state.last_error = f"{exc.task_id}: {exc.message}"
        self.state.warnings.append(f"{node.id}: attempt {attempt} failed ({exc.message}); retrying in {delay:g}s")
        if not delay:
            return
        self.state.backing_off(+1)
        try:
            await workflow.sleep(timedelta(seconds=delay), summary=f"{node.label}: backoff")
        finally:
            self.state.backing_off(-1)

    async def _on_failure(self, node: ir.NodeBase, exc: TaskFailed, scope: Scope) -> tuple[Any, bool]:
        if node.on_failure == "skip":
            return self._skip(node, f"failed and skipped: {exc.message}"), False
        if node.on_failure == "fallback" and node.fallback:
            self.state.warnings.append(f"{node.id}: failed ({exc.message}); falling back to {node.fallback.label}")
            try:
                return await self.run(node.fallback, scope), True
            except TaskFailed as again:
                raise TaskFailed(node.id, f"its fallback {node.fallback.id} failed too: {again.message}") from None
        raise exc

    def _skip(self, node: ir.NodeBase, why: str) -> None:
        """The skip policy: a warning, the row marked skipped, and a null output."""
        self.state.warnings.append(f"{node.id}: {why}")
        if node.id in self.state.tasks:
            self.state.tasks[node.id].status = "skipped"
        return None

    async def _dispatch(self, node: ir.NodeBase, scope: Scope) -> Any:
        if isinstance(node, ir.Human):
            return await self._human(node, scope)
        if isinstance(node, (ir.Task, ir.Provider)):
            return await self.leaves.run(node, scope)
        handler = {
            ir.Sequence: self._sequence,
            ir.Parallel: self._parallel,
            ir.Selector: self._selector,
            ir.Switch: self._switch,
            ir.Loop: self._loop,
            ir.Map: self._map,
        }.get(type(node))
        if handler is None:
            raise TaskFailed(node.id, f"{node.kind} nodes cannot run in this engine")
        if node.timeout_s is None or isinstance(node, ir.Parallel):  # a parallel step's timeout bounds its wait
            return await handler(node, scope)
        try:
            return await asyncio.wait_for(handler(node, scope), node.timeout_s)
        except TimeoutError:
            raise TaskFailed(node.id, f"step timed out after {node.timeout_s:g}s") from None

    async def _sequence(self, node: ir.Sequence, scope: Scope) -> Any:
        output = None
        for child in node.children:
            output = await self.run(child, scope, visit=child.id != node.id)
        return output

    async def _selector(self, node: ir.Selector, scope: Scope) -> Any:
        errors = []
        for child in node.children:
            try:
                return await self.run(child, scope)
            except TaskFailed as exc:
                errors.append(exc.message)
        raise TaskFailed(node.id, "every alternative failed: " + "; ".join(errors))

    async def _parallel(self, node: ir.Parallel, scope: Scope) -> Any:
        branches = {asyncio.ensure_future(self.run(child, scope)): child for child in node.children}
        need = {"all": len(branches), "any": 1}.get(node.wait, node.wait)
        results: dict[str, Any] = {}
        failures: list[TaskFailed] = []
        pending = set(branches)
        deadline = workflow.time() + node.timeout_s if node.timeout_s else None
        while pending and len(results) < need and len(failures) <= len(branches) - need:
            timeout = max(deadline - workflow.time(), 0) if deadline is not None else None
            done, pending = await workflow.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break
            for fut in done:
                if fut.exception() is None:
                    results[branches[fut].id] = fut.result()
                else:
                    failures.append(fut.exception())
        timed_out = deadline is not None and bool(pending) and workflow.time() >= deadline
        await self._stop_branches(
            node,
            pending,
            f"the step's timeout ({node.timeout_s:g}s) passed"
            if timed_out
            else f"the wait policy ({node.wait}) was met",
        )
        if timed_out:
            self._timed_out_branches(node, [branches[f] for f in pending], results, failures)
        if len(results) < need:
            raise failures[0]
        return _joined(node, results)

    async def _stop_branches(self, node: ir.Parallel, pending: set[asyncio.Future], why: str) -> None:
        for fut in pending:
            fut.cancel()
        if pending:
            await workflow.wait(pending)
            self.state.warnings.append(f"{node.id}: {len(pending)} branch(es) cancelled once {why}")

    def _timed_out_branches(
        self, node: ir.Parallel, children: list[ir.NodeBase], results: dict[str, Any], failures: list[TaskFailed]
    ) -> None:
        """Past the step's timeout each unfinished agent gets its own failure policy: skip, or fail."""
        for child in children:
            reason = f"step {node.id} timed out after {node.timeout_s:g}s"
            if child.on_failure == "skip":
                results[child.id] = self._skip(child, f"{reason}; skipped")
            else:
                failures.append(TaskFailed(child.id, reason))

    async def _switch(self, node: ir.Switch, scope: Scope) -> Any:
        context = self.leaves.context(**scope)
        for case in node.cases:
            taken, warning = expressions.condition(case.when, context)
            if warning:
                self.state.warnings.append(f"{node.id}: {warning}")
            if taken:
                return await self.run(case.node, scope)
        return await self.run(node.default, scope) if node.default else None

    async def _loop(self, node: ir.Loop, scope: Scope) -> Any:
        feedback = scope.get("feedback")
        output = None
        for iteration in range(1, node.max_iterations + 1):
            output = await self.run(node.body, {**scope, "feedback": feedback, "iteration": iteration})
            passed, feedback = await self._judge_iteration(node, scope, output)
            if passed:
                return output
        self.state.warnings.append(
            f"{node.id}: max iterations ({node.max_iterations}) reached without passing; kept the last output"
        )
        return output

    async def _judge_iteration(self, node: ir.Loop, scope: Scope, output: Any) -> tuple[bool, Any]:
        """Did this iteration pass, and what feedback goes to the next one?"""
        if node.validator is None:
            if node.until is None:
                return True, None
            taken, warning = expressions.condition(node.until, self.leaves.context(**scope, output=output))
            if warning:
                self.state.warnings.append(f"{node.id}: {warning}")
            return taken, None
        verdict = _as_data(await self.run(node.validator, {**scope, "input": output, taint.DERIVED: [node.body.id]}))
        passed = isinstance(verdict, dict) and verdict.get("passed") is True
        return passed, None if passed else self._feedback(node, scope, verdict)

    def _feedback(self, node: ir.Loop, scope: Scope, verdict: Any) -> Any:
        if not node.feedback:
            return verdict.get("feedback", verdict) if isinstance(verdict, dict) else verdict
        # While the loop runs, steps.<loop id>.output is the validator's latest verdict.
        steps = {**self.state.steps, node.id: {"output": verdict, "outputs": {}}}
        try:
            return expressions.resolve(node.feedback, self.leaves.context(**scope, steps=steps))
        except expressions.ExpressionError as exc:
            self.state.warnings.append(f"{node.id}: no feedback at {node.feedback} ({exc}); passing the whole verdict")
            return verdict

    async def _map(self, node: ir.Map, scope: Scope) -> Any:
        items = self._items(node, scope)
        self.state.expand(
            node.body.id,
            [
                TaskState(id=f"{node.id}[{i}]", title=f"{node.body.label} #{i + 1}", kind=node.body.kind)
                for i in range(len(items))
            ],
        )
        results = await self._map_items(node, scope, items)
        if node.reduce is None:
            return results
        elements = [f"{node.id}[{i}]" for i in range(len(items))]
        return await self.run(node.reduce, {**scope, "input": results, taint.DERIVED: elements})

    def _items(self, node: ir.Map, scope: Scope) -> list[Any]:
        try:
            items = expressions.resolve(node.over, self.leaves.context(**scope))
        except expressions.ExpressionError as exc:
            raise TaskFailed(node.id, f"cannot read the list to map over: {exc}") from None
        items = _as_data(items)
        if not isinstance(items, list):
            raise TaskFailed(node.id, f"map over {node.over} needs a list, got {type(items).__name__}")
        return items

    async def _map_items(self, node: ir.Map, scope: Scope, items: list[Any]) -> list[Any]:
        """One agent per element, at most `concurrency` in flight; results in the elements' order."""
        results: list[Any] = [None] * len(items)
        over = [path[1] for path in expressions.references(node.over) if len(path) > 1 and path[0] == "steps"]
        running: dict[asyncio.Future, int] = {}
        try:
            for index, item in enumerate(items):
                if len(running) >= node.concurrency:
                    await self._collect(running, results)
                element = node.body.model_copy(update={"id": f"{node.id}[{index}]"})
                child = {**scope, "item": item, "index": index, "input": item, taint.DERIVED: over}
                running[asyncio.ensure_future(self.run(element, child))] = index
            while running:
                await self._collect(running, results)
        finally:
            for fut in running:
                fut.cancel()
            if running:
                await workflow.wait(list(running))
        return results

    async def _collect(self, running: dict[asyncio.Future, int], results: list[Any]) -> None:
        done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
        for fut in done:
            results[running.pop(fut)] = fut.result()  # a failed element fails the map


def _rejected(gate_id: str, answer: Answer) -> str:
    who = f" by {answer.by}" if answer.by else ""
    why = f": {answer.comment}" if answer.comment else ""
    return f"rejected at gate '{gate_id}'{who}{why}"


def _joined(node: ir.Parallel, results: dict[str, Any]) -> Any:
    """Keyed outputs when the branches have output keys (pipelines), else the texts joined."""
    if any(child.output_key for child in node.children):
        return {child.output_key or child.id: results.get(child.id) for child in node.children}
    return "\n\n".join(str(results[c.id]) for c in node.children if results.get(c.id))


def _as_data(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return extract_json(value)
        except ValueError:
            return value
    return value


def backoff_s(retry: ir.Retry, attempt: int) -> float:
    """The wait before `attempt` (2, 3, …): linear delay × attempt, exponential delay × 2^attempt."""
    if retry.backoff == "linear":
        return retry.delay_s * attempt
    if retry.backoff == "exponential":
        return retry.delay_s * (2**attempt)
    return retry.delay_s
