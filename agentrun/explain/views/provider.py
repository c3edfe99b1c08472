"""A deterministic call to a registered provider: which provider and method, no agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class ProviderView(LeafView[ir.Provider]):
    def describe(self, node: ir.Provider, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, self.who(node, inspect.agents), inspect.who)

    def dry_run(self, node: ir.Provider, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return self.with_details(node, at, self.who(node, dry.agents) + " (no agent)", dry.who)

    def who(self, node: ir.Provider, agents: Agents) -> str:
        return f"{node.label}: provider {node.call.provider}.{node.call.method}"
