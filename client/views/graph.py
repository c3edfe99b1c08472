"""A state graph: its nodes, then its edges in the order they are tried, with their conditions;
drawn as one line per edge, an edge back to a node already drawn marked as a cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.blocks import Block
from client.views.base import Entry, Scope, View
from client.views.words import bare
from spec import ir

if TYPE_CHECKING:
    from client.explain import Describer, DryRun
    from client.graph import Drawer


class GraphView(View[ir.Graph]):
    def describe(self, node: ir.Graph, at: Entry, gets: str, inspect: Describer) -> list[str]:
        lines = [at.head + _first(node)]
        lines += inspect.substeps(at, list(node.nodes.values()), gets)
        return lines + [at.indent + line for line in edge_lines(node)]

    def dry_run(self, node: ir.Graph, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        lines = [at.head + _first(node) + "; the route is decided at run time"]
        lines += dry.substeps(at, list(node.nodes.values()), scope)
        return lines + [at.indent + line for line in edge_lines(node)]

    def draw(self, node: ir.Graph, tag: str, follows: bool, drawer: Drawer) -> Block:
        return Block(tuple(text_drawing(node)))


def _first(node: ir.Graph) -> str:
    ends = ", ".join(node.end_nodes) or "where a supervisor says it is done"
    return f"graph starting at {node.start}, ending at {ends}; at most {node.max_steps} node runs"


def edge_lines(node: ir.Graph) -> list[str]:
    """Each node's ways out, in the order they are tried."""
    lines = []
    for name, child in node.nodes.items():
        for edge in [e for e in node.edges if e.source == name]:
            lines.append(f"{name} → {edge.target}" + (f" if {bare(edge.when)}" if edge.when else ""))
        if isinstance(child, ir.Supervisor):
            lines.append(f"{name} → {' | '.join(child.managed)} (the supervisor's choice)")
        reject = node.access.get(name, ir.Access()).on_reject
        if reject:
            lines.append(f"{name} → {reject} if rejected")
    return lines


def text_drawing(node: ir.Graph) -> list[str]:
    """The graph as text: its nodes in order from the start, one line per way out; `↺` marks an
    edge back to a node earlier on the line of runs (a cycle)."""
    order = _order(node)
    rank = {name: i for i, name in enumerate(order)}
    lines = []
    for name in order:
        child = node.nodes[name]
        targets = [(e.target, f"({bare(e.when)})" if e.when else "") for e in node.edges if e.source == name]
        if isinstance(child, ir.Supervisor):
            targets += [(m, "(chosen)") for m in child.managed] + [(ir.DONE, "(chosen)")]
        reject = node.access.get(name, ir.Access()).on_reject
        if reject:
            targets.append((reject, "(rejected)"))
        box = f"[{name}: {child.kind}]" if child.kind != "task" else f"[{name}]"
        if not targets:
            lines.append(box + (" (end)" if name in node.end_nodes or not node.end_nodes else ""))
        for target, cond in targets:
            back = " ↺" if target in rank and rank[target] <= rank[name] else ""
            lines.append(f"{box} --{cond}--> [{target}]{back}" if cond else f"{box} --> [{target}]{back}")
    return lines


def _order(node: ir.Graph) -> list[str]:
    """Nodes breadth first from the start, then any others in the file's order."""
    seen, todo = [node.start] if node.start in node.nodes else [], [node.start]
    while todo:
        current = todo.pop(0)
        child = node.nodes.get(current)
        nxt = [e.target for e in node.edges if e.source == current]
        nxt += child.managed if isinstance(child, ir.Supervisor) else []
        for target in nxt:
            if target in node.nodes and target not in seen:
                seen.append(target)
                todo.append(target)
    return seen + [n for n in node.nodes if n not in seen]


def mermaid(node: ir.Graph) -> str:
    """The graph in Mermaid's flowchart syntax, for pasting where Mermaid is drawn."""
    lines = ["flowchart TD"]
    for name, child in node.nodes.items():
        shape = (
            f'{_id(name)}{{"{name}"}}' if isinstance(child, (ir.Supervisor, ir.Evaluate)) else f'{_id(name)}["{name}"]'
        )
        lines.append(f"    {shape}")
    lines.append(f"    START(( )) --> {_id(node.start)}")
    for edge in node.edges:
        label = f'|"{bare(edge.when)}"|' if edge.when else ""
        lines.append(f"    {_id(edge.source)} -->{label} {_id(edge.target)}")
    for name, child in node.nodes.items():
        if isinstance(child, ir.Supervisor):
            lines += [f"    {_id(name)} -.-> {_id(m)}" for m in child.managed]
        reject = node.access.get(name, ir.Access()).on_reject
        if reject:
            lines.append(f'    {_id(name)} -->|"rejected"| {_id(reject)}')
    return "\n".join(lines)


def _id(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)
