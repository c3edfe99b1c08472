"""Steps tried in order until one succeeds: a fan in the graph, each branch saying when it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.blocks import Block, fan
from agentrun.explain.views.base import Entry, Scope, View
from agentrun.explain.views.words import sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class SelectorView(View[ir.Selector]):
    def describe(self, node: ir.Selector, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return [at.head + "the first that succeeds:"] + inspect.substeps(at, node.children, gets)

    def dry_run(self, node: ir.Selector, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return [at.head + "the first that succeeds"] + dry.substeps(at, node.children, scope)

    def draw(self, node: ir.Selector, tag: str, follows: bool, drawer: Drawer) -> Block:
        branches = [
            (drawer.block(child, sub_tag(tag, i), follows), "(first try)" if i == 0 else "(if the above fails)")
            for i, child in enumerate(node.children)
        ]
        return fan(branches, closed=follows)
