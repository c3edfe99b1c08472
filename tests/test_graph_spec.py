"""A state graph's mistakes said before any run, each with file:line:column and a hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrun.lang import ir, params
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from tests.conftest import write_spec

BASE = """name: g
nodes:
  - {id: a, type: agent, read_keys: [topic]}
  - {id: b, type: agent}
edges:
  - {source: a, target: b}
start_node: a
end_nodes: [b]
"""


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("{id: b, type: agent}", "{id: b, type: agnet}"),
            ":4:13: error: node 'b' has type 'agnet', which graphs do not have\n  hint: did you mean 'agent'?",
        ),
        (("target: b}", "target: c}"), ":6:17: error: edge target 'c' is not a node of the graph"),
        (("start_node: a", "start_node: x"), ":7:1: error: start_node 'x' is not a node of the graph"),
        (("  - {source: a, target: b}\n", ""), ":4:5: error: node 'b' cannot be reached from the start node"),
        (("name: g\n", "name: g\nstrict_keys: true\n"), ":4:26: error: node 'a' reads 'topic', which no node writes"),
    ],
)
def test_a_graph_mistake_is_said_where_it_is(tmp_path, change, said):
    spec = write_spec(tmp_path, BASE.replace(*change), name="g.yaml")
    with pytest.raises(SpecError) as caught:
        load(str(spec))
    assert said in str(caught.value)


def test_a_supervisor_managing_an_unknown_node_and_an_input_breaking_its_schema(tmp_path):
    text = BASE.replace("{id: b, type: agent}", "{id: b, type: supervisor, managed_nodes: [a, c]}")
    with pytest.raises(SpecError, match=r"g.yaml:4:\d+: error: supervisor 'b' manages 'c', which is not a node"):
        load(str(write_spec(tmp_path, text, name="g.yaml")))
    typed = BASE + "inputs:\n  topic: {schema: {type: string, minLength: 3}, required: true}\n"
    plan = load(str(write_spec(tmp_path, typed, name="g.yaml")))
    with pytest.raises(SpecError, match="param 'topic': 'ab' is too short"):
        params.bind(plan, {"topic": "ab"})


BUNDLE = {
    "manifest": {"name": "b", "version": "1.0.0", "requires": {"tools": [], "mcp_servers": [], "models": ["m"]}},
    "graph": {
        "id": "main",
        "name": "main",
        "description": "d",
        "inputs": {
            "topic": {"schema": {"type": "string"}},
            "depth": {"schema": {"type": "integer", "default": 2}, "required": False},
        },
        "nodes": [
            {"id": "lead", "type": "supervisor", "agent_id": "a1", "supervisor_config": {"managed_nodes": ["work"]}},
            {"id": "work", "type": "agent", "agent_id": "a2", "read_keys": ["topic"], "write_keys": ["notes"]},
        ],
        "edges": [{"source": "lead", "target": "work"}, {"source": "work", "target": "lead"}],
        "start_node": "lead",
        "end_nodes": [],
    },
    "agents": [
        {"id": "a1", "name": "Lead", "model": "claude-x", "provider": "anthropic", "system_prompt": "Lead {{ x }}."},
        {
            "id": "a2",
            "name": "Worker",
            "model": "m",
            "provider": "ollama",
            "system_prompt": "Work.",
            "temperature": 0.3,
        },
    ],
    "graphs": [
        {
            "id": "child",
            "name": "child",
            "description": "a subgraph",
            "nodes": [{"id": "only", "type": "agent", "agent_id": "a2", "read_keys": ["notes"]}],
            "edges": [],
            "start_node": "only",
            "end_nodes": ["only"],
        }
    ],
}


def test_a_bundle_gives_its_agents_models_system_prompts_and_temperatures_and_carries_its_subgraphs(tmp_path):
    plan = load(str(write_spec(tmp_path, json.dumps(BUNDLE, indent=2), name="b.json")))
    agents = {aid: (a.name, a.uri, a.system, a.temperature) for aid, a in plan.agents.items()}
    assert agents == {
        "a1": ("Lead", "anthropic:claude-x", "Lead {{ x }}.", None),
        "a2": ("Worker", "openai:m", "Work.", 0.3),
    }
    assert plan.lifecycle == "refresh", "an agent's thread lasts one node run"
    assert list(plan.subgraphs) == ["child"] and list(plan.subgraphs["child"].nodes) == ["only"]
    assert plan.root.access["lead"].read_keys == ["notes"], "a supervisor reads what its team writes"
    assert plan.root.access["work"].read_keys == ["topic"]
    assert plan.params["topic"].required and not plan.params["depth"].required
    assert params.bind(plan, {"topic": "t"})["depth"] == 2


def test_a_bundle_without_a_manifest_is_a_state_graph_with_its_agents(tmp_path):
    bare = {"graph": BUNDLE["graph"], "agents": BUNDLE["agents"]}
    plan = load(str(write_spec(tmp_path, json.dumps(bare, indent=2), name="b.json")))
    assert plan.dialect == "cycgraph" and plan.name == "main"
    assert {aid: a.uri for aid, a in plan.agents.items()} == {"a1": "anthropic:claude-x", "a2": "openai:m"}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda b: b["graphs"][0]["edges"].append({"source": "only", "target": "nowhere"}),
            r"b\.json:\d+:\d+: error: edge target 'nowhere' is not a node of the graph",
        ),
        (lambda b: b["graphs"].append(b["graphs"][0]), r"error: two graphs have the id 'child'"),
        (
            lambda b: b["agents"][1].update(temperature=1.5),
            r"error: agent 'a2': temperature must be a number from 0 to 1",
        ),
        (lambda b: b["manifest"].update(inputz={}), r"error: unknown key 'inputz'\n  hint: did you mean 'inputs'\?"),
        (lambda b: b["graph"]["nodes"][1].update(agent_id="a3"), r"error: no agent 'a3' in the bundle's agents"),
    ],
)
def test_a_bundle_mistake_is_said_where_it_is(tmp_path, change, said):
    bundle = json.loads(json.dumps(BUNDLE))
    change(bundle)
    with pytest.raises(SpecError, match=said):
        load(str(write_spec(tmp_path, json.dumps(bundle, indent=2), name="b.json")))


def test_a_bundle_agents_model_is_used_when_no_flag_or_agentrun_yaml_names_an_agent(tmp_path):
    from agentrun.explain import agents
    from agentrun.lang.check import agent_ids

    bundle = (Path(__file__).parent.parent / "examples" / "graphs" / "market_analysis.json").read_text()
    plan = load(str(write_spec(tmp_path, bundle, name="m.json")))
    declared = {aid: a.uri for aid, a in plan.agents.items() if a.uri}

    def resolve(*flags: str) -> tuple[str, dict[str, str]]:
        return agents.resolve(list(flags), str(tmp_path), agent_ids(plan), True, {}, declared)

    models = {"lead-analyst": "openai:gpt-4o", "researcher": "openai:gpt-4o-mini", "writer": "openai:gpt-4o-mini"}
    assert resolve() == ("", models)
    assert resolve("researcher=openai:local") == ("", {**models, "researcher": "openai:local"})
    assert resolve("openai:everyone") == ("openai:everyone", {}), "a default for the run is given: it wins"
    (tmp_path / "agentrun.yaml").write_text("agents:\n  writer: 'command:cat'\n")
    assert resolve() == ("", {**models, "writer": "command:cat"})


FANOUT = """manifest: {name: g}
graph:
  id: main
  nodes:
    - {id: m, type: map, map_reduce_config: {worker_node_id: w, items_path: $.memory.xs}}
    - {id: w, type: agent}
    - {id: v, type: voting, voting_config: {voter_agent_ids: [a, b], strategy: majority_vote}}
    - {id: s, type: subgraph, subgraph_config: {subgraph_id: child}}
    - {id: ok, type: approval}
  edges:
    - {source: m, target: v}
    - {source: v, target: s}
    - {source: s, target: ok}
  start_node: m
  end_nodes: [ok]
