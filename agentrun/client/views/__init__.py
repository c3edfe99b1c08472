"""Each node kind's words for `inspect` and `dry-run` and its figure in the graph, by kind name.

A new kind writes `client/views/<kind>.py` with a `View` subclass (see `client.views.base`:
`describe`, `dry_run` and `draw`, and optionally how others name it and what its box says) and
adds it below; tests/test_node_kinds.py fails for a kind of `spec.ir.Node` that has no view.
A behaviour tree's nodes read in the tree's words instead (`client.views.tree`).
"""

from __future__ import annotations

from typing import Any

from agentrun.client.views.base import View
from agentrun.client.views.evaluate import EvaluateView
from agentrun.client.views.graph import GraphView
from agentrun.client.views.human import HumanView
from agentrun.client.views.loop import LoopView
from agentrun.client.views.map import MapView
from agentrun.client.views.parallel import ParallelView
from agentrun.client.views.provider import ProviderView
from agentrun.client.views.selector import SelectorView
from agentrun.client.views.sequence import SequenceView
from agentrun.client.views.subflow import SubflowView
from agentrun.client.views.supervisor import SupervisorView
from agentrun.client.views.switch import SwitchView
from agentrun.client.views.task import TaskView
from agentrun.client.views.tree import KINDS as TREE_KINDS
from agentrun.client.views.tree import TreeView
from agentrun.client.views.verifier import VerifierView
from agentrun.client.views.voting import VotingView
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
