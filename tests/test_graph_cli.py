"""State graphs through the command line, as a user runs them: the hub-and-spoke supervisor graph
and cycgraph's bundle form against the fake OpenAI-compatible server, inputs refused by their JSON
Schemas before any run, and `validate` and `inspect` on graphs."""

from __future__ import annotations

import json
import re

from tests.conftest import ROOT, run_id, write_spec
from tests.fakes.openai_server import Messages

EXAMPLES = ROOT / "examples" / "graphs"


def choice(name: str, why: str) -> str:
    return json.dumps({"next": name, "reasoning": why})


def test_the_hub_and_spoke_graph_runs_to_the_supervisors_done(cli, llm):
    llm.by_model = {
        "lead": [choice("research", "no notes yet"), choice("write", "notes are in"), choice("__done__", "brief ok")],
        "researcher": "Notes: tides follow the moon.",
        "writer": "Brief: the moon pulls the sea twice a day.",
    }
    agents = [f for aid in ("lead", "researcher", "writer") for f in ("--agent", f"{aid}=openai:{aid}")]
    spec = str(EXAMPLES / "hub_and_spoke.yaml")
    result = cli("start", spec, "-p", "topic=tides", *agents, "--task-queue", run_id("q"))
    assert result.code == 0, result.out + result.err
    assert [r.model for r in llm.requests] == ["lead", "researcher", "lead", "writer", "lead"]
    lead = llm.prompts_for("lead")
    assert "Goal: Research a topic and write a short brief about it" in lead[0]
    assert '"topic": "tides"' in lead[0] and "notes" not in lead[0]
    assert "Your choices so far:\n- research: no notes yet" in lead[1] and "Notes: tides follow the moon." in lead[1]
    assert "- write: notes are in" in lead[2] and "Brief: the moon pulls" in lead[2]
    research, write = llm.prompts_for("researcher")[0], llm.prompts_for("writer")[0]
    assert "You are the step research of this workflow." in research and '"topic": "tides"' in research
    assert "Notes: tides follow the moon." in write, "the writer reads what the researcher wrote"
    out = result.out
    assert "- Status: COMPLETE" in out
    assert "## Final Output\n\nBrief: the moon pulls the sea twice a day.\n" in out
    assert "- Node runs: 5 (lead ×3, research ×1, write ×1)" in out
    assert "| 3 | lead | __done__ | brief ok |" in out
    assert "- Total agents deployed: 3" in out, "the supervisor was asked too"
    checked = cli("validate", spec)
    assert "with 2 task(s) and 1 supervisor(s)" in checked.out and "  lead (supervisor)\n" in checked.out


