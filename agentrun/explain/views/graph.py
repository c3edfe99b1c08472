"""A state graph: its nodes, each with what it sees, then its ways out in the order they are
tried, with their conditions; drawn as one line per way out, an edge back to a node already drawn
marked as closing a cycle, which is spelled out; or as a Mermaid flowchart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.blocks import Block
from agentrun.explain.views.base import Entry, Scope, Shown, View
from agentrun.explain.views.words import bare, sub_tag
from agentrun.lang import ir
from agentrun.lang.reach import reachable

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class GraphView(View[ir.Graph]):
    def describe(self, node: ir.Graph, at: Entry, gets: str, inspect: Describer) -> list[str]:
        lines = [at.head + _first(node)]
        for i, (name, child) in enumerate(node.nodes.items()):
            lines += inspect.step(child, sub_tag(at.tag, i), at.indent, sees(node.access.get(name, ir.Access())))
        return lines + [at.indent + line for line in edge_lines(node)]

    def dry_run(self, node: ir.Graph, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        lines = [at.head + _first(node) + "; the route is decided at run time"]
        for i, (name, child) in enumerate(node.nodes.items()):
            reads = node.access.get(name, ir.Access()).read_keys
            shown = {"*": Shown("<all of memory>")} if "*" in reads else {k: Shown(f"<memory {k}>") for k in reads}
            lines += dry.step(child, sub_tag(at.tag, i), at.indent, {**scope, "input": shown})
        return lines + [at.indent + line for line in edge_lines(node)]

    def draw(self, node: ir.Graph, tag: str, follows: bool, drawer: Drawer) -> Block:
        return Block(tuple(text_drawing(node)))


def _first(node: ir.Graph) -> str:
    supervisors = [n for n in node.nodes.values() if isinstance(n, ir.Supervisor)]
    if node.end_nodes:
        ends = "ending at " + ", ".join(node.end_nodes)
    elif supervisors:
        ends = f"ending when supervisor {supervisors[0].id} chooses {ir.DONE}"
    else:
        ends = "with no end node"
    return f"graph starting at {node.start}, {ends}; at most {node.max_steps} node runs"


def sees(access: ir.Access) -> str:
    """What a graph node's agent is given besides its instructions: the run's goal and constraints,
    and the memory keys it reads."""
    if "*" in access.read_keys:
        return "the goal, the constraints and all of memory"
    if not access.read_keys:
        return "the goal and the constraints"
    return "the goal, the constraints and memory " + ", ".join(access.read_keys)


def ways_out(node: ir.Graph, name: str) -> list[tuple[str, str]]:
    """A node's ways out in the order they are taken, each with its condition in words ('' for
    always): its edges, a supervisor's choices (its plain edges to the nodes it manages are those
    choices), an approval's rejection."""
    child = node.nodes[name]
    managed = set(child.managed) if isinstance(child, ir.Supervisor) else set()
    found = [(e.target, bare(e.when) if e.when else "") for e in node.edges if e.source == name]
    found = [(target, cond) for target, cond in found if cond or target not in managed]
    if isinstance(child, ir.Supervisor):
        found += [(m, "chosen") for m in child.managed] + [(ir.DONE, "chosen")]
    reject = node.access.get(name, ir.Access()).on_reject
    if reject:
        found.append((reject, "rejected"))
    return found


def edge_lines(node: ir.Graph) -> list[str]:
    """Each node's ways out, in the order they are tried."""
    lines = []
    for name, child in node.nodes.items():
        outs = ways_out(node, name)
        if isinstance(child, ir.Supervisor):
            choices = [t for t, cond in outs if cond == "chosen"]
            outs = [(t, cond) for t, cond in outs if cond != "chosen"]
            lines.append(f"{name} → {' | '.join(choices)} (the supervisor's choice; {ir.DONE} ends the graph)")
        for target, cond in outs:
            if cond == "rejected":
                lines.append(f"{name} → {target} if rejected")
            else:
                lines.append(f"{name} → {target}" + (f" if {cond}" if cond else ""))
    return lines


