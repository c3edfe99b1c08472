"""Steps one after another: a chain in the graph."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.blocks import Block, chain
from agentrun.explain.views.base import Entry, Scope, View
from agentrun.explain.views.words import sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class SequenceView(View[ir.Sequence]):
    def describe(self, node: ir.Sequence, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return [at.head + _named(node) + "in order:"] + inspect.substeps(at, node.children, gets)

    def dry_run(self, node: ir.Sequence, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        return [at.head + _named(node) + "in order"] + dry.substeps(at, node.children, scope)

    def draw(self, node: ir.Sequence, tag: str, follows: bool, drawer: Drawer) -> Block:
        return chain([drawer.block(child, sub_tag(tag, i), True) for i, child in enumerate(node.children)])


def _named(node: ir.Sequence) -> str:
    """A title the language gave that says more than the id (an Agentfile's "RUN main")."""
    return f"{node.title}, " if node.title and node.title != node.id else ""
