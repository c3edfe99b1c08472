"""cycgraph's fan-out nodes run by the engine against the fake OpenAI-compatible server: a map over
memory with its synthesizer (best_effort recording a failed item, fail_fast cancelling the rest),
votes counted by majority, by weight and by a judge, and a quorum that is not met."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import write_spec
from tests.fakes.openai_server import Messages
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

FAN = """
name: fan
description: Research each sub-topic, combine the notes, vote on a headline
inputs:
  topic: {schema: {type: string}}
nodes:
  - {id: split, type: agent, agent_id: splitter, read_keys: [topic], write_keys: [topics]}
  - id: mapper
    type: map
    read_keys: [topics]
    failure_policy: {max_retries: 1}
    map_reduce_config:
      worker_node_id: researcher
      items_path: $.memory.topics
      synthesizer_node_id: combine
      max_concurrency: CONCURRENCY
      error_strategy: STRATEGY
  - {id: researcher, type: agent, agent_id: researcher, write_keys: [notes], failure_policy: {max_retries: 1}}
  - {id: combine, type: synthesizer, agent_id: writer, write_keys: [summary]}
  - id: panel
    type: voting
    read_keys: [summary]
    voting_config: {voter_agent_ids: [a, b, c], quorum: 2, vote_key: headline}
edges:
  - {source: split, target: mapper}
  - {source: combine, target: panel}
start_node: split
end_nodes: [panel]
"""
AGENTS = {name: f"openai:{name}" for name in ("splitter", "researcher", "writer", "a", "b", "c", "judge")}


def item_of(messages: Messages) -> str:
    """The map item a worker's prompt carries in its input."""
    return json.loads(messages[-1]["content"].split("Input:\n", 1)[1])["map_item"]


def research(messages: Messages) -> str:
    item = item_of(messages)
    return "" if item == "wind" else f"notes on {item}"  # an empty reply fails the item


def vote(text: str, key: str = "headline") -> str:
    return json.dumps({key: text, "reasoning": "it fits"})


def fan(strategy: str, concurrency: int) -> str:
    return FAN.replace("STRATEGY", strategy).replace("CONCURRENCY", str(concurrency))


async def test_a_map_runs_its_worker_per_item_its_synthesizer_combines_and_a_panel_votes(client, llm, tmp_path):
    llm.by_model = {
        "splitter": json.dumps(["moon", "sun", "wind"]),
        "researcher": research,
        "writer": "Summary: the moon and the sun move the sea.",
        "a": vote("Moon rules"),
        "b": vote("Moon rules"),
        "c": vote("Sun wins"),
    }
    spec = write_spec(tmp_path, fan("best_effort", 1))
    state = await run_spec(client, spec, "openai:none", params={"topic": "tides"}, agents=AGENTS)
    assert state.status == "completed", state.errors

    prompts = llm.prompts_for("researcher")
    assert [json.loads(p.split("Input:\n", 1)[1]) for p in prompts] == [
        {"topics": ["moon", "sun", "wind"], "map_item": item, "map_index": i, "map_total": 3}
        for i, item in enumerate(["moon", "sun", "wind"])
    ], "one at a time (max_concurrency 1), in the items' order, each with its task context"
    memory = state.memory
    assert memory["mapper_results"] == [
        {"index": 0, "node_id": "researcher", "updates": {"notes": "notes on moon"}},
        {"index": 1, "node_id": "researcher", "updates": {"notes": "notes on sun"}},
    ]
    assert memory["mapper_errors"] == [
        {"index": 2, "node_id": "researcher", "error": "the agent returned an empty output"}
    ], "best_effort: the failed item is recorded and the others went on"
    assert (memory["mapper_count"], memory["mapper_error_count"]) == (2, 1)
    combined = llm.prompts_for("writer")[0]
    assert "notes on moon" in combined and "notes on sun" in combined and "empty output" in combined

    assert len(llm.prompts_for("a")) == len(llm.prompts_for("b")) == len(llm.prompts_for("c")) == 1
    assert "Summary: the moon and the sun" in llm.prompts_for("c")[0] and '"headline"' in llm.prompts_for("c")[0]
    assert memory["headline"]["winner"] == "Moon rules" and memory["panel_consensus"] == "Moon rules"
    assert memory["headline"]["tally"] == {"Moon rules": 2, "Sun wins": 1}
    assert memory["panel_votes"] == [
        {"agent_id": "a", "vote": "Moon rules"},
        {"agent_id": "b", "vote": "Moon rules"},
        {"agent_id": "c", "vote": "Sun wins"},
    ]
    assert [state.tasks[f"mapper[{i}]"].status for i in range(3)] == ["completed", "completed", "failed"]


