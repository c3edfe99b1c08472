"""Words that match what happened: what a person reads after a run says what the run did, in its
own terms. The completion protocol stays between the engine and the agent; a fallback the spec asks
for is no error; a cancelled branch says what cancelled it; `y` approves at the terminal; a dry run
fills in what it knows and says what only the run has."""

from __future__ import annotations

import json
import os
import sys

import pytest

from agentrun.lang import ir
from agentrun.models.contract import RunInput
from tests.conftest import SHELL_AGENT, TEST_QUEUE, run_id, sigkill, write_spec
from tests.runs import finish, plan, sh
from tests.test_forkserver import read_until, start_at_a_terminal
from tests.test_terminal import HELD

TWO_STEPS = """\
name: built
subtasks:
  build:
    instructions: "```sh\\necho built\\n```"
    store_as: built
  check:
    instructions: "```sh\\necho 'checked {{ built }}'\\n```"
"""


@pytest.mark.usefixtures("worker_process")
def test_no_output_a_person_reads_carries_the_completion_protocol(cli, tmp_path):
    spec = write_spec(tmp_path, TWO_STEPS)
    started = cli("start", str(spec), "--agent", SHELL_AGENT)
    assert started.code == 0, started.err
    rid = started.out.split()[1]
    assert "## Final Output\n\nchecked built\n" in started.out  # the next prompt read `built` alone
    report, status, state = cli("report", rid), cli("status", rid), cli("status", rid, "--json")
    for shown in (started.out, report.out, status.out, state.out):
        assert "COMPLETION_STATUS" not in shown
    assert json.loads(state.out)["memory"] == {"built": "built"}


@pytest.mark.usefixtures("worker_process")
def test_a_selectors_fallback_is_not_taken_rather_than_failed(cli):
    shipped = cli("start", "examples/trees/ship.yaml", "--agent", f"command:{sys.executable} ../agents/tree_agent.py")
    assert shipped.code == 0, shipped.err + shipped.out
    out = shipped.out
    assert "↷ Ship/Build/Reuse_Cached_Build@1 not taken: precondition not met: exit code 1" in out
    assert "✗" not in out and "ERROR" not in out and "FAILED" not in out
    assert "| 3 | Ship/Build/Reuse_Cached_Build@1 | default | NOT TAKEN |" in out
    assert "- Status: COMPLETE" in out and "- Steps failed: 0" in out
    assert "## Issues and Warnings\n\n- none\n" in out


async def test_a_failed_branch_of_wait_all_says_it_cancelled_the_others(client, worker, tmp_path):
    def task(tid: str, line: str) -> ir.Task:
        return ir.Task(id=tid, agent=tid, prompt=json.loads(sh(line)), protocol="status", step=True)

    branches = ir.Parallel(id="both", children=[task("broken", "exit 3"), task("slow", "sleep 30")], wait="all")
    inp = RunInput(plan=plan(branches), params={}, workdir=str(tmp_path), default_agent=SHELL_AGENT, heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("wait"), task_queue=TEST_QUEUE)
    state = await finish(client, handle)
    assert state.status == "failed"
    assert "both: 1 branch(es) cancelled once broken failed, so the wait policy (all) could no longer be met" in (
        state.warnings
    )
    assert not any("was met" in warning for warning in state.warnings)


@pytest.mark.parametrize(("typed", "ends"), [("y", "COMPLETE"), ("yes", "COMPLETE"), ("n", "FAILED")])
def test_the_terminal_approval_prompt_takes_y_and_n(address, tmp_path, typed, ends):
    spec = write_spec(tmp_path, HELD)
    started, terminal = start_at_a_terminal(address, tmp_path, str(spec), "--agent", SHELL_AGENT)
    try:
        read_until(terminal, "Ship it? [approve/reject]")
        os.write(terminal, typed.encode() + b"\n")
        rest = read_until(terminal, "## Issues and Warnings")
        started.wait(timeout=60)
        assert "Please select one of the available options" not in rest
        assert f"- Status: {ends}" in rest
        assert ("shipped" in rest) == (ends == "COMPLETE")
    finally:
        if started.poll() is None:
            sigkill(started)
        os.close(terminal)


def test_dry_run_fills_in_a_gates_question_and_says_what_only_the_run_has(cli):
    shown = cli("dry-run", "examples/release.yaml", "-p", "version=2.0.0")
    assert shown.code == 0, shown.err
    assert "{{" not in shown.out
    assert "needs approval (gate publish): Publish 2.0.0 with the notes '<answer to notes>'?" in shown.out
    assert "<…> stands for a value only the run has: an output, a person's answer, the run id." in shown.out


def test_the_supervisor_agent_of_a_supervised_agentfile_is_not_called_unused(cli):
    agent = "command:python ../../agents/checkpoint_agent.py"
    shown = cli(
        "dry-run",
        "examples/agentfile/supervised/Agentfile",
        "--agent",
        f"default={agent}",
        "--agent",
        f"supervisor={agent}",
    )
    assert shown.code == 0 and shown.err == ""
    assert f"agent supervisor via {agent}" in shown.out


def test_a_spec_of_provider_calls_only_starts_without_an_agent(cli, tmp_path):
    spec = write_spec(
        tmp_path,
        "name: note\nsubtasks:\n  write:\n    provider_call: {provider: shell, method: run, params: {command: 'echo hi'}}\n",
    )
    started = cli("start", str(spec))
    assert started.code == 0, started.err
    assert "no agent is configured" not in started.err and "- Status: COMPLETE" in started.out
