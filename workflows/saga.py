"""Saga compensation: what succeeded pushes its undo; a failed or rolled-back run pops them in reverse."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from spec import ir
from workflows.state import CompensationEntry, CompensationResult, RunState, TaskState

Runner = Callable[[ir.NodeBase, dict[str, Any]], Awaitable[Any]]


class Saga:
    def __init__(self, state: RunState):
        self.state = state
        self.undo: list[tuple[ir.NodeBase, Any]] = []  # parallel to state.compensation_stack

    def push(self, node: ir.NodeBase, output: Any) -> None:
        comp = node.compensation.model_copy(update={"id": f"{node.id}.compensate"})
        self.undo.append((comp, output))
        self.state.compensation_stack.append(CompensationEntry(action_id=node.id, compensation_action=_action(comp)))

    async def rollback(self, run: Runner, failure: type[Exception]) -> list[str]:
        """Run every compensation, last pushed first, each with its own retries; the ids that failed."""
        failed = []
        while self.undo:
            comp, output = self.undo.pop()
            entry = self.state.compensation_stack.pop()
            self.state.tasks[comp.id] = TaskState(
                id=comp.id, title=comp.label, kind="compensation", agent=getattr(comp, "agent", "") or _provider(comp)
            )
            try:
                await run(comp, {"output": output})
            except failure as exc:
                failed.append(comp.id)
                self.state.compensations.append(
                    CompensationResult(
                        action_id=entry.action_id, status="failed", error=getattr(exc, "message", str(exc))
                    )
                )
                continue
            self.state.compensations.append(CompensationResult(action_id=entry.action_id, status="completed"))
        return failed


def _action(comp: ir.NodeBase) -> dict[str, Any]:
    if isinstance(comp, ir.Provider):
        return {"type": "provider", "payload": {"provider": comp.call.provider, "method": comp.call.method}}
    return {"type": "agent", "payload": {"agent": getattr(comp, "agent", ""), "prompt": getattr(comp, "prompt", "")}}


def _provider(comp: ir.NodeBase) -> str:
    return comp.call.provider if isinstance(comp, ir.Provider) else ""
