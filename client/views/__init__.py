"""Each node kind's words for `inspect` and `dry-run` and its figure in the graph, by kind name.

A new kind writes `client/views/<kind>.py` with a `View` subclass (see `client.views.base`:
`describe`, `dry_run` and `draw`, and optionally how others name it and what its box says) and
adds it below; tests/test_node_kinds.py fails for a kind of `spec.ir.Node` that has no view.
A behaviour tree's nodes read in the tree's words instead (`client.views.tree`).
"""

from __future__ import annotations

from typing import Any

from client.views.base import View
from client.views.evaluate import EvaluateView
from client.views.human import HumanView
from client.views.loop import LoopView
from client.views.map import MapView
from client.views.parallel import ParallelView
from client.views.provider import ProviderView
from client.views.selector import SelectorView
from client.views.sequence import SequenceView
from client.views.switch import SwitchView
from client.views.task import TaskView
from client.views.tree import KINDS as TREE_KINDS
from client.views.tree import TreeView
from spec import ir
from spec.dialects import behavior_tree

VIEWS: dict[str, View[Any]] = {
    "task": TaskView(),
    "provider": ProviderView(),
    "sequence": SequenceView(),
    "parallel": ParallelView(),
    "selector": SelectorView(),
    "switch": SwitchView(),
    "loop": LoopView(),
    "map": MapView(),
    "human": HumanView(),
    "evaluate": EvaluateView(),
}


TREE = TreeView()


def view_of(node: ir.Node, dialect: str = "") -> View[Any]:
    """The view of the node's kind; in a plan of `dialect`, a behaviour tree's view of its nodes."""
    if dialect == behavior_tree.NAME and node.kind in TREE_KINDS:
        return TREE
    return VIEWS[node.kind]
