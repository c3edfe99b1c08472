"""A plan as a Mermaid flowchart, and a run's step states as classes on its nodes: what the run
page draws. A state graph is drawn as `inspect --format mermaid` draws it; any other plan as its
steps in order, a step that holds others (parallel, selector, switch, loop, voting) as a head with
its branches under it, a map, a supervised goal and a nested graph folded into one box.

Nodes are named by node id (`n_<id>`), so a state is put on the node whose id its row carries: a
map's elements (`research[2]`) colour the map's box, a container's head shows the state of what
it holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from agentrun.explain.views.graph import mermaid, mermaid_id, mermaid_label
from agentrun.lang import ir

if TYPE_CHECKING:  # inspect and dry-run draw a plan without loading the run contract (and Temporal)
    from agentrun.models.contract import RunState, TaskState

# A step's state as a class on its node, and how it is drawn; `pending` is Mermaid's default look.
STYLES = {
    "running": "fill:#dbeafe,stroke:#1d4ed8,stroke-width:2px",
    "waiting": "fill:#fef3c7,stroke:#b45309,stroke-width:2px",
    "completed": "fill:#dcfce7,stroke:#15803d",
    "failed": "fill:#fee2e2,stroke:#b91c1c,stroke-width:2px",
    "skipped": "fill:#f3f4f6,stroke:#9ca3af,stroke-dasharray:4 3",
    "cancelled": "fill:#f3f4f6,stroke:#6b7280,stroke-dasharray:2 2",
}
_FOLDED = (ir.Map, ir.Supervised, ir.Graph)


def flowchart(plan: ir.Plan) -> str:
    """The plan's Mermaid flowchart, without states."""
    if isinstance(plan.root, ir.Graph):
        return mermaid(plan.root)
    chart = _Chart()
    chart.add(plan.root)
    return "\n".join(["flowchart TD", *chart.lines])


def with_states(chart: str, plan: ir.Plan, state: RunState) -> str:
    """`chart` with a class per drawn node that has a state, and how each class is drawn."""
    found = states(plan, state)
    lines = [chart] + [f"    classDef {name} {style}" for name, style in STYLES.items()]
    by_state: dict[str, list[str]] = {}
    for node_id, status in found.items():
        if status in STYLES:
            by_state.setdefault(status, []).append(mermaid_id(node_id))
    lines += [f"    class {','.join(ids)} {status}" for status, ids in sorted(by_state.items())]
    return "\n".join(lines)


def states(plan: ir.Plan, state: RunState) -> dict[str, str]:
    """Each drawn node's state, by node id: its own row's, or what the rows under it add up to."""
    from agentrun.models.contract import open_gates

    rows: dict[str, list[TaskState]] = {}
    for row in state.tasks.values():
        rows.setdefault(row.id.split("[", 1)[0], []).append(row)
    asking = {gate.node or gate.name for gate in open_gates(state)}
    found: dict[str, str] = {}
    for node in _drawn(plan):
        ids = {n.id for n in _held(node)}
        if ids & asking:
            found[node.id] = "waiting"
            continue
        status = _sum(row.status for node_id in ids for row in rows.get(node_id, []))
        if status:
            found[node.id] = status
    return found


def _drawn(plan: ir.Plan) -> list[ir.NodeBase]:
    """The nodes the chart has a box for (a class on any other would make Mermaid draw a new one)."""
    if isinstance(plan.root, ir.Graph):
        return list(plan.root.nodes.values())
    return _boxes(plan.root)


def _boxes(node: ir.NodeBase) -> list[ir.NodeBase]:
    own = [] if isinstance(node, ir.Sequence) else [node]
    inside = [] if isinstance(node, _FOLDED) else [n for child in ir.children_of(node) for n in _boxes(child)]
    return own + inside


def _sum(statuses: Iterable[str]) -> str:
    """The state of several rows: what is under way or went wrong shows first."""
    seen = set(statuses)
    if not seen:
        return ""
    for first in ("running", "failed"):
        if first in seen:
            return first
    if seen == {"pending"}:
        return "pending"
    if "pending" in seen:
        return "running"  # some done, some still to come
    for only in ("skipped", "cancelled"):
        if seen == {only}:
            return only
    return "completed"


