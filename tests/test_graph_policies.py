"""What a graph's nodes do when things go wrong or need checking, run against the fake
OpenAI-compatible server: failure_policy retries and a node budget; verifiers of every mode and
JSON-path operator, their result keys and throw_on_fail; strict taint; approvals rejected to a
node, rejected with none, and timing out (on the time-skipping server)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from agentrun.client.runs import fetch_state
from agentrun.explain.report import to_markdown
from agentrun.lang import params as spec_params
from agentrun.lang.load import load
from agentrun.models.contract import RunInput
from tests.conftest import TEST_QUEUE, TIME_QUEUE, run_id, write_spec
from tests.runs import answer, finish, open_gate, run_spec

SPEND = """
name: spend
nodes:
  - id: draft
    type: agent
    agent_id: writer
    write_keys: [draft]
    failure_policy: {max_retries: 2, backoff_strategy: fixed, initial_backoff_ms: 1}
  - {id: review, type: agent, agent_id: reviewer, read_keys: [draft], write_keys: [review], budget: {max_tokens: 5}}
edges:
  - {source: draft, target: review}
start_node: draft
end_nodes: [review]
"""


@pytest.mark.usefixtures("worker")
async def test_a_failed_attempt_is_retried_and_a_node_over_its_budget_fails_without_a_retry(client, llm, tmp_path):
    llm.by_model = {"writer": ["", "A draft."], "reviewer": "Fine, though the second paragraph runs long."}
    agents = {"writer": "openai:writer", "reviewer": "openai:reviewer"}
    state = await run_spec(client, write_spec(tmp_path, SPEND), "openai:none", agents=agents)
    assert len(llm.prompts_for("writer")) == 2, "max_retries 2: two attempts, the second one took"
    assert state.tasks["draft"].retries == 1 and state.memory["draft"] == "A draft."
    assert "draft: attempt 1 failed (the agent returned an empty output); retrying in 0.001s" in state.warnings
    assert state.status == "failed"
    assert re.fullmatch(
        r"review: budget exceeded in node review: \d+ tokens used, over the budget of 5", state.errors[-1]
    )
    assert len(llm.prompts_for("reviewer")) == 1, "a budget that ran out is not retried (3 attempts by default)"
    assert "review" not in state.memory, "a node over its budget writes nothing"


def jsonpath(target: str, path: str, op: str, value: object = None) -> dict:
    assertion = {"op": op} if op == "exists" else {"op": op, "pattern" if op == "matches" else "value": value}
    return {"type": "jsonpath", "target_key": target, "path": path, "assertion": assertion}


def verifier(node_id: str, config: dict, **extra: object) -> dict:
    return {"id": node_id, "type": "verifier", "verifier_config": config, **extra}


CHECKS = [
    verifier("has_title", jsonpath("facts", "$.title", "exists")),
    {"id": "is_tides", "type": "verifier", "path": "$.facts.title", "operator": "equals", "expected": "Tides"},
    verifier("titled", jsonpath("facts", "$.title", "matches", "^Ti")),
    verifier("high", jsonpath("facts", "$.score", "gt", 0.5)),
    verifier("enough", jsonpath("facts", "$.n", "gte", 3)),
    verifier("below", jsonpath("facts", "$.score", "lt", 0.5)),
    verifier("few", jsonpath("facts", "$.n", "lte", 2)),
    verifier(
        "judge",
        {
            "type": "llm_judge",
            "target_key": "facts",
            "evaluator_agent_id": "judge",
            "pass_threshold": 0.8,
            "evaluation_criteria": "Are the facts about tides accurate?",
            "result_key": "judged",
        },
    ),
    verifier("expr", {"type": "expression", "expression": "memory.facts.n >= 3 and memory.facts.title == 'Tides'"}),
    {"id": "fetch", "type": "tool", "tool_id": "shell.run", "params": {"argv": ["printf", "ok"]}},
    {"id": "route", "type": "router"},
    {"id": "trusted", "type": "router"},
    verifier(
        "gate",
        {"type": "expression", "expression": "memory.judged_passed", "throw_on_fail": True},
        failure_policy={"max_retries": 1},
    ),
]


def checks(strict: bool) -> str:
    chain = ["facts", *[c["id"] for c in CHECKS[:-2]]]
    edges = [{"source": a, "target": b} for a, b in zip(chain, chain[1:])]
    edges += [
        {
            "source": "route",
            "target": "trusted",
            "condition": {"type": "conditional", "condition": "memory.fetch_result == 'ok'"},
        },
        {"source": "route", "target": "gate"},
    ]
    graph = {
        "name": "checks",
        "strict_taint": strict,
        "nodes": [{"id": "facts", "type": "agent", "agent_id": "fact", "write_keys": ["facts"]}, *CHECKS],
        "edges": edges,
        "start_node": "facts",
        "end_nodes": ["trusted", "gate"],
    }
    return json.dumps(graph, indent=2)


@pytest.mark.usefixtures("worker")
async def test_verifiers_of_every_mode_write_their_result_keys_and_strict_taint_makes_a_condition_false(
    client, llm, tmp_path
):
    llm.by_model = {
        "fact": json.dumps({"title": "Tides", "score": 0.9, "n": 3}),
        "judge": json.dumps({"score": 0.75, "reasoning": "mostly right"}),
    }
    agents = {"fact": "openai:fact", "judge": "openai:judge"}
    state = await run_spec(client, write_spec(tmp_path, checks(True), "checks.json"), "openai:none", agents=agents)
    memory = state.memory
    passed = {
        name: memory[f"{name}_verification_passed"]
        for name in ("has_title", "titled", "high", "enough", "below", "few")
    }
    assert passed == {"has_title": True, "titled": True, "high": True, "enough": True, "below": False, "few": False}
    assert memory["is_tides_verification"]["passed"] is True and memory["expr_verification_passed"] is True
    few = memory["few_verification"]  # cycgraph's VerificationResult, worded as there
    assert (few["type"], few["reasoning"], few["extracted_value"]) == (
        "jsonpath",
        "assertion <= 2 at $.n failed (value=3)",
        3,
    )
    judged = {k: v for k, v in memory["judged"].items() if k != "evaluated_at"}
    assert judged == {
        "type": "llm_judge",
        "passed": False,
        "reasoning": "mostly right",
        "score": 0.75,
        "threshold": 0.8,
    }
    assert memory["judged_passed"] is False, "a score of 0.75 is under the pass_threshold of 0.8"
    judge_prompt = llm.prompts_for("judge")[0]
    assert "Are the facts about tides accurate?" in judge_prompt and '"facts": {' in judge_prompt
    assert "has_title_verification" not in judge_prompt, "the judge is shown its target_key only"

    assert memory["fetch_result"] == "ok" and state.taint["fetch"].source == "provider:shell"
    said = (
        "checks: edge route → trusted: condition 'memory.fetch_result == 'ok'' reads tainted key fetch_result "
        "(provider:shell); taken as false"
    )
    assert said in state.warnings and f"- WARNING {said}" in to_markdown(state)
    assert state.visited_nodes[-2:] == ["route", "gate"]
    assert state.status == "failed" and state.errors[-1] == (
        'gate: verification failed: expression "memory.judged_passed" evaluated falsy'
    )

    plain = await run_spec(client, write_spec(tmp_path, checks(False), "checks.json"), "openai:none", agents=agents)
    assert plain.status == "completed" and plain.visited_nodes[-2:] == ["route", "trusted"], "the condition holds"


NOTE = """
name: note
nodes:
  - {id: write, type: agent, agent_id: writer, read_keys: [topic], write_keys: [draft]}
  - id: publish
    type: approval
    read_keys: [draft]
    approval_config: {prompt_message: "Publish this note?", review_keys: [draft]REJECTION}
