"""Each node kind's words for `inspect` and `dry-run` and its figure in the graph, by kind name.

A new kind writes `client/views/<kind>.py` with a `View` subclass (see `client.views.base`:
`describe`, `dry_run` and `draw`, and optionally how others name it and what its box says) and
adds it below; tests/test_node_kinds.py fails for a kind of `spec.ir.Node` that has no view.
"""

from __future__ import annotations

from typing import Any

from client.views.base import View
from client.views.evaluate import EvaluateView
from client.views.graph import GraphView
from client.views.human import HumanView
from client.views.loop import LoopView
from client.views.map import MapView
from client.views.parallel import ParallelView
from client.views.provider import ProviderView
from client.views.selector import SelectorView
from client.views.sequence import SequenceView
from client.views.supervisor import SupervisorView
from client.views.switch import SwitchView
from client.views.task import TaskView
from client.views.verifier import VerifierView
from spec import ir

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
}


def view_of(node: ir.Node) -> View[Any]:
    return VIEWS[node.kind]
