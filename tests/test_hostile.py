"""Hostile input: each refusal is one message at its file:line:column with a hint, and a template
that cannot be filled in fails its run with the reason instead of leaving it spinning."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentrun.activities.providers.process import run_process
from agentrun.explain import report, status
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.models.contract import RunInput
from tests.conftest import ROOT, TEST_QUEUE, run_id, until, write_spec
from tests.fuzz_specs import HOSTILE
from tests.runs import finish, run_spec
from tests.specs import run_cli

REFUSED = {
    "nul": ("2:23", "a control character (#x0000) is not allowed in YAML"),
    "latin1": ("2:24", "the spec is not UTF-8 text: byte 0xe9 cannot be read"),
    "complex-key": ("1:3", "a key must be a name or a value, not a list or a mapping"),
    "big-int": ("2:33", "this number has too many digits"),
    "deep-yaml": ("1:", "nested more than 64 levels deep"),
    "alias-bomb": ("", "this document holds more than 20,000 values (an alias counts each time it is used)"),
    "recursive-alias": ("1:", "an alias refers to the value it is in"),
    "deep-if": ("2:", "nested too deeply (parentheses, brackets or {% %} blocks)"),
    "int-steps": ("5:3", "workflow.steps: Input should be a valid list"),
    "huge-name-list": ("1:", "this document holds more than 20,000 values"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_hostile_specs_are_one_clear_error(tmp_path, name):
    path = tmp_path / "spec.yaml"
    path.write_bytes(dict(HOSTILE)[name])
    with pytest.raises(SpecError) as info:
        load(str(path))
    [problem] = info.value.problems
    where, message = REFUSED[name]
    assert str(problem).startswith(f"{path}:{where}"), str(problem)
    assert message in problem.message and problem.hint


def test_utf16_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(dict(HOSTILE)["utf16"])
    assert load(str(path)).leaves()[0].id == "a"


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("{{ range(10**9) | list | length }}", "SecurityError: a template may not give a function or filter a number"),
        ('{{ "x".center(3000000000) }}', "SecurityError: a template may not give a function or filter a number"),
        ("{{ lipsum(10**7) }}", "SecurityError: a template may not give a function or filter a number"),
        (
            "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
            "SecurityError: the template could not be filled in: RecursionError",
        ),
        ('{{ "a" * 10**10 }}', "SecurityError: a template may not build text or lists longer than 1,000,000"),
        (
            '{% for i in range(100000) %}{{ "x" * 100 }}{% endfor %}',
            "SecurityError: a template's text may not grow past 1,000,000 characters",
        ),
    ],
)
async def test_a_template_that_cannot_be_filled_in_fails_its_run_with_the_reason(client, tmp_path, template, reason):
    spec = write_spec(tmp_path, f"subtasks:\n  a: {{instructions: '{template}'}}\n  b: {{instructions: after}}\n")
    state = await run_spec(client, spec, "command:sh -c 'cat >> prompts; echo COMPLETION_STATUS: COMPLETE'")
    assert state.status == "failed"
    assert state.errors[0].startswith(f"a: {reason}")
    assert state.tasks["a"].status == "failed" and state.tasks["b"].status == "pending"
    assert not (tmp_path / "prompts").exists()  # no agent was sent anything


def test_dry_run_of_a_template_that_would_exhaust_memory_says_so_without_a_traceback(tmp_path):
    template = "{{ ('x' * 999999) | replace('x', 'y' * 999999) }}"
    spec = write_spec(tmp_path, f'subtasks:\n  a: {{instructions: "{template}"}}\n')
    shown = run_cli("dry-run", str(spec), "--agent", "default=command:cat")
    assert "Traceback" not in shown.stdout + shown.stderr
    problem = "1: cannot fill in its prompt: the template could not be filled in: MemoryError: it needs more memory"
    assert problem in shown.stdout


@pytest.mark.parametrize("timeout", ["-3", "0", "1.0e+300", "'1000000d'"])
def test_a_timeout_that_would_leave_a_run_stuck_is_refused_when_the_spec_is_read(tmp_path, timeout):
    text = f"subtasks:\n  a: {{instructions: go, timeout: {timeout}}}\n"
    with pytest.raises(SpecError) as info:
        load(str(write_spec(tmp_path, text)))
    [problem] = info.value.problems
    assert (problem.line, problem.column) == (2, 25)  # the value after `timeout:`
    assert "is not a duration from 1ms to a year (365d)" in problem.message


@pytest.mark.parametrize("address", ["::bad::", "localhost:notaport"])
def test_a_malformed_temporal_address_is_one_error_and_exit_3(address):
    env = {**os.environ, "TEMPORAL_ADDRESS": address}
    result = subprocess.run(
        [sys.executable, "-m", "agentrun.client", "list"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: TEMPORAL_ADDRESS '{address}' is not an address")


# The agent's reply closes a ''' string and writes a file, if it is ever spliced into code.
INJECTING_AGENT = (
    "command:sh -c \"cat >/dev/null; printf '%s\\n' \\\"x'''; open('pwned', 'w').write('1'); '''\\\" "
    "'COMPLETION_STATUS: COMPLETE'\""
)
SPLICED = """
subtasks:
  write:
    instructions: Write notes.
    store_as: notes
  check:
    instructions: Check the notes.
    success_criteria:
      python: |
        text = '''{{ notes }}'''
        result = "x" in text