class _Chart:
    """The lines of a flowchart, added node by node; `add` gives a node's ways in and out."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, node: ir.NodeBase) -> tuple[list[str], list[str]]:
        if isinstance(node, ir.Sequence):
            ins, outs = self._chain(node.children)
        elif isinstance(node, _FOLDED) or not _inner(node):
            self._box(node)
            ins, outs = [node.id], [node.id]
        else:
            ins, outs = self._branches(node)
        if node.fallback is not None:
            fallback_ins, fallback_outs = self.add(node.fallback)
            self._link(outs, fallback_ins, "on failure", dotted=True)
            outs = outs + fallback_outs
        return ins, outs

    def _chain(self, children: Iterable[ir.NodeBase]) -> tuple[list[str], list[str]]:
        ins: list[str] = []
        outs: list[str] = []
        for child in children:
            child_ins, child_outs = self.add(child)
            if not child_ins:
                continue
            if outs:
                self._link(outs, child_ins)
            else:
                ins = child_ins
            outs = child_outs
        return ins, outs

    def _branches(self, node: ir.NodeBase) -> tuple[list[str], list[str]]:
        """A head for the node, an edge to each branch (with its condition or turn), the branches'
        ends as its ways out; a loop's body (then its check) goes back to its head."""
        self._box(node)
        if isinstance(node, ir.Loop):
            body_ins, outs = self._chain([node.body, *([node.validator] if node.validator else [])])
            self._link([node.id], body_ins)
            self._link(outs, [node.id], "again", dotted=True)
            return [node.id], outs or [node.id]
        outs: list[str] = []
        for label, branch in _ways(node):
            branch_ins, branch_outs = self.add(branch)
            self._link([node.id], branch_ins, label)
            outs += branch_outs
        return [node.id], outs or [node.id]

    def _box(self, node: ir.NodeBase) -> None:
        text = node.label if isinstance(node, ir.Task) else f"{node.label}: {_kind(node)}"
        label = mermaid_label(text)
        if isinstance(node, ir.Human):
            shape = f"{{{{{label}}}}}"
        elif isinstance(node, (ir.Evaluate, ir.Switch, ir.Selector)):
            shape = f"{{{label}}}"
        elif _inner(node) and not isinstance(node, _FOLDED):
            shape = f"([{label}])"
        else:
            shape = f"[{label}]"
        self.lines.append(f"    {mermaid_id(node.id)}{shape}")

    def _link(self, sources: list[str], targets: list[str], label: str = "", dotted: bool = False) -> None:
        arrow = "-.->" if dotted else "-->"
        said = f"|{mermaid_label(label)}|" if label else ""
        for source in sources:
            for target in targets:
                self.lines.append(f"    {mermaid_id(source)} {arrow}{said} {mermaid_id(target)}")


def _inner(node: ir.NodeBase) -> list[ir.NodeBase]:
    """The nodes a node holds, without its fallback (drawn beside it)."""
    return [child for child in ir.children_of(node) if child is not node.fallback]


def _held(node: ir.NodeBase) -> list[ir.NodeBase]:
    """The node and everything it holds, whose rows make its state."""
    return [node, *(n for child in _inner(node) for n in _held(child))]


def _kind(node: ir.NodeBase) -> str:
    if isinstance(node, ir.Map):
        return f"map of {node.body.label}"
    return {"subflow": "subgraph"}.get(node.kind, node.kind)


def _ways(node: ir.NodeBase) -> list[tuple[str, ir.NodeBase]]:
    """A node's branches, each with what takes it ('' when all run together)."""
    ways: list[tuple[str, ir.NodeBase]] = []
    if isinstance(node, ir.Switch):
        ways += [(case.when, case.node) for case in node.cases]
        ways += [("otherwise", node.default)] if node.default else []
    elif isinstance(node, ir.Selector):
        ways += [("first" if i == 0 else "else", child) for i, child in enumerate(node.children)]
    else:
        ways += [("", child) for child in _inner(node)]
    return ways
