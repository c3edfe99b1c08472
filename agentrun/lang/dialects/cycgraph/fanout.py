"""cycgraph's nodes that run other work: `map` (a worker node once per item, then a synthesizer),
`voting` (voter agents in parallel, then a tally or a judge) and `subgraph` (one of the bundle's
graphs, as a child run).

A map's worker is a node of the graph that only its map runs: it moves into the map as its body,
and what no edge reaches it from is not a dead end. A synthesizer the map names follows it when
the map has no edge of its own, and reads what the map writes unless it lists its own read_keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.lang import ir
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.errors import did_you_mean
from agentrun.lang.reach import reachable
from agentrun.lang.yamlpos import PosDict, plain

if TYPE_CHECKING:
    from agentrun.lang.dialects.cycgraph.nodes import Compiled, NodeCompiler

MAX_ITEMS = 1000  # cycgraph's ceiling on a map's items
MAP_OUTPUTS = ("results", "errors", "count", "error_count")  # what a map writes, as <id>_<name>
STRATEGIES = ("majority_vote", "weighted_vote", "llm_judge")


def map_node(nc: NodeCompiler, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Map:
    """The map with a placeholder body; `attach_workers` puts its worker there once every node of
    the graph is compiled."""
    node_id = common["id"]
    worker = cfg.get("worker_node_id")
    if not isinstance(worker, str) or not worker:
        nc.build.problem(nc.at(at, "map", "worker_node_id"), f"map '{node_id}' names no worker_node_id", "")
        worker = ""
    static, path = cfg.get("static_items"), cfg.get("items_path")
    if (static is None) == (path is None):
        nc.build.problem(at, f"map '{node_id}' needs items_path or static_items (one of them)", _ITEMS_HINT)
    if static is not None and not isinstance(static, list):
        nc.build.problem(nc.at(at, "map", "static_items"), "static_items: must be a list", "")
        static = []
    if path is not None and (not isinstance(path, str) or not path.startswith("$")):
        nc.build.problem(nc.at(at, "map", "items_path"), "items_path: must be a JSON path", _ITEMS_HINT)
        path = None
    max_items = nc.count(cfg, at, "map", "max_items", MAX_ITEMS, MAX_ITEMS)
    if isinstance(static, list) and len(static) > max_items:
        nc.build.problem(nc.at(at, "map", "static_items"), f"{len(static)} static_items, over max_items {max_items}")
    strategy = cfg.get("error_strategy", "best_effort")
    if strategy not in ("fail_fast", "best_effort"):
        nc.build.problem(nc.at(at, "map", "error_strategy"), f"error_strategy '{strategy}'", "fail_fast or best_effort")
        strategy = "best_effort"
    access.write_keys, access.write_key = [f"{node_id}_{name}" for name in MAP_OUTPUTS], None
    return ir.Map(
        body=ir.Evaluate(id=worker, condition="true"),
        items=plain(static) if isinstance(static, list) else None,
        items_path=path or "",
        max_items=max_items,
        concurrency=nc.count(cfg, at, "map", "max_concurrency", 5, 50),
        error_strategy=strategy,
        outcomes=True,
        **common,
    )


_ITEMS_HINT = "items_path reads the node's view of the run: items_path: $.memory.topics"


def attach_workers(
    build: Builder, nodes: dict[str, Compiled], edges: list[ir.Edge], raw_nodes: list[Any]
) -> dict[str, ir.Access]:
    """Move each map's worker into it, add the edge to its synthesizer, and let the synthesizer read
    the map's results. What each moved worker writes, by its id (the map writes its results so)."""
    targets = {e.target for e in edges}
    moved: dict[str, ir.Access] = {}
    for name, compiled in list(nodes.items()):
        node = compiled.node
        if not isinstance(node, ir.Map) or not node.outcomes:
            continue
        worker_id = node.body.id
        worker = nodes.get(worker_id)
        if worker is None:
            hint = did_you_mean(worker_id, nodes) or "the nodes: " + ", ".join(nodes)
            build.problem(compiled.path, f"map '{name}': worker node '{worker_id}' is not a node of the graph", hint)
            continue
        if not isinstance(worker.node, (ir.Task, ir.Provider)):
            build.problem(worker.path, f"map '{name}': its worker '{worker_id}' must be an agent or a tool node", "")
            continue
        if worker_id in targets:
            hint = "a worker runs only under its map: point the edge at the map instead"
            build.problem(worker.path, f"an edge leads to '{worker_id}', the worker of map '{name}'", hint)
            continue
        timeout = _task_timeout(raw_nodes, name)
        body = worker.node.model_copy(update={"timeout_s": timeout} if timeout else {})
        nodes[name] = type(compiled)(node.model_copy(update={"body": body}), compiled.access, compiled.path)
        moved[worker_id] = nodes.pop(worker_id).access
        _synthesizer(build, nodes, edges, compiled, raw_nodes)
    return moved


