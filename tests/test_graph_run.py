"""State graphs run by the engine against the fake OpenAI-compatible server: a supervisor's loop
that ends on __done__, a cycle cut by max_iterations, conditional routing on a verifier, and a
structured write outside a node's write keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import write_spec
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")
EXAMPLES = Path(__file__).parent.parent / "examples" / "graphs"
AGENTS = {"lead": "openai:lead", "researcher": "openai:researcher", "writer": "openai:writer"}


def choice(name: str, why: str = "") -> str:
    return json.dumps({"next": name, "reasoning": why or f"{name} next"})


async def test_a_supervisor_delegates_until_it_says_done(client, llm):
    llm.by_model = {
        "lead": [choice("research"), choice("oops"), choice("write"), choice("__done__", "the brief is ready")],
        "researcher": "Notes: tides follow the moon.",
        "writer": "Brief: the moon pulls the sea.",
    }
    state = await run_spec(
        client, EXAMPLES / "hub_and_spoke.yaml", "openai:none", params={"topic": "tides"}, agents=AGENTS
    )
    assert state.status == "completed", state.errors
    assert state.memory["notes"] == "Notes: tides follow the moon." and state.memory["brief"].startswith("Brief:")
    assert [(c.delegated_to, c.reasoning) for c in state.supervisor_history] == [
        ("research", "research next"),
        ("write", "write next"),
        ("__done__", "the brief is ready"),
    ]
    lead_prompts = llm.prompts_for("lead")
    assert "answer with one of: research, write, __done__" in lead_prompts[2], (
        "a choice outside the list is asked again"
    )
    writer_prompt = llm.prompts_for("writer")[0]
    assert "Notes: tides follow the moon." in writer_prompt and "Goal: Research a topic" in writer_prompt
    assert "brief" not in llm.prompts_for("researcher")[0].split("Input:")[-1], "a node sees only its read keys"


REVIEW = """
name: review-loop
nodes:
  - {id: write, type: agent, agent_id: writer, read_keys: [review], write_keys: [draft]}
  - {id: review, type: agent, agent_id: reviewer, read_keys: [draft], write_keys: [review]}
  - id: score
    type: verifier
    verifier_type: jsonpath
    path: $.review.score
    operator: gte
    expected: 0.8
    result_key: check
  - {id: done, type: router}
edges:
  - {source: write, target: review}
  - {source: review, target: score}
  - {source: score, target: done, condition: {type: conditional, condition: "memory.check_passed"}}
  - {source: score, target: write, condition: {type: conditional, condition: "memory.review.score < 0.8"}}
start_node: write
end_nodes: [done]
max_iterations: MAX
"""


async def test_a_cycle_leaves_when_the_verifier_passes(client, llm, tmp_path):
    spec = write_spec(tmp_path, REVIEW.replace("MAX", "20"))
    llm.by_model = {
        "writer": "a draft",
        "reviewer": [json.dumps({"score": 0.5}), json.dumps({"score": 0.9})],
    }
    state = await run_spec(client, spec, "openai:x", agents={"writer": "openai:writer", "reviewer": "openai:reviewer"})
    assert state.status == "completed", state.errors
    assert state.memory["check"]["passed"] is True and state.memory["check_passed"] is True
    assert state.visited_nodes == ["review-loop", "write", "review", "score", "write", "review", "score", "done"]


async def test_a_cycle_that_never_passes_is_cut_by_max_iterations(client, llm, tmp_path):
    spec = write_spec(tmp_path, REVIEW.replace("MAX", "7"))
    llm.by_model = {"writer": "a draft", "reviewer": json.dumps({"score": 0.1})}
    state = await run_spec(client, spec, "openai:x", agents={"writer": "openai:writer", "reviewer": "openai:reviewer"})
    assert state.status == "failed"
    assert "stopped after 7 node runs (max_iterations) before running 'review' again" in state.errors[-1]
    assert len(llm.prompts_for("writer")) == 3


async def test_no_route_out_of_a_node_that_is_not_an_end_node_fails_the_run_naming_it(client, llm, tmp_path):
    spec = write_spec(
        tmp_path,
        """
name: stuck
nodes:
  - {id: plan, type: agent, write_keys: [steps, owner]}
  - {id: act, type: agent}
edges:
  - {source: plan, target: act, condition: {type: conditional, condition: "memory.steps > 3"}}
start_node: plan
end_nodes: [act]
""",
    )
    llm.reply = json.dumps({"steps": 2, "owner": "ann"})
    state = await run_spec(client, spec, "openai:x")
    assert state.status == "failed"
    assert (
        "no route out of node 'plan': none of its edges' conditions holds, and it is not an end node"
        in state.errors[-1]
    )
    assert state.memory == {"steps": 2, "owner": "ann"}

    llm.reply = json.dumps({"steps": 5, "secret": 1})
    state = await run_spec(client, spec, "openai:x")
    assert state.status == "failed"
    assert "wrote secret, outside its write_keys (steps, owner)" in state.errors[-1]
