"""An Agentfile through the whole engine: the dialect compiles it, the checkpoint protocol runs each
goal's phases, a goal's `-> outputs` reach a later goal's prompt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from tests.conftest import until, write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

AGENTFILE = """
NAME smoke
INPUT topic DEFAULT "tides"
GOAL notes "Take notes on $topic" -> notes
GOAL essay "Write an essay from $notes"
RUN main USING notes, essay
"""


def _pre(approach: str) -> str:
    return json.dumps(
        {
            "interpretation": approach,
            "scope_in": [approach],
            "scope_out": [],
            "approach": approach,
            "predictions": [],
            "assumptions": [],
            "confidence": 0.9,
        }
    )


def _post(output: object) -> str:
    return json.dumps(
        {
            "output": output,
            "tools_used": [],
            "commitment_met": "yes",
            "scope_changed": False,
            "concerns": [],
            "deviations": [],
            "unexpected_results": [],
        }
    )


async def test_an_agentfile_runs_its_goals_in_order_and_hands_outputs_on(client, tmp_path):
    replies = {
        "tasks": {
            "main.notes": [_pre("read"), _post({"notes": "the moon pulls the sea"})],
            "main.essay": [_pre("write"), _post("An essay about the moon pulling the sea.")],
        }
    }
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    spec = write_spec(tmp_path, AGENTFILE, "Agentfile")
    state = await run_spec(client, spec, f"scripted:{tmp_path / 'replies.json'}", params={"topic": "tides"})
    assert state.status == "completed", state.errors
    assert state.memory["notes"] == "the moon pulls the sea"
    assert state.final_output == "An essay about the moon pulling the sea."
    assert [s.pre["approach"] for s in state.supervision.values()] == ["read", "write"]


PANEL = """
NAME panel
INPUT plan DEFAULT "ship on Friday"
AGENT optimist "You look for what could go right."
AGENT skeptic "You look for what could go wrong."
GOAL weigh "Weigh the plan to $plan" -> verdict USING optimist, skeptic
GOAL decide "Decide, given the verdict: $verdict"
RUN main USING weigh, decide
"""


def _answers(outputs: dict[str, object]) -> Callable[[Messages], str]:
    """An agent of the fake server: its pre-checkpoint to COMMIT; to EXECUTE, the output given
    for the goal the prompt names (`Goal <id>:`)."""

    def reply(messages: Messages) -> str:
        prompt = messages[-1]["content"]
        if "Phase COMMIT" in prompt:
            return _pre("look")
        return _post(next(out for goal, out in outputs.items() if f"Goal {goal}:" in prompt))

    return reply


async def test_a_goal_using_agents_runs_them_at_once_then_merges_their_outputs(client, llm: FakeOpenAI, tmp_path):
    llm.by_model["optimist"] = _answers({"main.weigh.optimist": "the team is ready"})
    llm.by_model["skeptic"] = _answers({"main.weigh.skeptic": "friday deploys break weekends"})
    llm.by_model["default"] = _answers(
        {"main.weigh.synthesize": {"verdict": "ship on Thursday instead"}, "main.decide": "decided: Thursday"}
    )
    # Both agents' first requests are held: the run gets past them only if it sent both before
    # either was answered, which is what running them in parallel means.
    llm.hold("optimist")
    llm.hold("skeptic")
    spec = write_spec(tmp_path, PANEL, "Agentfile")
    agents = {"optimist": "openai:optimist", "skeptic": "openai:skeptic"}
    running = asyncio.ensure_future(run_spec(client, spec, "openai:default", agents=agents))
    await until(lambda: llm.in_flight("optimist") == 1 and llm.in_flight("skeptic") == 1)
    llm.release()
    state = await running
    assert state.status == "completed", state.errors

    for name, role in (("optimist", "could go right"), ("skeptic", "could go wrong")):
        commit, execute = llm.prompts_for(name)
        # An AGENT's text is its system text, which leads every prompt the agent gets.
        for prompt in (commit, execute):
            assert prompt.startswith(
                f"You look for what {role}.\n\nGoal main.weigh.{name}:\nWeigh the plan to ship on Friday"
            )
    merge_commit, merge_execute, decide_commit, decide_execute = llm.prompts_for("default")
    assert "Merge the outputs of optimist, skeptic into one answer to: Weigh the plan to ship on Friday" in merge_commit
    for prompt in (merge_commit, merge_execute):
        assert "the team is ready" in prompt and "friday deploys break weekends" in prompt
    assert "Decide, given the verdict: ship on Thursday instead" in decide_commit
    assert "Decide, given the verdict: ship on Thursday instead" in decide_execute
    assert state.memory["verdict"] == "ship on Thursday instead"
    assert state.final_output == "decided: Thursday"