def _synthesizer(
    build: Builder, nodes: dict[str, Compiled], edges: list[ir.Edge], compiled: Compiled, raw_nodes: list[Any]
) -> None:
    name = compiled.node.id
    synth = _raw_config(raw_nodes, name).get("synthesizer_node_id")
    if synth is None:
        return
    if synth not in nodes:
        hint = did_you_mean(str(synth), nodes) or "the nodes: " + ", ".join(nodes)
        build.problem(compiled.path, f"map '{name}': synthesizer node '{synth}' is not a node of the graph", hint)
        return
    if not any(e.source == name for e in edges):
        edges.append(ir.Edge(source=name, target=str(synth), line=compiled.node.line))
    raw = next((r for r in raw_nodes if isinstance(r, dict) and r.get("id") == synth), {})
    if "read_keys" not in raw:
        nodes[str(synth)].access.read_keys = list(compiled.access.write_keys)


def _raw_config(raw_nodes: list[Any], node_id: str) -> dict[str, Any]:
    raw = next((r for r in raw_nodes if isinstance(r, dict) and r.get("id") == node_id), {})
    nested = raw.get("map_reduce_config")
    return {**raw, **(nested if isinstance(nested, dict) else {})}


def _task_timeout(raw_nodes: list[Any], node_id: str) -> float | None:
    value = _raw_config(raw_nodes, node_id).get("task_timeout_ms")
    return float(value) / 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def voting_node(nc: NodeCompiler, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Voting:
    node_id, title = common["id"], common["title"] or common["id"]
    voters = cfg.get("voter_agent_ids")
    if not isinstance(voters, list) or not voters or not all(isinstance(v, str) for v in voters):
        nc.build.problem(nc.at(at, "voting", "voter_agent_ids"), f"voting '{node_id}' names no voters", _VOTERS)
        voters = []
    for i, voter in enumerate(voters):
        nc.known_agent(voter, nc.at(at, "voting", "voter_agent_ids") + (i,))
    strategy = cfg.get("strategy", "majority_vote")
    if strategy not in STRATEGIES:
        hint = did_you_mean(str(strategy), STRATEGIES) or "use " + ", ".join(STRATEGIES)
        nc.build.problem(nc.at(at, "voting", "strategy"), f"voting '{node_id}': no strategy '{strategy}'", hint)
        strategy = "majority_vote"
    judge_id = cfg.get("judge_agent_id")
    if strategy == "llm_judge" and not judge_id:
        nc.build.problem(at, f"voting '{node_id}' is judged (llm_judge) but names no judge_agent_id", _VOTERS)
    if judge_id:
        nc.known_agent(str(judge_id), nc.at(at, "voting", "judge_agent_id"))
    quorum = cfg.get("quorum")
    if quorum is not None:
        quorum = nc.count(cfg, at, "voting", "quorum", 1, max(len(voters), 1))
    vote_key = str(cfg.get("vote_key") or "vote")
    access.write_keys, access.write_key = [vote_key, f"{node_id}_consensus", f"{node_id}_votes"], vote_key
    timeout = cfg.get("task_timeout_ms")
    timeout_s = float(timeout) / 1000 if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) else None
    instructions = nc.instructions(cfg)
    ask = (
        f"You are one of {len(voters)} voters; vote on your own judgement. "
        f'Reply with JSON: {{"{vote_key}": <your vote>, "reasoning": "<why>"}}.'
    )
    task = nc.prompt_of(title, "\n\n".join(p for p in (instructions, ask) if p))
    return ir.Voting(
        voters=[
            ir.Task(
                id=f"{node_id}_voter_{i}",
                title=f"{title} voter {i + 1}",
                agent=voter,
                prompt=task,
                protocol="plain",
                timeout_s=timeout_s,
                line=common["line"],
            )
            for i, voter in enumerate(voters)
        ],
        strategy=strategy,
        weights=_weights(nc, cfg, at),
        quorum=quorum,
        judge=_judge(nc, str(judge_id), title, common) if strategy == "llm_judge" and judge_id else None,
        vote_key=vote_key,
        **common,
    )


