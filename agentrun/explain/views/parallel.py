"""Steps run together until enough of them finish: a fan in the graph."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.blocks import Block, fan
from agentrun.explain.views.base import Entry, Scope, View
from agentrun.explain.views.words import step_timeout, stored, sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class ParallelView(View[ir.Parallel]):
    def describe(self, node: ir.Parallel, at: Entry, gets: str, inspect: Describer) -> list[str]:
        keys = ", ".join(c.output_key or c.id for c in node.children)
        first = (
            f"parallel: {len(node.children)} agents at once, {wait_text(node.wait)}; "
            f"outputs {keys}{stored(node)}{step_timeout(node)}"
        )
        return [at.head + first] + inspect.substeps(at, node.children, gets)

    def dry_run(self, node: ir.Parallel, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        first = f"parallel, {wait_text(node.wait)}" + stored(node) + step_timeout(node)
        return [at.head + first] + dry.substeps(at, node.children, scope)

    def draw(self, node: ir.Parallel, tag: str, follows: bool, drawer: Drawer) -> Block:
        branches = [(drawer.block(child, sub_tag(tag, i), follows), "") for i, child in enumerate(node.children)]
        return fan(branches, closed=follows)


def wait_text(wait: str | int) -> str:
    if wait == "all":
        return "waits for all"
    if wait == "any":
        return "takes the first to finish and cancels the rest"
    return f"takes the first {wait} to finish and cancels the rest"
