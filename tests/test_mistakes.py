"""Mistakes that used to pass silently: a `-p` or `--agent ID=` naming nothing in the spec (warned,
with the nearest name), a success check's Python that does not compile (refused by `validate`),
and a check's many-line error (kept whole in the report)."""

from __future__ import annotations

from agentrun.explain import report
from agentrun.models.contract import RunState, TaskState
from tests.conftest import write_spec

SPEC = """\
name: typos
params:
  topic: {range: string, required: true}
subtasks:
  write:
    instructions: "Write about {{ topic }} for {{ audience }}."
    agent: writer
"""


def test_a_param_or_agent_id_the_spec_does_not_use_is_warned_about_with_the_nearest_name(cli, tmp_path):
    spec = write_spec(tmp_path, SPEC)
    result = cli(
        "dry-run",
        str(spec),
        "-p",
        "topic=tides",
        "-p",
        "topik=tides",
        "-p",
        "audience=kids",  # read by a template though not declared, as cyberian allows
        "--agent",
        "command:cat",
        "--agent",
        "writr=command:cat",
        "--agent",
        "writer=command:cat",
    )
    assert result.code == 0, result.err
    assert result.err.splitlines()[:4] == [
        "-p topik: warning: the spec has no param 'topik'; the value is not used",
        "  hint: did you mean 'topic'?",
        "--agent writr=command:cat: warning: no step of the spec talks to agent 'writr'; this URI is not used",
        "  hint: did you mean 'writer'?",
    ]
    assert "audience" not in result.err


def test_validate_refuses_a_success_check_whose_python_does_not_compile(cli, tmp_path):
    spec = write_spec(
        tmp_path,
        "subtasks:\n  build:\n    instructions: Build.\n    success_criteria:\n      python: |\n"
        "        import os\n        result = os.path.exists('{{ workdir }}'\n",
    )
    result = cli("validate", str(spec))
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.splitlines() == [
        f"{spec}:2:1: error: the success_criteria python of 'build' does not compile: '(' was never closed at its "
        "line 2: result = os.path.exists('{{ workdir }}'",
        "  hint: fix the Python: it runs as written, with each {{ }} filled in",
    ]


def test_the_report_keeps_a_checks_many_line_error_whole():
    error = "success criteria failed after 1 attempt(s): check.sh exited with status 3:\nfirst line\nthe real reason"
    state = RunState(
        run_id="r",
        spec="s",
        status="failed",
        tasks={"two": TaskState(id="two", status="failed", error=error)},
        errors=[f"two: {error}"],
    )
    assert (
        "- ERROR two: success criteria failed after 1 attempt(s): check.sh exited with status 3:\n"
        "  ```\n  first line\n  the real reason\n  ```\n"
    ) in report.to_markdown(state)
