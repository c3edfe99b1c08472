"""Compiling a state graph to the IR: `compile`, which the registry calls (the package
says what the language is and which files are in it)."""

from __future__ import annotations

import os
from typing import Any

from agentrun.lang import expressions, grants, ir
from agentrun.lang.agent_uri import AgentUri
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.dialects.cycgraph import NAME, is_bundle
from agentrun.lang.dialects.cycgraph.checks import check_graph
from agentrun.lang.dialects.cycgraph.fanout import attach_workers, check_subgraph_refs
from agentrun.lang.dialects.cycgraph.nodes import Compiled, NodeCompiler
from agentrun.lang.dialects.cycgraph.tools import grant_of
from agentrun.lang.errors import SpecError
from agentrun.lang.yamlpos import PosDict, load_mapping, plain, position

GRAPH_KEYS = {
    "id",
    "name",
    "description",
    "version",
    "inputs",
    "outputs",
    "nodes",
    "edges",
    "start_node",
    "end_nodes",
    "strict_taint",
    "strict_keys",
    "max_iterations",
    "goal",
    "constraints",
    "policy",
}
BUNDLE_KEYS = {"manifest", "graph", "agents", "graphs", "policy"}
MANIFEST_KEYS = {"name", "version", "description", "source", "inputs", "outputs", "requires"}
AGENT_KEYS = {
    "id",
    "name",
    "role",
    "model",
    "provider",
    "system_prompt",
    "temperature",
    "max_tokens",
    "max_steps",
    "tools",
    "description",
    "provider_options",
    "model_preference",
    "permissions",
}
# cycgraph's run default: a run fails past this many node runs.
MAX_ITERATIONS = 50