REVISE
edges:
  - {source: write, target: publish}
start_node: write
end_nodes: [publish, revise]
"""
REVISE = "  - {id: revise, type: agent, agent_id: reviser, read_keys: [draft], write_keys: [draft]}"


def note(rejection: str) -> str:
    """The note graph; its revise node only where the approval rejects to it."""
    text = NOTE.replace("REJECTION", rejection)
    if "revise" in rejection:
        return text.replace("REVISE", REVISE)
    return text.replace("REVISE\n", "").replace("[publish, revise]", "[publish]")


async def _start(client: Client, spec: Path, queue: str, **options: Any) -> WorkflowHandle:
    plan = load(str(spec), given_params=("topic",))
    inp = RunInput(
        plan=plan,
        params=spec_params.bind(plan, {"topic": "tides"}),
        workdir=str(spec.parent),
        default_agent="openai:none",
        agents={"writer": "openai:writer", "reviser": "openai:reviser"},
        **options,
    )
    return await client.start_workflow("AgentRun", inp, id=run_id("note"), task_queue=queue)


@pytest.mark.usefixtures("worker")
async def test_an_approval_rejected_goes_to_its_rejection_node_and_without_one_fails_the_run(client, llm, tmp_path):
    llm.by_model = {"writer": ["Tides rise twice a day.", "Tides rise and fall twice a day."]}
    handle = await _start(client, write_spec(tmp_path, note(", rejection_node_id: write")), TEST_QUEUE, heartbeat_s=5)
    state = await open_gate(handle, "publish")
    assert state.gates["publish"].prompt == "Publish this note?\n\ndraft:\nTides rise twice a day."
    assert state.gates["publish"].choices == ["approve", "reject"]
    await answer(handle, "publish", "reject", "say fall too")
    await open_gate(handle, "publish#2")
    await answer(handle, "publish#2", "approve")
    state = await finish(client, handle)
    assert state.status == "completed", state.errors
    assert len(llm.prompts_for("writer")) == 2 and state.memory["draft"] == "Tides rise and fall twice a day."
    assert state.visited_nodes == ["note", "write", "publish", "write", "publish"]
    assert "| publish | Publish this note? draft: Tides rise twice a day. | reject | say fall too | ana |" in (
        to_markdown(state)
    )

    handle = await _start(client, write_spec(tmp_path, note("")), TEST_QUEUE, heartbeat_s=5)
    await open_gate(handle, "publish")
    await answer(handle, "publish", "reject")
    state = await finish(client, handle)
    assert state.status == "failed"
    assert state.errors[-1] == "note: rejected at approval 'publish', which names no rejection_node_id"


@pytest.mark.usefixtures("time_worker")
async def test_an_approval_no_one_answers_is_rejected_when_its_timeout_passes(time_env, llm, tmp_path):
    llm.by_model = {"writer": "Tides rise twice a day.", "reviser": "Tides rise and fall twice a day."}
    text = note(", rejection_node_id: revise, timeout_ms: 7200000")
    handle = await _start(
        time_env.client, write_spec(tmp_path, text), TIME_QUEUE, heartbeat_s=0, search_attributes=False
    )
    try:
        await asyncio.wait_for(handle.result(), 60)
    finally:
        state = await fetch_state(time_env.client, handle.id)
    assert state.status == "completed", state.errors
    assert state.gates["publish"].status == "timed_out"
    assert "publish: no answer to gate 'publish' within 7200s; taking 'reject'" in state.warnings
    assert state.visited_nodes[-2:] == ["publish", "revise"] and len(llm.prompts_for("reviser")) == 1
    assert state.ended_at and state.started_at and (state.ended_at - state.started_at).total_seconds() >= 7200
