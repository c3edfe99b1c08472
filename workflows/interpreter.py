"""Walking a Plan: composite nodes here, leaves in `leaves.py`, plus each node's failure policy."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

from spec import ir
from workflows.leaves import Leaves, TaskFailed
from workflows.state import RunState


class Interpreter:
    def __init__(self, leaves: Leaves, state: RunState, skip: set[str]):
        self.leaves, self.state, self.skip = leaves, state, skip

    async def run(self, node: ir.NodeBase) -> str | None:
        for attempt in range(1, node.retry.attempts + 1):
            try:
                return await self._dispatch(node)
            except TaskFailed as exc:
                if attempt == node.retry.attempts:
                    return await self._on_failure(node, exc)
                delay = backoff_s(node.retry, attempt)
                self.state.warnings.append(f"{node.id}: attempt {attempt} failed ({exc.message}); "
                                           f"retrying in {delay:g}s")
                await workflow.sleep(timedelta(seconds=delay), summary=f"{node.label}: backoff")
        return None

    async def _on_failure(self, node: ir.NodeBase, exc: TaskFailed) -> str | None:
        if node.on_failure == "skip":
            self.state.warnings.append(f"{node.id}: failed and skipped: {exc.message}")
            if node.id in self.state.tasks:
                self.state.tasks[node.id].status = "skipped"
            return None
        if node.on_failure == "fallback" and isinstance(node, ir.Task) and node.fallback:
            self.state.warnings.append(f"{node.id}: failed; falling back to agent {node.fallback}")
            return await self.leaves.run(node.model_copy(update={"agent": node.fallback, "on_failure": "abort"}))
        raise exc

    async def _dispatch(self, node: ir.NodeBase) -> str | None:
        if isinstance(node, (ir.Task, ir.Provider)):
            if node.id in self.skip:
                self.state.tasks[node.id].status = "skipped"
                return None
            return await self.leaves.run(node)
        if isinstance(node, ir.Sequence):
            return await self._sequence(node)
        if isinstance(node, ir.Parallel):
            return await self._parallel(node)
        if isinstance(node, ir.Selector):
            return await self._selector(node)
        raise TaskFailed(node.id, f"{node.kind} nodes cannot run in this engine")

    async def _sequence(self, node: ir.Sequence) -> str | None:
        output = None
        for child in node.children:
            output = await self.run(child)
        return output

    async def _selector(self, node: ir.Selector) -> str | None:
        errors = []
        for child in node.children:
            try:
                return await self.run(child)
            except TaskFailed as exc:
                errors.append(exc.message)
        raise TaskFailed(node.id, "every alternative failed: " + "; ".join(errors))

    async def _parallel(self, node: ir.Parallel) -> str | None:
        running = [asyncio.ensure_future(self.run(child)) for child in node.children]
        need = {"all": len(running), "any": 1}.get(node.wait, node.wait)
        succeeded, failures, pending = [], [], set(running)
        while pending and len(succeeded) < need and len(failures) <= len(running) - need:
            done, pending = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                if fut.exception() is None:
                    succeeded.append(fut.result())
                else:
                    failures.append(fut.exception())
        for fut in pending:
            fut.cancel()
        if pending:
            await workflow.wait(pending)
            self.state.warnings.append(f"{node.id}: {len(pending)} branch(es) cancelled once "
                                       f"{need} had finished")
        if len(succeeded) < need:
            raise failures[0]
        return "\n\n".join(str(s) for s in succeeded if s)


def backoff_s(retry: ir.Retry, attempt: int) -> float:
    if retry.backoff == "linear":
        return retry.delay_s * attempt
    if retry.backoff == "exponential":
        return retry.delay_s * (2 ** attempt)
    return retry.delay_s if retry.delay_s else 0.0
