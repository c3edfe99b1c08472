"""A graph's verifier: an LLM judge's score, an expression or a JSON path over memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class VerifierView(LeafView[ir.Verifier]):
    def describe(self, node: ir.Verifier, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, check_text(node), inspect.who)

    def dry_run(self, node: ir.Verifier, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return self.with_details(node, at, check_text(node) + ", checked at run time", dry.who)

    def box_text(self, node: ir.Verifier, agents: Agents) -> str:
        return f"verify {node.id}"


def check_text(node: ir.Verifier) -> str:
    if node.mode == "llm_judge":
        what = f"agent {node.agent} scores the work, passing at {node.pass_threshold:g}"
    elif node.mode == "expression":
        what = f"passes when {node.expression}"
    else:
        what = f"passes when {node.path} {node.check}" + (f" {node.expected!r}" if node.check != "exists" else "")
    fails = "; a failed check fails the node" if node.throw_on_fail else ""
    return f"verifier {node.id}: {what}{fails}"
