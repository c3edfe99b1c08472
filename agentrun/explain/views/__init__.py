"""Each node kind's words for `inspect` and `dry-run` and its figure in the graph, by kind name.

A new kind writes `explain/views/<kind>.py` with a `View` subclass (see `explain.views.base`:
`describe`, `dry_run` and `draw`, and optionally how others name it and what its box says) and
adds it below; tests/test_node_kinds.py fails for a kind of `spec.ir.Node` that has no view.
A behaviour tree's nodes read in the tree's words instead (`client.views.tree`).
"""

from __future__ import annotations

from typing import Any

from agentrun.explain.views.base import View
from agentrun.explain.views.evaluate import EvaluateView
from agentrun.explain.views.graph import GraphView
from agentrun.explain.views.human import HumanView
from agentrun.explain.views.loop import LoopView
from agentrun.explain.views.map import MapView
from agentrun.explain.views.parallel import ParallelView
from agentrun.explain.views.provider import ProviderView
from agentrun.explain.views.selector import SelectorView
from agentrun.explain.views.sequence import SequenceView
from agentrun.explain.views.subflow import SubflowView
from agentrun.explain.views.supervisor import SupervisorView
from agentrun.explain.views.switch import SwitchView
from agentrun.explain.views.task import TaskView
from agentrun.explain.views.tree import KINDS as TREE_KINDS
from agentrun.explain.views.tree import TreeView
from agentrun.explain.views.verifier import VerifierView
from agentrun.explain.views.voting import VotingView
from agentrun.lang import ir

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
    "graph": GraphView(),
    "supervisor": SupervisorView(),
    "verifier": VerifierView(),
    "voting": VotingView(),
    "subflow": SubflowView(),
}


TREE = TreeView()


def view_of(node: ir.Node, traits: ir.Traits) -> View[Any]:
    """The view of the node's kind; in a tree's plan, the tree's view of its nodes."""
    if traits.tree and node.kind in TREE_KINDS:
        return TREE
    return VIEWS[node.kind]
