"""The command line as a user meets it: what it prints and its exit codes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SHELL_AGENT, alive, run_id, wait_for, write_spec

pytestmark = pytest.mark.usefixtures("worker_process")

GOOD = """\
name: cli-demo
params:
  topic: {range: string, required: true}
subtasks:
  research:
    instructions: "```sh\\necho researching {{ topic }}\\n```"
  write:
    instructions: "```sh\\necho draft about {{ topic }}\\n```"
"""

FAILING = """\
name: cli-fail
subtasks:
  one: {instructions: "```sh\\necho fine\\n```"}
  two: {instructions: "```sh\\necho it broke >&2; exit 4\\n```"}
  three: {instructions: "```sh\\necho never\\n```"}
"""


def test_start_follows_the_run_and_prints_the_report(cli, tmp_path):
    spec = write_spec(tmp_path, GOOD)
    rid = run_id("cli")
    result = cli("start", str(spec), "-p", "topic=durability", "--agent", SHELL_AGENT, "--id", rid)
    assert result.code == 0, result.err
    assert f"run {rid} started" in result.out
    assert "✓ research done in" in result.out and "✓ write done in" in result.out
    assert "# Workflow Execution Report: cli-demo" in result.out and "- Status: COMPLETE" in result.out
    assert "| 2 | write | default | SUCCESS |" in result.out
    assert "draft about durability" in result.out.split("## Final Output")[1]

    status = cli("status", rid, "--json")
    data = json.loads(status.out)
    assert data["run_id"] == rid and data["status"] == "completed"
    assert [(t["id"], t["status"], t["attempts"], t["iterations"]) for t in data["tasks"]] == [
        ("research", "completed", 1, 1),
        ("write", "completed", 1, 1),
    ]
    assert all(t["duration_s"] >= 0 for t in data["tasks"])

    report = json.loads(cli("report", rid, "--format", "json").out)
    assert report["summary"]["status"] == "COMPLETE" and report["summary"]["completed"] == 2
    assert "- Status: COMPLETE" in cli("report", rid).out
    assert rid in cli("list").out
    assert cli("watch", rid).code == 0


def test_failed_run_exits_1_and_reports_what_happened(cli, tmp_path):
    result = cli("start", str(write_spec(tmp_path, FAILING)), "--agent", SHELL_AGENT)
    assert result.code == 1
    assert "✗ two failed: the agent reported COMPLETION_STATUS: ERROR" in result.out
    assert (
        "- Status: FAILED (partial: 1 of 3 steps completed)" in result.out
        and "| 3 | three | default | NOT RUN |" in result.out
    )
    assert "ERROR two:" in result.out and "it broke" in result.out
    assert "Traceback" not in result.err + result.out


def test_missing_required_param_exits_2_before_anything_starts(cli, tmp_path):
    result = cli("start", str(write_spec(tmp_path, GOOD)), "--agent", SHELL_AGENT)
    assert result.code == 2 and "started" not in result.out
    assert f"{tmp_path / 'spec.yaml'}:3:1: error: missing required param 'topic'" in result.err
    assert "hint: pass it with -p topic=VALUE" in result.err


def test_param_from_a_file(cli, tmp_path):
    (tmp_path / "topic.txt").write_text("tides")
    result = cli(
        "start", str(write_spec(tmp_path, GOOD)), "-p", f"topic=@{tmp_path / 'topic.txt'}", "--agent", SHELL_AGENT
    )
    assert result.code == 0 and "draft about tides" in result.out


def test_bad_specs_exit_2_with_position_and_no_traceback(cli, tmp_path):
    spec = write_spec(tmp_path, GOOD.replace("  write:", "  write:\n    instrucions: x"))
    for command in (["validate", str(spec)], ["start", str(spec), "-p", "topic=x", "--agent", SHELL_AGENT]):
        result = cli(*command)
        assert result.code == 2
        assert f"{spec}:8:5: error: unknown key 'instrucions'" in result.err
        assert "did you mean 'instructions'?" in result.err and "Traceback" not in result.err
    good = cli("validate", str(write_spec(tmp_path, GOOD + "requirements: [git, make]\n", "good.yaml")))
    assert good.code == 0 and "valid task-tree spec 'cli-demo' with 2 task(s)" in good.out
    assert "requirements: ['git', 'make']" in good.out
    missing = cli("validate", str(tmp_path / "nope.yaml"))
    assert missing.code == 2 and "cannot read spec" in missing.err


def test_usage_mistakes_exit_2(cli, tmp_path):
    spec = str(write_spec(tmp_path, GOOD))
    no_agent = cli("start", spec, "-p", "topic=x")
    assert no_agent.code == 2 and "no agent is configured" in no_agent.err
    bad_uri = cli("start", spec, "-p", "topic=x", "--agent", "gpt4")
    assert bad_uri.code == 2 and "'gpt4' is not an agent URI" in bad_uri.err
    resume = cli("start", spec, "-p", "topic=x", "--agent", SHELL_AGENT, "--resume-from", "nowhere")
    assert resume.code == 2 and "no single task named 'nowhere'" in resume.err
    assert cli("status", "no-such-run").code == 2
    rid = run_id("dup")
    assert cli("start", spec, "-p", "topic=x", "--agent", SHELL_AGENT, "--id", rid).code == 0
    again = cli("start", spec, "-p", "topic=x", "--agent", SHELL_AGENT, "--id", rid)
    assert again.code == 2 and "already exists" in again.err


def test_unreachable_temporal_exits_3(cli, tmp_path):
    result = cli(
        "start",
        str(write_spec(tmp_path, GOOD)),
        "-p",
        "topic=x",
        "--agent",
        SHELL_AGENT,
        extra_env={"TEMPORAL_ADDRESS": "127.0.0.1:1"},
        timeout=60,
    )
    assert result.code == 3 and "cannot reach Temporal at 127.0.0.1:1" in result.err


def test_cancel_stops_the_running_agent(cli, tmp_path):
    pid = tmp_path / "agent.pid"
    spec = write_spec(tmp_path, "subtasks:\n  slow: {instructions: wait}\n  after: {instructions: never}\n")
    agent = f"command:sh -c 'cat >/dev/null; echo $$ > {pid}; sleep 60; echo COMPLETION_STATUS: COMPLETE'"
    rid = run_id("cancel")
    assert cli("start", str(spec), "--agent", agent, "--id", rid, "--detach").code == 0
    wait_for(lambda: json.loads(cli("status", rid, "--json").out)["current_task"] == "slow" and pid.exists())
    assert cli("cancel", rid).code == 0
    assert cli("watch", rid).code == 1
    data = json.loads(cli("status", rid, "--json").out)
    assert data["status"] == "cancelled"
    assert [t["status"] for t in data["tasks"]] == ["cancelled", "pending"]
    # The agent process is stopped, not left to sleep out its minute.
    wait_for(lambda: not alive(int(pid.read_text())), timeout_s=15)
