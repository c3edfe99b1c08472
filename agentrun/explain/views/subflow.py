"""A subgraph: one of the plan's graphs, run as a child run of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class SubflowView(LeafView[ir.Subflow]):
    def describe(self, node: ir.Subflow, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, subgraph_text(node), inspect.who)

    def dry_run(self, node: ir.Subflow, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return self.with_details(node, at, subgraph_text(node) + "; its agents are asked in that run", dry.who)

    def box_text(self, node: ir.Subflow, agents: Agents) -> str:
        return f"subgraph {node.graph}"


def subgraph_text(node: ir.Subflow) -> str:
    given = ", ".join(f"{p} as {c}" for p, c in node.input_mapping.items()) or "nothing"
    back = ", ".join(f"{c} as {p}" for c, p in node.output_mapping.items()) or "nothing"
    return f"subgraph {node.id} runs graph {node.graph} as a child run; it gets {given}; it gives back {back}"
