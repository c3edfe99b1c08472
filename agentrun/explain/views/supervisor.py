"""A graph's supervisor: an agent that picks which managed node works next, or __done__."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.explain.views.words import agent_name
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class SupervisorView(LeafView[ir.Supervisor]):
    def describe(self, node: ir.Supervisor, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, f"{_text(node, inspect.agents)}; it gets {gets}", inspect.who)

    def dry_run(self, node: ir.Supervisor, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return self.with_details(node, at, _text(node, dry.agents) + ", decided at run time", dry.who)

    def box_text(self, node: ir.Supervisor, agents: Agents) -> str:
        return f"supervisor {node.id}"


def _text(node: ir.Supervisor, agents: Agents) -> str:
    return (
        f"supervisor {node.id} ({agent_name(node, agents)}) picks one of {', '.join(node.managed)} "
        f"or {ir.DONE}, at most {node.max_iterations} times"
    )
