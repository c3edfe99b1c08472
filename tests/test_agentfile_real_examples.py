"""Two shapes from the Agentfile real system's own examples that we once refused: a `GOAL research`
with an indented body and no RUN (its 36-dynamic-spawning, the draft form), and an agent's prompt
read FROM a .md file that mentions a `$file_path` the Agentfile declares nowhere (its 40, whose
prompt files quote Agentfiles). Each is validated as a user would (the CLI's exit code and words)
and run."""

from __future__ import annotations

import json

import pytest

from tests.conftest import write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

DYNAMIC = """NAME dynamic-research

INPUT topic

GOAL research
  Research {{topic}} thoroughly.
  Consider multiple perspectives and synthesize findings.
"""

BUILDER = """NAME agentfile-builder
INPUT problem_description

AGENT analyzer FROM agent-builder/understand-problem.md

GOAL understand "Analyze problem: $problem_description." USING analyzer
GOAL output "Write the Agentfile."

RUN build USING understand, output
"""

ANALYZER = """You understand problems. An Agentfile that reviews one file looks like:

INPUT file_path
GOAL review "Review $file_path" USING security-reviewer
"""


def checkpoints(messages: Messages) -> str:
    """An agent that answers each goal's COMMIT and EXECUTE phases."""
    if "Phase COMMIT" in messages[-1]["content"]:
        fields = ("interpretation", "approach")
        return json.dumps(
            {**dict.fromkeys(fields, "x"), "scope_in": [], "scope_out": [], "predictions": []}
            | {"assumptions": [], "confidence": 0.9}
        )
    return json.dumps(
        {"output": "DONE-1", "tools_used": [], "commitment_met": "yes", "scope_changed": False, "concerns": []}
        | {"deviations": [], "unexpected_results": []}
    )


def test_a_goal_with_an_indented_body_and_no_run_validates(cli, tmp_path):
    spec = write_spec(tmp_path, DYNAMIC, "Agentfile")
    result = cli("validate", str(spec))
    assert result.code == 0, result.err
    assert "valid agentfile spec 'dynamic-research' with 1 task(s)" in result.out
    assert "research (task)" in result.out


async def test_a_goal_with_an_indented_body_and_no_run_runs_with_its_lines_as_its_text(
    client, llm: FakeOpenAI, tmp_path
):
    llm.reply = checkpoints
    spec = write_spec(tmp_path, DYNAMIC, "Agentfile")
    state = await run_spec(client, spec, "openai:default", params={"topic": "tides"})
    assert state.status == "completed", state.errors
    commit, execute = [r.prompt or "" for r in llm.requests]
    for prompt in (commit, execute):
        assert "Goal research:\nResearch tides thoroughly.\nConsider multiple perspectives" in prompt


def test_a_prompt_file_naming_an_undeclared_input_validates_with_a_warning(cli, tmp_path):
    spec = write_spec(tmp_path, BUILDER, "Agentfile")
    (tmp_path / "agent-builder").mkdir()
    (tmp_path / "agent-builder" / "understand-problem.md").write_text(ANALYZER)
    result = cli("validate", str(spec))
    assert result.code == 0, result.err
    assert "understand-problem.md:4:21: warning: undefined reference $file_path" in result.out


async def test_a_prompt_file_naming_an_undeclared_input_runs_with_it_as_written(client, llm: FakeOpenAI, tmp_path):
    llm.reply = checkpoints
    spec = write_spec(tmp_path, BUILDER, "Agentfile")
    (tmp_path / "agent-builder").mkdir()
    (tmp_path / "agent-builder" / "understand-problem.md").write_text(ANALYZER)
    state = await run_spec(client, spec, "openai:default", params={"problem_description": "PROBLEM-1"})
    assert state.status == "completed", state.errors
    analyzer = next(r.prompt or "" for r in llm.requests if "Goal build.understand.analyzer:" in (r.prompt or ""))
    assert 'GOAL review "Review $file_path"' in analyzer and "Analyze problem: PROBLEM-1." in analyzer


def test_an_undeclared_reference_in_the_agentfile_itself_is_still_an_error(cli, tmp_path):
    spec = write_spec(tmp_path, BUILDER.replace("$problem_description", "$problem"), "Agentfile")
    (tmp_path / "agent-builder").mkdir()
    (tmp_path / "agent-builder" / "understand-problem.md").write_text(ANALYZER)
    result = cli("validate", str(spec))
    assert result.code == 2
    assert "Agentfile:6:35: error: undefined reference $problem" in result.err
