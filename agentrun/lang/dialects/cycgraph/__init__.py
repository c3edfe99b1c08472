"""cycgraph's state graphs, JSON or YAML, compiled to the IR's graph node.

Two forms: a bare graph `{name, inputs, nodes, edges, start_node, end_nodes, …}` and a bundle
`{manifest, graph, agents, graphs}` whose `agents` give each agent's model, system prompt and
temperature, and whose `graphs` are the subgraphs its nodes may run. Each graph node compiles to an
IR node (`nodes`); each graph's shape is checked as a whole (`checks`) so every
problem is said at once with file:line:column and a hint.

As in cycgraph, a node sees the goal, the constraints and only the memory keys it lists in
`read_keys` (a supervisor with none listed, what its managed nodes write), and an agent's thread
lasts one node run: the plan's agents are fresh for every node (`refresh`), so a long cycle sends
no ever-growing transcript.
"""

from __future__ import annotations

from typing import Any

from agentrun.lang import ir
from agentrun.lang.yamlpos import mapping_or_none

NAME = "cycgraph"
MARKS = "a state graph (cycgraph) has nodes:, edges: and start_node:, at the top or under 'graph:' (beside agents: and manifest:)"
TRAITS = ir.Traits(state_graph=True, stores_with="a node's write_keys")
EXAMPLES = (  # under examples/; beside them, *.replies.yaml are their agents' recorded replies
    "graphs/fan_out.yaml",
    "graphs/hub_and_spoke.yaml",
    "graphs/review_loop.yaml",
    "graphs/market_analysis.json",
)


def detect(path: str, text: str) -> bool:
    data = mapping_or_none(text)
    if data is None:
        return False
    graph = data.get("graph") if is_bundle(data) else data
    return isinstance(graph, dict) and "nodes" in graph and "edges" in graph and "start_node" in graph


def is_bundle(data: dict[str, Any]) -> bool:
    """A bundle holds its graph under `graph:`, with `agents:` and a `manifest:` when it has them;
    a bare graph has its nodes at the top."""
    return "manifest" in data or (isinstance(data.get("graph"), dict) and "nodes" not in data)