def _by_system(messages: Messages) -> str:
    """The bundle's two gpt-4o-mini agents, told apart by their system message."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    if system.startswith("You collect facts"):
        return "Storage: buyers are utilities; prices fell 20% in 2025."
    return "Grid storage demand grows, prices fall, and supply of cells is the largest risk."


def test_a_bundle_runs_its_agents_with_their_models_system_prompts_and_temperatures(cli, llm):
    llm.by_model = {
        "gpt-4o": [choice("research", "start with facts"), choice("write", "facts in"), choice("__done__", "done")],
        "gpt-4o-mini": _by_system,
    }
    spec = str(EXAMPLES / "market_analysis.json")
    result = cli("start", spec, "-p", "sector=grid storage", "--task-queue", run_id("q"))
    assert result.code == 0, result.out + result.err
    bundle = json.loads((EXAMPLES / "market_analysis.json").read_text())
    systems = {a["id"]: (a["system_prompt"], a["temperature"]) for a in bundle["agents"]}
    sent = [(r.model, r.body["messages"][0], r.body["temperature"]) for r in llm.requests]
    assert sent == [
        (model, {"role": "system", "content": systems[agent][0]}, systems[agent][1])
        for model, agent in [
            ("gpt-4o", "lead-analyst"),
            ("gpt-4o-mini", "researcher"),
            ("gpt-4o", "lead-analyst"),
            ("gpt-4o-mini", "writer"),
            ("gpt-4o", "lead-analyst"),
        ]
    ]
    assert all(len(r.body["messages"]) == 2 for r in llm.requests), "each node run is a fresh thread"
    research = llm.requests[1].prompt or ""
    assert '"sector": "grid storage"' in research and '"year": 2026' in research, "year's default is its schema's"
    assert systems["researcher"][0] not in research, "the system prompt is not repeated in the user message"
    assert "## Final Output\n\nGrid storage demand grows" in result.out, "the bundle's declared output"


def test_inputs_breaking_their_json_schemas_are_refused_before_any_run(cli, llm):
    spec = str(EXAMPLES / "market_analysis.json")
    lines = (EXAMPLES / "market_analysis.json").read_text().splitlines()
    sector_line = next(n for n, line in enumerate(lines, 1) if '"sector": {' in line and n > 30)
    result = cli("start", spec, "-p", "sector=x", "-p", "year=1999")
    assert result.code == 2
    assert f"market_analysis.json:{sector_line}:1: error: param 'sector': 'x' is too short" in result.err
    assert "error: param 'year': 1999 is less than the minimum of 2000" in result.err
    assert "hint: pass a integer value with -p year=VALUE" in result.err
    missing = cli("start", spec)
    assert missing.code == 2 and "missing required param 'sector'" in missing.err
    assert llm.requests == [] and "started" not in result.out + missing.out


def test_validate_warns_of_a_node_that_reads_every_memory_key(cli, tmp_path):
    spec = write_spec(
        tmp_path,
        "name: g\nnodes:\n  - {id: a, type: agent, read_keys: ['*']}\nedges: []\nstart_node: a\nend_nodes: [a]\n",
        "g.yaml",
    )
    result = cli("validate", str(spec))
    assert result.code == 0
    assert f"{spec}:3:26: warning: node 'a' reads every memory key" in result.out
    assert "hint: name the keys it needs in read_keys" in result.out


def test_inspect_draws_a_graph_with_its_cycles_and_conditions_as_text_and_as_mermaid(cli):
    spec = str(EXAMPLES / "review_loop.yaml")
    text = cli("inspect", spec)
    assert text.code == 0
    graph = text.out.split("\nGraph\n", 1)[1].split("\nAgents\n", 1)[0]
    assert graph.splitlines() == [
        "  [write] --> [review]",
        "  [review] --> [score]",
        "  [score: verifier] --(memory.check_passed)--> [publish]",
        "  [score: verifier] --> [write] ↺",
        "  [publish: human] (end)",
        "  [publish: human] --(rejected)--> [write] ↺",
        "",
        "  ↺ cycle: write → review → score → write; at most 12 node runs in all",
        "  ↺ cycle: write → review → score → publish → write (rejected); at most 12 node runs in all",
    ]
    assert "1a. write (writer) gets the goal, the constraints and memory product, review" in text.out
    assert "nothing but its prompt" not in text.out

    drawn = cli("inspect", spec, "--format", "mermaid")
    assert drawn.code == 0
    lines = drawn.out.splitlines()
    assert lines[0] == "flowchart TD"
    nodes = dict(re.findall(r'^    (n_\w+)(?:\[|\{\{)"([^"]+)"(?:\]|\}\})$', drawn.out, re.MULTILINE))
    assert nodes == {
        "n_write": "write",
        "n_review": "review",
        "n_score": "score: verifier",
        "n_publish": "publish: human",
    }
    edges = re.findall(r"^    (\w+) -->(?:\|\"([^\"]*)\"\|)? (\w+)$", drawn.out, re.MULTILINE)
    assert edges == [
        ("start", "", "n_write"),
        ("n_write", "", "n_review"),
        ("n_review", "", "n_score"),
        ("n_score", "memory.check_passed", "n_publish"),
        ("n_score", "", "n_write"),
        ("n_publish", "rejected", "n_write"),
        ("n_publish", "", "stop"),
    ]
    assert all(
        re.match(r'^    (\w+(\[|\{\{|\(\()"[^"]*"(\]|\}\}|\)\))|\w+ -->(\|"[^"]*"\|)? \w+)$', x) for x in lines[1:]
    )

    # Any other plan: its steps in order, as the run page draws it.
    other = cli("inspect", str(ROOT / "examples" / "quickstart.yaml"), "--format", "mermaid")
    assert other.code == 0, other.err
    assert other.out.splitlines() == [
        "flowchart TD",
        '    n_scaffold["scaffold"]',
        '    n_build["build"]',
        "    n_scaffold --> n_build",
        '    n_test["test"]',
        "    n_build --> n_test",
        '    n_package["package: provider"]',
        "    n_test --> n_package",
    ]


def test_dry_run_of_a_bundle_shows_each_agents_system_prompt_and_the_memory_it_reads(cli):
    result = cli("dry-run", str(EXAMPLES / "market_analysis.json"), "-p", "sector=grid storage")
    assert result.code == 0, result.err
    research = result.out.split("1b. Researcher (researcher) via openai:gpt-4o-mini\n", 1)[1].split("1c.", 1)[0]
    assert research.startswith("         system: You collect facts about a market sector")
    assert '"sector": "<memory sector>"' in research and "findings" not in research
    assert "No agent was called." in result.out


def test_inspect_shows_a_map_a_vote_and_a_subgraph_and_the_subgraphs_own_nodes(cli):
    result = cli("inspect", str(EXAMPLES / "fan_out.yaml"))
    assert result.code == 0, result.err
    out = result.out
    assert "1b. map: researcher (researcher) runs once per item of $.memory.questions, at most 3 at a time" in out
    assert "1d. vote headline: critic, editor, reader vote at once, the most votes win; at least 2 valid votes" in out
    assert "1e. subgraph brief runs graph draft as a child run; it gets summary as summary" in out
    assert "  [headline: voting] --> [brief]\n  [brief: subgraph] (end)" in out
    subgraph = out.split("\nSubgraph draft\n", 1)[1]
    assert "S1. writer (writer) gets the goal, the constraints and memory title, summary" in subgraph