async def test_fail_fast_the_first_failed_item_fails_the_map_and_cancels_the_rest(client, llm, tmp_path):
    llm.by_model = {"splitter": json.dumps(["moon", "sun", "wind"]), "researcher": research}
    held = [llm.hold_prompt(f'"map_item": "{item}"') for item in ("moon", "sun")]
    try:
        spec = write_spec(tmp_path, fan("fail_fast", 3))
        state = await run_spec(client, spec, "openai:none", params={"topic": "tides"}, agents=AGENTS)
    finally:
        for gate in held:
            gate.set()
    assert state.status == "failed"
    assert state.errors[0] == "mapper[2]: the agent returned an empty output"
    assert [state.tasks[f"mapper[{i}]"].status for i in range(3)] == ["cancelled", "cancelled", "failed"]
    assert "mapper_results" not in state.memory and llm.prompts_for("writer") == []


VOTES = """
name: votes
nodes:
  - id: weigh
    type: voting
    voting_config:
      voter_agent_ids: [a, b, c]
      strategy: weighted_vote
      weights: {c: 3}
      vote_key: weighed
  - id: judged
    type: voting
    read_keys: [weighed]
    failure_policy: {max_retries: 1}
    voting_config: {voter_agent_ids: [a, b, c], strategy: llm_judge, judge_agent_id: judge, quorum: 2}
edges:
  - {source: weigh, target: judged}
start_node: weigh
end_nodes: [judged]
"""


async def test_weighted_votes_a_judge_and_a_quorum_not_met(client, llm, tmp_path):
    llm.by_model = {
        "a": [vote("ship", "weighed"), vote("ship it", "vote")],
        "b": [vote("ship", "weighed"), vote("wait", "vote")],
        "c": [vote("wait", "weighed"), vote("ship later", "vote")],
        "judge": json.dumps({"winner": "ship later", "reasoning": "safest"}),
    }
    state = await run_spec(client, write_spec(tmp_path, VOTES), "openai:none", agents=AGENTS)
    assert state.status == "completed", state.errors
    assert state.memory["weighed"]["tally"] == {"ship": 2, "wait": 3}
    assert state.memory["weighed"]["winner"] == "wait", "c's weight of 3 outweighs two votes"
    judged = state.memory["vote"]
    assert (judged["winner"], judged["reasoning"]) == ("ship later", "safest")
    judge_prompt = llm.prompts_for("judge")[0]
    assert re.search(r'"agent_id": "c",\s+"vote": "ship later"', judge_prompt), "the judge sees every vote"

    llm.by_model = {"a": "ship", "b": "", "c": ""}  # a votes in plain text; b and c give no vote
    state = await run_spec(client, write_spec(tmp_path, VOTES), "openai:none", agents=AGENTS)
    assert state.status == "failed"
    assert state.memory["weighed"]["winner"] == "ship", "one valid vote is enough where no quorum is set"
    assert state.errors[-1] == (
        "judged: quorum not met: 1 valid vote(s) of 3, 2 needed (judged_voter_1 (b): the agent returned an empty "
        "output; judged_voter_2 (c): the agent returned an empty output)"
    )
    assert len(llm.prompts_for("a")) == 4 and "vote" not in state.memory  # two runs, two votes each


async def test_a_map_over_more_items_than_a_batch_runs_them_as_child_workflows_best_effort(client, llm, tmp_path):
    topics = [f"t{i}" for i in range(250)]
    failing = {"t5", "t150", "t249"}  # one in each batch of 100
    llm.by_model = {
        "splitter": json.dumps(topics),
        "researcher": lambda messages: "" if item_of(messages) in failing else f"notes on {item_of(messages)}",
        "writer": "Summary.",
        "a": vote("Fine"),
        "b": vote("Fine"),
        "c": vote("Fine"),
    }
    spec = write_spec(tmp_path, fan("best_effort", 50))
    state = await run_spec(client, spec, "openai:none", params={"topic": "tides"}, agents=AGENTS)
    assert state.status == "completed", state.errors

    contexts = [json.loads(p.split("Input:\n", 1)[1]) for p in llm.prompts_for("researcher")]
    assert sorted((c["map_index"], c["map_item"]) for c in contexts if c["map_item"] not in failing) == [
        (i, t) for i, t in enumerate(topics) if t not in failing
    ], "every item asked once, with its task context, though its batch ran in a child workflow"
    assert {c["map_total"] for c in contexts} == {250}
    memory = state.memory
    assert [r["index"] for r in memory["mapper_results"]] == [i for i, t in enumerate(topics) if t not in failing]
    assert memory["mapper_errors"] == [
        {"index": i, "node_id": "researcher", "error": "the agent returned an empty output"} for i in (5, 150, 249)
    ], "best_effort in batches: each batch's failed items recorded, the others went on"
    assert (memory["mapper_count"], memory["mapper_error_count"]) == (247, 3)
    summary = state.maps["mapper"]
    assert (summary.total, summary.batches, summary.batches_done) == (250, 3, 3)
    assert summary.counts == {"completed": 247, "failed": 3}
