"""Saga compensation: what succeeded pushes its undo; a failed or rolled-back run pops them in reverse.

The run state's `compensation_stack` is the one stack: each entry carries the undo it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentrun.lang import ir
from agentrun.models.contract import CompensationEntry, CompensationResult, RunState, TaskState
from agentrun.workflows import tracing
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.scope import RunKey, Scope

Runner = Callable[[ir.NodeBase, Scope, RunKey], Awaitable[Any]]


class Saga:
    def __init__(self, state: RunState):
        self.state = state

    @property
    def pending(self) -> int:
        return len(self.state.compensation_stack)

    def push(self, node: ir.NodeBase, key: RunKey, output: Any) -> None:
        comp = node.compensation
        assert comp is not None
        undo = (comp, RunKey(comp.id, key.elements), output)
        self.state.push_undo(CompensationEntry(action_id=str(key), compensation_action=_action(comp), undo=undo))

    def adopt(self, action_id: str, comp: ir.Node, key: RunKey, output: Any) -> None:
        """Push an undo that another run made: a subgraph's, once its child run completed."""
        entry = CompensationEntry(action_id=action_id, compensation_action=_action(comp), undo=(comp, key, output))
        self.state.push_undo(entry)

    def carried(self) -> list[tuple[str, list[int], Any]]:
        """What the stack's entries run, in a form that crosses a continue-as-new."""
        return [
            (comp.id, list(key.elements), output)
            for comp, key, output in (e.undo for e in self.state.compensation_stack)
        ]

    def restore(self, plan: ir.Plan, undos: list[tuple[str, list[int], Any]]) -> None:
        """Give the carried stack's entries back what they run."""
        nodes = compensations(plan.walk_all())
        for entry, (comp_id, elements, output) in zip(self.state.compensation_stack, undos):
            entry.restore((nodes[comp_id], RunKey(comp_id, tuple(elements)), output))

    async def rollback(self, run: Runner) -> list[str]:
        """Run every compensation, last pushed first, each with its own retries; the ids that failed."""
        failed = []
        while self.state.compensation_stack:
            entry = self.state.pop_undo()
            comp, key, output = entry.undo
            agent = (
                comp.agent if isinstance(comp, ir.Task) else comp.call.provider if isinstance(comp, ir.Provider) else ""
            )
            self.state.add_row(TaskState(id=str(key), title=comp.label, kind="compensation", agent=agent))
            try:
                with tracing.compensation(entry.action_id, key):
                    await run(comp, Scope().with_values(output=output), key)
            except TaskFailed as exc:
                failed.append(str(key))
                self.state.add_compensation(
                    CompensationResult(action_id=entry.action_id, status="failed", error=exc.message)
                )
                continue
            self.state.add_compensation(CompensationResult(action_id=entry.action_id, status="completed"))
        return failed


def compensations(nodes: list[ir.NodeBase]) -> dict[str, ir.Node]:
    """The compensation nodes among `nodes`' undos, by id; a later node's wins."""
    return {node.compensation.id: node.compensation for node in nodes if node.compensation is not None}


def _action(comp: ir.NodeBase) -> dict[str, Any]:
    if isinstance(comp, ir.Provider):
        return {"type": "provider", "payload": {"provider": comp.call.provider, "method": comp.call.method}}
    return {"type": "agent", "payload": {"agent": getattr(comp, "agent", ""), "prompt": getattr(comp, "prompt", "")}}
