"""A coding agent behind agentapi is told the tools its spec grants where it takes them: Claude
Code, started by the driver for the task (refresh mode), gets `--allowedTools` with their Claude
Code names; an agent of another type is started as before. Judged by the command the agentapi
stand-in (tests/fakes/agentapi_server.py) was started with, and what the agent itself saw."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.conftest import write_spec
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

PIPELINE = """
workflow:
  name: coding
  agents:
    coder:
      name: Coder
      prompt: Fix the failing test.
      tools: [Read, Edit, Bash]
  steps:
    - id: fix
      agent: coder
"""


def starts(log: Path) -> list[dict]:
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "start"]


@pytest.mark.parametrize(
    ("agent_type", "told"),
    [("claude", ["--allowedTools", "Read,Edit,Bash"]), ("codex", [])],
)
async def test_a_coding_agent_started_for_its_task_is_told_its_tools(client, tmp_path, agentapi_bin, agent_type, told):
    work = tmp_path / "work"
    work.mkdir()
    # The agent prints the arguments it was started with, and says it is done.
    (work / "agent.sh").write_text('cat >/dev/null; echo "args: $*"; echo "COMPLETION_STATUS: COMPLETE"\n')
    spec = write_spec(tmp_path, PIPELINE)
    uri = "agentapi:http://127.0.0.1:0?" + urlencode({"type": agent_type, "cmd": "sh agent.sh"})
    state = await run_spec(client, spec, uri, workdir=work)
    assert state.status == "completed", state.errors
    (start,) = starts(agentapi_bin)
    assert start["command"] == ["sh", "agent.sh", *told]
    assert f"args: {' '.join(told)}".strip() in str(state.final_output)
