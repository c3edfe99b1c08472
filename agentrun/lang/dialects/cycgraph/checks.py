"""The checks on a graph's shape as a whole: its start, where its edges and supervisors point,
what no path reaches, and (under `strict_keys`) reads of keys nothing writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.lang import ir
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.errors import did_you_mean
from agentrun.lang.reach import reachable
from agentrun.lang.yamlpos import PosDict

if TYPE_CHECKING:
    from agentrun.lang.dialects.cycgraph.nodes import Compiled


def check_graph(
    build: Builder,
    graph: PosDict,
    base: tuple,
    nodes: dict[str, Compiled],
    edges: list[ir.Edge],
    strict_keys: bool,
    inputs: set[str],
) -> None:
    _duplicates(build, graph, base)
    start = graph.get("start_node")
    if start not in nodes:
        where = (*base, "start_node")
        said = f"start_node '{start}' is not a node of the graph" if start else "the graph has no start_node"
        build.problem(where, said, did_you_mean(str(start), nodes) or "write start_node: ID of the first node")
    _targets(build, graph, base, nodes)
    _managed(build, nodes)
    for i, node in enumerate(graph.get("end_nodes") or []):
        if node not in nodes:
            build.problem(
                (*base, "end_nodes", i), f"end node '{node}' is not a node of the graph", did_you_mean(str(node), nodes)
            )
    if start in nodes:
        _unreachable(build, nodes, edges, str(start))
    if strict_keys:
        _unwritten_reads(build, nodes, inputs)


def _duplicates(build: Builder, graph: PosDict, base: tuple) -> None:
    seen: set[object] = set()
    for i, raw in enumerate(graph.get("nodes") or []):
        node_id = raw.get("id") if isinstance(raw, dict) else None
        if node_id in seen:
            build.problem((*base, "nodes", i, "id"), f"two nodes have the id '{node_id}'", "give each node its own id")
        seen.add(node_id)


def _targets(build: Builder, graph: PosDict, base: tuple, nodes: dict[str, Compiled]) -> None:
    for i, edge in enumerate(graph.get("edges") or []):
        if not isinstance(edge, PosDict):
            continue
        for end in ("source", "target"):
            name = edge.get(end)
            if name is not None and str(name) not in nodes:
                hint = did_you_mean(str(name), nodes) or "the nodes: " + ", ".join(nodes)
                build.problem((*base, "edges", i, end), f"edge {end} '{name}' is not a node of the graph", hint)


def _managed(build: Builder, nodes: dict[str, Compiled]) -> None:
    for compiled in nodes.values():
        node = compiled.node
        if isinstance(node, ir.Supervisor):
            for j, managed in enumerate(node.managed):
                if managed not in nodes:
                    hint = did_you_mean(managed, nodes) or "the nodes: " + ", ".join(nodes)
                    at = (*compiled.path, "managed_nodes", j)
                    if "supervisor_config" in _raw(build, compiled.path):
                        at = (*compiled.path, "supervisor_config", "managed_nodes", j)
                    build.problem(
                        at, f"supervisor '{node.id}' manages '{managed}', which is not a node of the graph", hint
                    )
        reject = compiled.access.on_reject
        if reject and reject not in nodes:
            build.problem(
                compiled.path,
                f"approval '{node.id}' rejects to '{reject}', which is not a node",
                did_you_mean(reject, nodes),
            )


def successors(node: ir.Node, access: ir.Access, edges: list[ir.Edge]) -> list[str]:
    """Where a run may go after `node`: its edges, a supervisor's managed nodes, an approval's
    rejection node."""
    found = [e.target for e in edges if e.source == node.id]
    if isinstance(node, ir.Supervisor):
        found += node.managed
    if access.on_reject:
        found.append(access.on_reject)
    return found


def _unreachable(build: Builder, nodes: dict[str, Compiled], edges: list[ir.Edge], start: str) -> None:
    def onward(node_id: str) -> list[str]:
        compiled = nodes[node_id]
        return [n for n in successors(compiled.node, compiled.access, edges) if n in nodes]

    seen = set(reachable(start, onward))
    for node_id, compiled in nodes.items():
        if node_id not in seen:
            hint = f"add an edge to it, or remove it (the run starts at '{start}')"
            build.problem(compiled.path, f"node '{node_id}' cannot be reached from the start node", hint)


def _unwritten_reads(build: Builder, nodes: dict[str, Compiled], inputs: set[str]) -> None:
    written = set(inputs)
    for compiled in nodes.values():
        written |= set(compiled.access.write_keys) | (
            {compiled.access.write_key} if compiled.access.write_key else set()
        )
    for node_id, compiled in nodes.items():
        for j, key in enumerate(compiled.access.read_keys):
            if key != "*" and key not in written:
                hint = did_you_mean(key, written) or "write it from a node (write_keys) or declare it in inputs"
                build.problem(
                    (*compiled.path, "read_keys", j), f"node '{node_id}' reads '{key}', which no node writes", hint
                )


def _raw(build: Builder, path: tuple) -> dict:
    node = build.data
    for key in path:
        node = node[key]
    return node if isinstance(node, dict) else {}