def _subgraphs(build: Builder, compiler: NodeCompiler, raw: Any) -> dict[str, ir.Graph]:
    """A bundle's `graphs`: each compiled and checked as the main graph is, by its id."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        build.problem(("graphs",), "graphs: must be a list of graphs", "write graphs: [{id: child, nodes: [...]}]")
        return {}
    found: dict[str, ir.Graph] = {}
    for i, graph in enumerate(raw):
        at = ("graphs", i)
        if not isinstance(graph, PosDict) or not graph.get("id"):
            build.problem(at, "a graph of graphs: needs an id:", "write {id: child, name: ..., nodes: [...], ...}")
            continue
        build.unknown_keys(graph, at, GRAPH_KEYS)
        compiled = _graph(build, compiler, graph, at)
        if str(graph["id"]) in found:
            build.problem((*at, "id"), f"two graphs have the id '{graph['id']}'", "give each graph its own id")
        elif compiled is not None:
            found[str(graph["id"])] = compiled
    return found


def _graph(build: Builder, compiler: NodeCompiler, graph: PosDict, base: tuple) -> ir.Graph | None:
    raw_nodes = graph.get("nodes")
    if not isinstance(raw_nodes, list):
        build.problem((*base, "nodes"), "nodes: must be a list of nodes", "write nodes: [{id: a, type: agent}, ...]")
        return None
    compiler.graph_id = _graph_id(graph)
    compiled = [compiler.node(raw, (*base, "nodes", i)) for i, raw in enumerate(raw_nodes)]
    nodes = {c.node.id: c for c in compiled if c is not None}
    _team_reads(nodes, raw_nodes)
    edges = _edges(build, graph.get("edges"), base)
    workers = attach_workers(build, nodes, edges, raw_nodes)
    start = graph.get("start_node")
    end_nodes = [str(n) for n in graph.get("end_nodes") or []]
    check_graph(build, graph, base, nodes, edges, bool(graph.get("strict_keys")), _input_names(graph))
    line, _ = build_position(build, base)
    max_steps = graph.get("max_iterations", MAX_ITERATIONS)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        build.problem((*base, "max_iterations"), "max_iterations: must be a whole number of 1 or more", "")
        max_steps = MAX_ITERATIONS
    return ir.Graph(
        id=_graph_id(graph),
        title=str(graph.get("name") or ""),
        line=line,
        nodes={nid: c.node for nid, c in nodes.items()},
        edges=edges,
        start=str(start or ""),
        end_nodes=end_nodes,
        access={**workers, **{nid: c.access for nid, c in nodes.items()}},
        strict_taint=bool(graph.get("strict_taint")),
        max_steps=max_steps,
        outputs=[str(k) for k in graph.get("outputs") or {}] if isinstance(graph.get("outputs"), dict) else [],
    )


def _graph_id(graph: PosDict) -> str:
    return str(graph.get("id") or graph.get("name") or "graph")


def _team_reads(nodes: dict[str, Compiled], raw_nodes: list[Any]) -> None:
    """A supervisor that lists no read_keys reads what the nodes it manages write, as in cycgraph."""
    for raw in raw_nodes:
        found = nodes.get(str(raw.get("id"))) if isinstance(raw, dict) and "read_keys" not in raw else None
        if found is None or not isinstance(found.node, ir.Supervisor):
            continue
        team = [nodes[m].access for m in found.node.managed if m in nodes]
        keys = [k for access in team for k in [*access.write_keys, access.write_key] if k]
        found.access.read_keys = list(dict.fromkeys(keys))


def build_position(build: Builder, path: tuple) -> tuple[int, int]:
    return position(build.data, path)


def _edges(build: Builder, raw: Any, base: tuple) -> list[ir.Edge]:
    if not isinstance(raw, list):
        build.problem((*base, "edges"), "edges: must be a list", "write edges: [{source: a, target: b}]")
        return []
    edges = []
    for i, edge in enumerate(raw):
        at = (*base, "edges", i)
        if not isinstance(edge, PosDict) or "source" not in edge or "target" not in edge:
            build.problem(at, "an edge needs source: and target:", "write {source: a, target: b}")
            continue
        build.unknown_keys(edge, at, {"id", "source", "target", "condition", "label"})
        when = _condition(build, edge.get("condition"), (*at, "condition"))
        edges.append(
            ir.Edge(source=str(edge["source"]), target=str(edge["target"]), when=when, line=at_line(build, at))
        )
    return edges


def at_line(build: Builder, path: tuple) -> int:
    return build_position(build, path)[0]


def _condition(build: Builder, raw: Any, at: tuple) -> str | None:
    """An edge's condition: absent or `{type: always}` always holds; `{type: conditional,
    condition: EXPR}` holds when EXPR is true (a bare string is the expression)."""
    if raw is None:
        return None
    if isinstance(raw, str):
        text = raw
    elif isinstance(raw, PosDict):
        kind = raw.get("type", "conditional" if "condition" in raw else "always")
        if kind == "always":
            return None
        if kind != "conditional" or not isinstance(raw.get("condition"), str):
            hint = "write condition: {type: conditional, condition: 'memory.score > 0.7'} or {type: always}"
            build.problem(at, "an edge's condition is {type: always} or {type: conditional, condition: EXPR}", hint)
            return None
        text, at = raw["condition"], (*at, "condition")
    else:
        build.problem(at, "an edge's condition must be a mapping or an expression", "")
        return None
    try:
        expressions.compile_expression(text)
    except expressions.ExpressionError as exc:
        build.problem(
            at, f"condition '{text}' cannot be read: {exc}", "write e.g. memory.score < 0.7 and memory.tries >= 2"
        )
        return None
    return text


def _agents(build: Builder, raw: Any) -> dict[str, PosDict]:
    """A bundle's agents by id: a list of agents with `id:` (cycgraph's form), or a mapping of id to agent."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        items = [(("agents", aid), aid, a) for aid, a in raw.items()]
    elif isinstance(raw, list):
        items = [(("agents", i), a.get("id") if isinstance(a, dict) else None, a) for i, a in enumerate(raw)]
    else:
        build.problem(("agents",), "agents: must be a list of agents", "write agents: [{id: writer, model: ...}]")
        return {}
    agents: dict[str, PosDict] = {}
    for at, aid, agent in items:
        if aid is None or not isinstance(agent, PosDict):
            build.problem(at, "an agent must be a mapping with an id:", "write {id: writer, model: gpt-4o-mini}")
            continue
        build.unknown_keys(agent, at, AGENT_KEYS)
        temperature = agent.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1
        ):
            build.problem((*at, "temperature"), f"agent '{aid}': temperature must be a number from 0 to 1", "")
        agents[str(aid)] = agent
    return agents


def _agent_info(aid: str, agent: PosDict) -> ir.AgentInfo:
    temperature = agent.get("temperature")
    return ir.AgentInfo(
        name=str(agent.get("name") or aid),
        role=str(agent.get("role") or agent.get("description") or ""),
        uri=_uri(agent),
        system=str(agent.get("system_prompt") or ""),
        temperature=float(temperature) if isinstance(temperature, (int, float)) else None,
    )


def _uri(agent: PosDict) -> str:
    """The agent URI a bundle's model names: `anthropic:` for the anthropic provider, else
    `openai:` (any OpenAI-compatible server: OpenAI, Ollama, vLLM; OPENAI_BASE_URL says which)."""
    model = agent.get("model")
    if not model:
        return ""
    model = str(model)
    if ":" in model and AgentUri.parse(model).scheme in {"openai", "anthropic"}:
        return model
    return f"{'anthropic' if agent.get('provider') == 'anthropic' else 'openai'}:{model}"


def _input_names(graph: PosDict) -> set[str]:
    inputs = graph.get("inputs")
    return set(inputs) if isinstance(inputs, dict) else set()


def _params(build: Builder, raw: Any, base: tuple, description: str) -> dict[str, ir.Param]:
    """The graph's inputs as params, each checked against its JSON Schema before the run; an input
    is required unless it says `required: false` (cycgraph's default), and its default may sit in
    its schema. `goal` and `constraints` are the run's own (cycgraph's run input), the goal
    defaulting to the description."""
    params = {
        "goal": ir.Param(name="goal", default=description, description="what the run is for"),
        "constraints": ir.Param(name="constraints", type="json", default=[], description="rules the run must respect"),
    }
    if raw is None:
        return params
    if not isinstance(raw, PosDict):
        build.problem((*base, "inputs"), "inputs: must map each input's name to {schema, required}", "")
        return params
    for name, spec in raw.items():
        at = (*base, "inputs", name)
        spec = spec if isinstance(spec, PosDict) else PosDict()
        build.unknown_keys(spec, at, {"schema", "required", "description", "default"})
        schema = spec.get("schema") if isinstance(spec.get("schema"), dict) else None
        kind = (schema or {}).get("type", "string")
        params[str(name)] = ir.Param(
            name=str(name),
            type={"object": "json", "array": "json"}.get(kind, kind if isinstance(kind, str) else "json"),
            required=spec.get("required", True) is not False and "default" not in spec,
            default=plain(spec.get("default", (schema or {}).get("default"))),
            description=str(spec.get("description") or ""),
            json_schema=plain(schema),
            line=at_line(build, at),
        )
    return params


def compile(path: str, text: str, params: set[str]) -> ir.Plan:
    data = load_mapping(text, path)
    build = Builder(path, data)
    bundle = is_bundle(data)
    base: tuple = ("graph",) if bundle else ()
    graph = data.get("graph") if bundle else data
    raw_manifest = data.get("manifest") if bundle else None
    manifest: dict[str, Any] = raw_manifest if isinstance(raw_manifest, PosDict) else PosDict()
    if bundle:
        build.unknown_keys(data, (), BUNDLE_KEYS)
        build.unknown_keys(manifest, ("manifest",), MANIFEST_KEYS)
    if not isinstance(graph, PosDict):
        build.problem(base, "a bundle's graph: must be a mapping", "write graph: {nodes: [...], edges: [...]}")
        raise SpecError(build.problems)
    build.unknown_keys(graph, base, GRAPH_KEYS)
    agents = _agents(build, data.get("agents") if bundle else None)
    compiler = NodeCompiler(build, agents, _grants(build, data.get("agents") if bundle else None, agents))
    root = _graph(build, compiler, graph, base)
    subgraphs = _subgraphs(build, compiler, data.get("graphs") if bundle else None)
    check_subgraph_refs(build, compiler.subgraph_refs, subgraphs)
    name = str(manifest.get("name") or graph.get("name") or graph.get("id") or os.path.basename(path))
    description = str(manifest.get("description") or graph.get("description") or "")
    inputs, inputs_at = (graph.get("inputs"), base) if "inputs" in graph else (manifest.get("inputs"), ("manifest",))
    plan_params = _params(build, inputs, inputs_at, description)
    policy = _policy(build, path, data)
    if build.problems or root is None:
        raise SpecError(build.problems)
    nodes = [*ir.walk(root), *(n for g in subgraphs.values() for n in ir.walk(g))]
    host_tools: dict[str, dict[str, Any]] = {name: {} for node in nodes for name in _host_names(node)}
    host_tools |= _required_tools(manifest)
    return ir.Plan(
        name=name,
        description=description,
        version=str(manifest.get("version") or graph.get("version") or ""),
        dialect=NAME,
        source=path,
        spec_dir=os.path.dirname(os.path.abspath(path)),
        root=root,
        params=plan_params,
        goal=str(graph.get("goal") or description),
        constraints=[str(c) for c in graph.get("constraints") or []],
        agents={aid: _agent_info(aid, a) for aid, a in agents.items()},
        subgraphs=subgraphs,
        lifecycle="refresh",
        warnings=[str(w) for w in build.warnings],
        host_tools=host_tools,
        **policy,
    )


def _host_names(node: ir.NodeBase) -> list[str]:
    grant = getattr(node, "grant", None)
    return list(grant.host) if isinstance(grant, ir.ToolGrant) else []


def _required_tools(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A bundle's `manifest.requires.tools`: each name with the argument schema the bound tool takes."""
    requires = manifest.get("requires")
    listed = requires.get("tools") if isinstance(requires, dict) else None
    found: dict[str, dict[str, Any]] = {}
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            schema = item.get("input_schema")
            found[item["name"]] = dict(schema) if isinstance(schema, dict) else {}
    return found


def _grants(build: Builder, raw: Any, agents: dict[str, PosDict]) -> dict[str, ir.ToolGrant | None]:
    """What each agent's own `tools` grant, its problems said where the agent writes them."""
    ats = {aid: ("agents", aid) for aid in agents} if isinstance(raw, dict) else {}
    if isinstance(raw, list):
        ats = {str(a.get("id")): ("agents", i) for i, a in enumerate(raw) if isinstance(a, dict)}
    return {
        aid: grant_of(build, a.get("tools"), (*ats.get(aid, ()), "tools"), a.get("max_steps"))
        for aid, a in agents.items()
    }


def _policy(build: Builder, path: str, data: PosDict) -> dict[str, Any]:
    """The policy.toml the file names at its top (`policy: policy.toml`, beside it or a path)."""
    name = data.get("policy") if isinstance(data, PosDict) else None
    if not name:
        return {}
    found = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(str(name)))
    tables, why, hint = grants.read_policy(found)
    if tables is None:
        build.problem(
            ("policy",),
            f"policy: {why}",
            hint or "policy: names a policy.toml (relative to the spec) in the Agentfile's format",
        )
        return {}
    return {"tool_policy": tables, "policy_file": found}
