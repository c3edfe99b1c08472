"""Conditions choosing a branch: a fan in the graph, each branch with the condition that takes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.blocks import Block, fan
from agentrun.explain.views.base import Entry, Scope, View
from agentrun.explain.views.words import bare, step_timeout, sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class SwitchView(View[ir.Switch]):
    def describe(self, node: ir.Switch, at: Entry, gets: str, inspect: Describer) -> list[str]:
        first = "conditional: the first branch whose condition holds runs" + step_timeout(node)
        return [at.head + first] + self._branches(node, at, gets, inspect)

    def dry_run(self, node: ir.Switch, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        first = "conditional, decided at run time" + step_timeout(node)
        return [at.head + first] + self._branches(node, at, scope, dry)

    def _branches(self, node: ir.Switch, at: Entry, gets: str | Scope, walker: Describer) -> list[str]:
        branches = switch_branches(node)
        leads = [f"{_if(cond)} → " for _, cond in branches]
        return walker.substeps(at, [branch for branch, _ in branches], gets, leads)

    def draw(self, node: ir.Switch, tag: str, follows: bool, drawer: Drawer) -> Block:
        branches = [
            (drawer.block(branch, sub_tag(tag, i), follows), f"({cond})")
            for i, (branch, cond) in enumerate(switch_branches(node))
        ]
        return fan(branches, closed=follows)


def switch_branches(node: ir.Switch) -> list[tuple[ir.Node | None, str]]:
    """Every branch of a conditional with the condition that takes it, a chain of conditionals
    in their `false` branches (hot / warm / cold) read as one choice."""
    branches: list[tuple[ir.Node | None, str]] = []
    current = node
    while True:
        for case in current.cases:
            branches.append((case.node, ("else if " if branches else "") + bare(case.when)))
        if not isinstance(current.default, ir.Switch):
            branches.append((current.default, "else"))
            return branches
        current = current.default


def _if(cond: str) -> str:
    return "else" if cond == "else" else ("" if cond.startswith("else if ") else "if ") + cond
