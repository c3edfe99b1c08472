"""cyberian's own workflows, written as its documentation writes them, behave here as they do there."""

from __future__ import annotations

import pytest

from tests.conftest import write_spec
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

RESEARCH = """
name: deep-research
params:
  query: {range: string, required: true}
subtasks:
  research:
    instructions: |
      Research {{ query }}. Keep notes in notes.md.
    loop_until:
      status: NO_MORE_RESEARCH
      message: |
        If you think all research avenues are exhausted, yield status NO_MORE_RESEARCH.
  build:
    instructions: Build the pieces one by one.
    loop_until:
      status: BUILT
      message: When all are built, say BUILT.
"""


async def test_a_loop_ends_on_its_status_word_beside_a_complete_status_but_not_beside_continue(client, tmp_path):
    replies = tmp_path / "replies.yaml"
    replies.write_text(
        "tasks:\n"
        "  research:\n"
        "    - 'Found two papers. COMPLETION_STATUS: COMPLETE'\n"
        "    - 'All avenues covered: no_more_research. COMPLETION_STATUS: COMPLETE'\n"
        "  build:\n"
        "    - 'Built 1 of 3; when all are BUILT I will say so. COMPLETION_STATUS: CONTINUE'\n"
        "    - 'Everything is BUILT. COMPLETION_STATUS: COMPLETE'\n"
    )
    spec = write_spec(tmp_path, RESEARCH)
    state = await run_spec(client, spec, f"scripted:{replies}", params={"query": "tides"})
    assert state.status == "completed"
    assert state.tasks["research"].iterations == 2 and state.tasks["build"].iterations == 2
    assert not any("stopped after" in w for w in state.warnings)


async def test_a_provider_calls_output_file_and_params_are_templates_over_the_params(client, tmp_path):
    spec = write_spec(
        tmp_path,
        """
name: fetch-and-save
params:
  topic: {range: string, required: true}
subtasks:
  save:
    provider_call:
      provider: shell
      method: run
      params: {command: "echo notes on {{ topic }}"}
      output_file: "{{ topic }}-notes.txt"
""",
    )
    state = await run_spec(client, spec, "command:true", params={"topic": "tides"})
    assert state.status == "completed"
    assert (tmp_path / "tides-notes.txt").read_text().strip() == "notes on tides"