def text_drawing(node: ir.Graph) -> list[str]:
    """The graph as text: its nodes in order from the start, one line per way out with its
    condition; `↺` marks an edge back to a node earlier on the line of runs, and each cycle it
    closes is spelled out below."""
    order = _order(node)
    rank = {name: i for i, name in enumerate(order)}
    lines, cycles = [], []
    for name in order:
        child = node.nodes[name]
        box = f"[{name}: {kind_name(child)}]" if child.kind != "task" else f"[{name}]"
        outs = ways_out(node, name)
        if not outs or name in node.end_nodes:
            lines.append(box + " (end)" if name in node.end_nodes else box + " (no way out)")
        for target, cond in outs:
            back = target in rank and rank[target] <= rank[name]
            arrow = f"--({cond})-->" if cond else "-->"
            lines.append(f"{box} {arrow} [{target}]" + (" ↺" if back else ""))
            if back:
                cycles.append(_cycle(node, target, name, cond))
    return lines + [""] + cycles if cycles else lines


def _cycle(node: ir.Graph, start: str, last: str, cond: str) -> str:
    path = _path(node, start, last) or [start, last]
    back = f" (back while {cond})" if cond and cond not in ("chosen", "rejected") else f" ({cond})" if cond else ""
    return f"↺ cycle: {' → '.join([*path, start])}{back}; at most {node.max_steps} node runs in all"


def _path(node: ir.Graph, start: str, goal: str) -> list[str]:
    """The shortest way from `start` to `goal` along the graph's ways out; [] if there is none."""
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        if path[-1] == goal:
            return path
        for target, _ in ways_out(node, path[-1]) if path[-1] in node.nodes else []:
            if target in node.nodes and target not in seen:
                seen.add(target)
                paths.append([*path, target])
    return []


def _order(node: ir.Graph) -> list[str]:
    """Nodes breadth first from the start, then any others in the file's order."""

    def onward(current: str) -> list[str]:
        return [target for target, _ in ways_out(node, current) if target in node.nodes]

    seen = reachable(node.start, onward) if node.start in node.nodes else []
    return seen + [n for n in node.nodes if n not in seen]


def mermaid(node: ir.Graph) -> str:
    """The graph as a Mermaid flowchart, to paste where Mermaid is drawn (GitHub, docs): a
    supervisor or router is a rhombus, an approval a hexagon; a supervisor's choices are dotted."""
    lines = ["flowchart TD", '    start(("start"))']
    for name, child in node.nodes.items():
        label = mermaid_label(name if child.kind == "task" else f"{name}: {kind_name(child)}")
        if isinstance(child, (ir.Supervisor, ir.Evaluate)):
            lines.append(f"    {mermaid_id(name)}{{{label}}}")
        elif isinstance(child, ir.Human):
            lines.append(f"    {mermaid_id(name)}{{{{{label}}}}}")
        else:
            lines.append(f"    {mermaid_id(name)}[{label}]")
    lines.append(f"    start --> {mermaid_id(node.start)}")
    ends = False
    for name in node.nodes:
        for target, cond in ways_out(node, name):
            if target == ir.DONE:
                ends = True
                lines.append(f'    {mermaid_id(name)} -.->|"{ir.DONE}"| stop')
            elif cond == "chosen":
                lines.append(f"    {mermaid_id(name)} -.-> {mermaid_id(target)}")
            else:
                lines.append(
                    f"    {mermaid_id(name)} -->"
                    + (f"|{mermaid_label(cond)}|" if cond else "")
                    + f" {mermaid_id(target)}"
                )
        if name in node.end_nodes:
            ends = True
            lines.append(f"    {mermaid_id(name)} --> stop")
    return "\n".join(lines[:2] + (['    stop(("end"))'] if ends else []) + lines[2:])


def kind_name(node: ir.Node) -> str:
    """A node's kind as state graphs name it, where the names differ."""
    return {"subflow": "subgraph"}.get(node.kind, node.kind)


def mermaid_label(text: str) -> str:
    """Text as a quoted Mermaid label: quotes inside it become Mermaid's #quot; entity."""
    return '"' + text.replace('"', "#quot;") + '"'


def mermaid_id(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)