"""


def test_a_check_that_splices_an_agents_text_into_its_code_is_refused(tmp_path):
    with pytest.raises(SpecError) as info:
        load(str(write_spec(tmp_path, SPLICED)))
    [problem] = info.value.problems
    assert (
        problem.line == 9
        and "success_criteria python reads 'notes', which an agent or a person wrote" in problem.message
    )
    assert "AGENTRUN_VALUES" in problem.hint


@pytest.mark.usefixtures("worker")
async def test_a_check_reads_an_agents_text_as_data_and_never_runs_it(client, tmp_path):
    as_data = SPLICED.replace(
        "        text = '''{{ notes }}'''\n",
        "        import json, os\n        text = json.load(open(os.environ['AGENTRUN_VALUES']))['notes']\n",
    )
    state = await run_spec(client, write_spec(tmp_path, as_data), INJECTING_AGENT)
    assert state.status == "completed", state.errors
    assert "open('pwned'" in state.memory["notes"] and not (tmp_path / "pwned").exists()


def test_validate_warns_when_a_shell_command_reads_an_agents_text(tmp_path):
    text = (
        SPLICED.split("  check:")[0] + "  publish:\n    provider_call:\n      provider: shell\n      method: run\n"
        '      params: {command: "echo {{ notes }}"}\n'
    )
    [warning] = load(str(write_spec(tmp_path, text))).warnings
    assert ":10:16: warning: this shell command reads 'notes', which an agent or a person wrote" in warning


async def test_a_command_that_writes_gigabytes_keeps_only_its_tail(tmp_path):
    # 200 MB through the real process runner; the worker keeps the last MB.
    done = await run_process(
        ["sh", "-c", "head -c 200000000 /dev/zero | tr '\\0' x; echo; echo the end"], cwd=str(tmp_path), timeout_s=60
    )
    assert done.returncode == 0 and done.stdout.endswith("the end\n")
    assert done.stdout.startswith("… (199,000,009 bytes before this were cut)") and len(done.stdout) < 1_100_000


@pytest.mark.parametrize("value", ["-3", "0", "many"])
def test_a_limit_on_the_command_line_must_be_above_0(value):
    result = subprocess.run(
        [sys.executable, "-m", "agentrun.client", "start", "examples/quickstart.yaml", "--max-iterations", value],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 2 and "argument --max-iterations:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.usefixtures("worker")
async def test_transport_retries_show_in_the_report_and_the_state(client, tmp_path, llm):
    llm.fail_next(2, 503)
    spec = write_spec(tmp_path, "workflow:\n  name: w\n  agents: {a: {prompt: go}}\n  steps: [{id: s, agent: a}]\n")
    state = await run_spec(client, spec, "openai:m")
    assert state.status == "completed", state.errors
    assert state.tasks["s"].retries == 2 and state.retry_count == 2
    assert "s: agent 'a' answered on attempt 3 (transport errors before)" in state.warnings
    assert "- Retries used: 2" in report.to_markdown(state)
    # `status` counts the attempts as the history has them: the agent call's three.
    assert " attempts=3 " in "\n".join(status.lines(state))
    assert report.tasks_json(state)[0]["attempts_made"] == 3


@pytest.mark.usefixtures("worker")
async def test_a_run_terminated_from_outside_says_so_and_why_in_its_report(client, tmp_path, llm):
    llm.hold("slow")
    spec = write_spec(tmp_path, "workflow:\n  name: w\n  agents: {a: {prompt: go}}\n  steps: [{id: s, agent: a}]\n")
    plan = load(str(spec))
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent="openai:slow", heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("terminated"), task_queue=TEST_QUEUE)
    await until(lambda: llm.in_flight("slow") == 1)
    await handle.terminate(reason="stuck on a release freeze")
    llm.release()
    state = await finish(client, handle)
    assert state.status == "terminated"
    assert state.errors[-1].startswith("the run was terminated from outside") and "release freeze" in state.errors[-1]
    assert "stuck on a release freeze" in report.to_markdown(state)


@pytest.mark.parametrize(
    ("param", "needle", "message", "hint"),
    [
        ("{range: string, defauult: v1}", "defauult", "unknown key 'defauult'", "did you mean 'default'?"),
        ("{range: nosuchtype}", "range", "param 'version' has the unknown range 'nosuchtype'", "write one of:"),
        (
            "{range: integer, default: soon}",
            "default",
            "default of param 'version': 'soon' is not an integer",
            "integer",
        ),
    ],
)
def test_silent_mistakes_in_a_param_are_refused(tmp_path, param, needle, message, hint):
    text = f"params:\n  version: {param}\nsubtasks:\n  tag: {{instructions: 'Tag {{{{ version }}}}'}}\n"
    with pytest.raises(SpecError) as info:
        load(str(write_spec(tmp_path, text)))
    [problem] = info.value.problems
    assert (problem.line, problem.column) == (2, text.splitlines()[1].index(needle) + 1)
    assert problem.message == message and hint in problem.hint