graphs:
  - {id: child, nodes: [{id: only, type: agent}], edges: [], start_node: only, end_nodes: [only]}
"""


def test_map_voting_subgraph_and_failure_policies_compile_with_cycgraphs_defaults(tmp_path):
    from agentrun.workflows.interpreter import backoff_s

    graph = load(str(write_spec(tmp_path, FANOUT, "g.yaml"))).root
    assert isinstance(graph, ir.Graph)
    mapper, vote, sub, ok = (graph.nodes[n] for n in ("m", "v", "s", "ok"))
    assert isinstance(mapper, ir.Map) and mapper.body.id == "w" and "w" not in graph.nodes, "the worker is the map's"
    assert (mapper.concurrency, mapper.error_strategy, mapper.max_items) == (5, "best_effort", 1000)
    assert graph.access["m"].write_keys == ["m_results", "m_errors", "m_count", "m_error_count"]
    assert isinstance(vote, ir.Voting) and [t.agent for t in vote.voters] == ["a", "b"] and vote.vote_key == "vote"
    assert isinstance(sub, ir.Subflow) and sub.graph == "child"
    retry = vote.retry
    assert retry == ir.Retry(attempts=3, backoff="exponential", delay_s=1.0, counts="retries", max_delay_s=60.0)
    assert [backoff_s(retry, n) for n in (2, 3)] == [1.0, 2.0], "the first retry waits initial_backoff_ms"
    assert [backoff_s(retry.model_copy(update={"delay_s": 40.0}), n) for n in (2, 3)] == [40.0, 60.0]
    assert isinstance(ok, ir.Human) and ok.retry == ir.Retry(), "a person's answer is never retried"
    assert (ok.timeout_s, ok.on_timeout, ok.choices) == (86400, "reject", ["approve", "reject"])
    once = load(
        str(
            write_spec(
                tmp_path, FANOUT.replace("type: agent}", "type: agent, failure_policy: {max_retries: 0}}", 1), "g.yaml"
            )
        )
    )
    assert once.root.nodes["m"].body.retry.attempts == 1


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("{id: w, type: agent}", "{id: w, type: evolution}"),
            r":6:15: error: node 'w' is an evolution node, which this engine does not run",
        ),
        (("worker_node_id: w,", "worker_node_id: x,"), r"error: map 'm': worker node 'x' is not a node of the graph"),
        ((", items_path: $.memory.xs", ""), r"error: map 'm' needs items_path or static_items \(one of them\)"),
        (
            ("items_path:", "item_path:"),
            r":5:65: error: unknown key 'item_path' in map_reduce_config\n  hint: did you mean 'items_path'\?",
        ),
        (
            ("strategy: majority_vote", "strategy: llm_judge"),
            r"error: voting 'v' is judged \(llm_judge\) but names no judge_agent_id",
        ),
        (
            ("strategy: majority_vote", "strategy: majority"),
            r"error: voting 'v': no strategy 'majority'\n  hint: did you mean 'majority_vote'\?",
        ),
        (
            ("subgraph_id: child}", "subgraph_id: chld}"),
            r":8:49: error: no graph 'chld' among the bundle's graphs\n  hint: did you mean 'child'\?",
        ),
        (
            ("nodes: [{id: only, type: agent}]", "nodes: [{id: only, type: subgraph, subgraph_id: child}]"),
            r"error: graph 'child' runs 'child', which runs it again: subgraphs cannot recurse",
        ),
        (
            ("{id: w, type: agent}", "{id: w, type: agent, failure_policy: {max_retries: 11}}"),
            r"error: max_retries: must be a whole number from 0 to 10",
        ),
    ],
)
def test_a_fanout_or_policy_mistake_is_said_where_it_is(tmp_path, change, said):
    with pytest.raises(SpecError, match=said):
        load(str(write_spec(tmp_path, FANOUT.replace(*change), "g.yaml")))
