"""An Agentfile through the whole engine: the dialect compiles it, the checkpoint protocol runs each
goal's phases, a goal's `-> outputs` reach a later goal's prompt."""

from __future__ import annotations

import json

import pytest

from tests.conftest import write_spec
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
