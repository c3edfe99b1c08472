"""cyberian's own workflows, written as its documentation writes them, behave here as they do there."""

from __future__ import annotations

import pytest

from agentrun.lang import ir
from agentrun.lang.load import load
from agentrun.models.texts.status_text import prompt
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


# An agent that keeps every prompt it is sent, one after another, in prompts.txt of the work directory.
RECORDER = "command:sh -c 'cat >> prompts.txt; echo; echo ----- >> prompts.txt; echo COMPLETION_STATUS: COMPLETE'"


def prompts(folder) -> list[str]:
    path = folder / "prompts.txt"
    return [p.strip() for p in path.read_text().split("-----") if p.strip()] if path.exists() else []


TAG_DOCUMENTS = """
name: tag-documents
description: Tag each abstract with terms from tags.json
requires_workdir: true
params:
  filename: {range: string, required: false}
  config: {range: string}
preconditions:
  sync_targets:
    description: the abstracts and the tag list travel with the workflow
    paths: [abstracts, tags.json]
  files_exist:
    patterns: ["abstracts/*.txt"]
    min_count: 1
    note: cyberian ignores this key
subtasks:
  tag:
    instructions: |
      Tag the abstracts; write {{ filename | default('output.txt') }}.
      {% if config is defined %}Use {{ config }}.{% else %}No config.{% endif %}
      Extra: {{ extra }}
    loop_until: {status: DONE, message: Say DONE., hint: ignored}
"""


async def test_a_workflow_written_for_cyberian_loads_warns_and_runs_as_there(client, tmp_path):
    spec_dir, work = tmp_path / "spec", tmp_path / "work"
    (spec_dir / "abstracts").mkdir(parents=True)
    work.mkdir()
    (spec_dir / "abstracts" / "a1.txt").write_text("An abstract.")
    (spec_dir / "tags.json").write_text("[]")
    spec = write_spec(
        spec_dir, TAG_DOCUMENTS.replace("Say DONE.", "Say DONE.").replace("{status: DONE", "{status: COMPLETE")
    )
    state = await run_spec(client, spec, RECORDER, params={"extra": "given with -p"}, workdir=work)
    assert state.status == "completed", state.errors
    assert (work / "abstracts" / "a1.txt").exists() and (work / "tags.json").exists()  # synced before anything ran
    [prompt] = prompts(work)
    assert "write output.txt." in prompt and "No config." in prompt and "Extra: given with -p" in prompt


def test_validate_warns_of_ignored_keys_and_undeclared_names_with_their_lines(tmp_path):
    from tests.specs import plan_of

    plan = plan_of(tmp_path, TAG_DOCUMENTS)
    warnings = "\n".join(plan.warnings)
    assert ":15:5: warning: unknown key 'note' is ignored, as cyberian ignores it" in warnings
    assert (
        ":21:1: warning: undeclared template variable 'extra': renders empty unless given with -p extra=…" in warnings
    )
    assert "unknown key 'hint' is ignored" in warnings and "did you mean" not in warnings.split("'hint'")[1][:60]
    assert "description" not in warnings  # a real field of cyberian's sync targets


async def test_a_failing_root_precondition_stops_the_run_before_any_agent_is_prompted(client, tmp_path):
    spec = write_spec(tmp_path, TAG_DOCUMENTS.replace("paths: [abstracts, tags.json]", "paths: [elsewhere]"))
    state = await run_spec(client, spec, RECORDER)
    assert state.status == "failed"
    assert state.errors == ["tag-documents: precondition failed: no files match 'abstracts/*.txt'"]
    assert any("sync target 'elsewhere' not found in the spec folder" in w for w in state.warnings)
    assert prompts(tmp_path) == []


async def test_success_criteria_after_a_provider_call_run_again_while_they_fail(client, tmp_path):
    spec = write_spec(
        tmp_path,
        """
name: count
subtasks:
  bump:
    provider_call:
      provider: shell
      method: run
      params: {command: "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; cat n"}
    success_criteria:
      python: result = open("n").read().strip() == "3"
      max_retries: 3
""",
    )
    state = await run_spec(client, spec, RECORDER)
    assert state.status == "completed", state.errors
    assert (tmp_path / "n").read_text().strip() == "3" and state.tasks["bump"].attempts == 3


def test_agent_lifecycle_is_read_in_any_case(tmp_path):
    from tests.specs import plan_of

    assert plan_of(tmp_path, "agent_lifecycle: REFRESH\ninstructions: go\n").lifecycle == "refresh"


def test_a_retry_without_a_retry_message_is_the_prompt_again_as_there(tmp_path):
    """(tests/compat runs it through the real cyberian too.) Runs recorded before this rule keep
    the default message they sent."""
    text = "subtasks:\n  write:\n    instructions: Write out.txt.\n    success_criteria: {python: 'result = False', max_retries: 1}\n"
    [task] = load(str(write_spec(tmp_path, text))).leaves()
    assert isinstance(task, ir.Task)
    first = prompt(task, {}, None)
    assert prompt(task, {}, "result was False") == first
    older = prompt(task, {}, "result was False", older_retry=True)
    assert older == "The previous attempt failed its success check: result was False\n\n" + first