_VOTERS = "write voting_config: {voter_agent_ids: [a, b, c], strategy: majority_vote}"


def _weights(nc: NodeCompiler, cfg: dict, at: tuple) -> dict[str, float]:
    weights = cfg.get("weights") or {}
    good = isinstance(weights, dict) and all(
        isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights.values()
    )
    if not good:
        nc.build.problem(nc.at(at, "voting", "weights"), "weights: must map voter agent ids to numbers", "")
        return {}
    return {str(k): float(v) for k, v in weights.items()}


def _judge(nc: NodeCompiler, judge_id: str, title: str, common: dict) -> ir.Task:
    ask = (
        "You judge a vote. The votes are in the input. Pick the best of them. "
        'Reply with JSON: {"winner": <the vote you pick, as it was given>, "reasoning": "<why>"}.'
    )
    return ir.Task(
        id=f"{common['id']}_judge",
        title=f"{title} judge",
        agent=judge_id,
        prompt=nc.prompt_of(f"{title} judge", ask),
        protocol="plain",
        line=common["line"],
    )


def subgraph_node(nc: NodeCompiler, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Subflow:
    node_id = common["id"]
    graph = cfg.get("subgraph_id")
    if not isinstance(graph, str) or not graph:
        nc.build.problem(at, f"subgraph '{node_id}' names no subgraph_id", "write subgraph_id: ID of one of graphs:")
        graph = ""
    nc.subgraph_refs.append((graph, nc.graph_id, nc.at(at, "subgraph", "subgraph_id")))
    mappings = {}
    for name in ("input_mapping", "output_mapping"):
        value = cfg.get(name, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            nc.build.problem(nc.at(at, "subgraph", name), f"{name}: must map memory keys to memory keys", _MAPPING)
            value = {}
        mappings[name] = {str(k): str(v) for k, v in value.items()}
    access.write_keys, access.write_key = list(mappings["output_mapping"].values()), None
    max_steps = cfg.get("max_iterations")
    return ir.Subflow(
        graph=graph,
        max_steps=nc.count(cfg, at, "subgraph", "max_iterations", 50, 10_000) if max_steps is not None else None,
        **mappings,
        **common,
    )


_MAPPING = "write input_mapping: {parent_key: child_key} and output_mapping: {child_key: parent_key}"


def check_subgraph_refs(build: Builder, refs: list[tuple[str, str, tuple]], graphs: dict[str, ir.Graph]) -> None:
    """Each subgraph node names a graph of the bundle, and no graph runs itself, however deep."""
    calls: dict[str, set[str]] = {}
    for graph, inside, at in refs:
        if graph and graph not in graphs:
            hint = did_you_mean(graph, graphs) or (
                "the bundle's graphs: " + ", ".join(graphs) if graphs else "add it to the bundle's graphs:"
            )
            build.problem(at, f"no graph '{graph}' among the bundle's graphs", hint)
        calls.setdefault(inside, set()).add(graph)
    for graph, inside, at in refs:
        if graph and _reaches(calls, graph, inside):
            build.problem(at, f"graph '{graph}' runs '{inside}', which runs it again: subgraphs cannot recurse", "")


def _reaches(calls: dict[str, set[str]], start: str, goal: str) -> bool:
    return goal in reachable(start, lambda graph: calls.get(graph, set()))
