"""A precondition: a condition the run checks, failing the step when it is false. No agent runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.explain.views.words import bare
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class EvaluateView(LeafView[ir.Evaluate]):
    def describe(self, node: ir.Evaluate, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, f"{_check(node)} ({_when_false(node)})", inspect.who)

    def dry_run(self, node: ir.Evaluate, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return self.with_details(node, at, f"{_check(node)} ({_when_false(node)}; no agent)", dry.who)

    def box_text(self, node: ir.Evaluate, agents: Agents) -> str:
        return _check(node)


def _check(node: ir.Evaluate) -> str:
    return "check: " + bare(node.condition)


def _when_false(node: ir.Evaluate) -> str:
    # Skip and fallback are spelled out by the policy line under it.
    return "the run fails here when it is false" if node.on_failure == "abort" else "fails when it is false"
