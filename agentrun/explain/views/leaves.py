"""What the kinds that do one piece of work (task, provider, human, evaluate) share: a line with its
details under it, and one box in the graph."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.cells import cell_len

from agentrun.explain.blocks import Block
from agentrun.explain.views.base import Entry, N, View
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.graph import Drawer


class LeafView(View[N]):
    boxed = True

    def with_details(self, node: N, at: Entry, first: str, who: Callable[[ir.Node], str]) -> list[str]:
        """The node's line, then its details (retries, failure policy, …) under it."""
        return [at.head + first] + [at.indent + line for line in self.details(node, who)]

    def draw(self, node: N, tag: str, follows: bool, drawer: Drawer) -> Block:
        box = drawer.box(node, tag)
        if node.fallback is None:
            return Block((box,))
        # The seeds' step-with-fallback figure: the backup hangs under the agent it stands in
        # for, and rejoins the line to the next step when there is one.
        backup = " \\--failure--> " + drawer.box(node.fallback, tag + "'")
        if not follows:
            return Block((box, backup))
        edge = max(cell_len(box), cell_len(backup)) + 3
        return Block(
            (
                box + " " + "-" * (edge - cell_len(box) - 1) + "+",
                backup + " " + "-" * (edge - cell_len(backup) - 1) + "/",
            ),
            right="wire",
        )
