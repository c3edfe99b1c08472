"""Small things a newcomer trips over: progress lines a poll would miss, the budget hint naming the
limit that was hit, the undo stack of a completed run, one shape of `tasks` in JSON, one spelling of
cancelled."""

from __future__ import annotations

import io
import json

from rich.console import Console

from agentrun.cli.follow import _Printer
from agentrun.explain import report
from agentrun.explain.gates import how_to_answer
from agentrun.ids import GateId
from agentrun.models.contract import CompensationEntry, Gate, RunState, TaskState
from tests.conftest import SHELL_AGENT, run_id, write_spec


def test_progress_shows_every_start_line_attempt_and_loop_round_between_two_polls():
    out = io.StringIO()
    printer = _Printer(Console(file=out, width=200), "r")
    looped = TaskState(id="research", agent="a", status="completed", attempts=2, iterations=3, duration_s=1.0)
    printer.show(RunState(run_id="r", tasks={"research": looped}))
    assert out.getvalue().splitlines() == [
        "▶ research (a)",
        "  ↺ research attempt 2",
        "  ↻ research iteration 2",
        "  ↻ research iteration 3",
        "✓ research done in 1.0s",
    ]


def test_a_retried_step_that_does_not_loop_shows_its_attempts_only():
    """Each attempt of a step without a loop is one prompt: no round lines beside its attempt lines."""
    out = io.StringIO()
    printer = _Printer(Console(file=out, width=200), "r")
    for attempts in (1, 2, 3):
        retried = TaskState(id="build", agent="a", status="running", attempts=attempts, iterations=attempts)
        printer.show(RunState(run_id="r", tasks={"build": retried}))
    assert out.getvalue().splitlines() == ["▶ build (a)", "  ↺ build attempt 2", "  ↺ build attempt 3"]


def test_the_budget_hint_names_the_limit_that_was_hit():
    def hint(why: str) -> str:
        return how_to_answer("r", Gate(id=GateId("budget"), kind="budget", prompt=f"budget exceeded: {why}"))

    assert "--gate budget --iterations N, or" in hint("3 prompts sent, as many as the budget allows")
    assert "--gate budget --tokens N, or" in hint("120 tokens used, over the budget of 100")
    assert "--gate budget --usd X, or" in hint("$0.2 spent, over the budget of $0.1")


def test_a_completed_run_lists_no_undo_still_on_the_stack():
    stack = [CompensationEntry(action_id="tag", compensation_action={"type": "agent"})]
    done = RunState(run_id="r", status="completed", compensation_stack=stack)
    assert "## Compensations" not in report.to_markdown(done)
    failed = RunState(run_id="r", status="failed", compensation_stack=stack)
    assert "- Still on the stack (not run), next first: tag" in report.to_markdown(failed)


def test_tasks_have_one_shape_in_status_and_report_json_and_cancelled_one_spelling(cli, tmp_path):
    spec = write_spec(tmp_path, 'name: shapes\nsubtasks:\n  one: {instructions: "```sh\\necho hi\\n```"}\n')
    rid = run_id("shapes")
    assert cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", run_id("q")).code == 0
    status = json.loads(cli("status", rid, "--json").out)["tasks"]
    assert json.loads(cli("report", rid, "--format", "json").out)["tasks"] == status
    assert [t["id"] for t in status] == ["one"] and {"status", "attempts", "started_at", "error"} <= set(status[0])

    waiting = run_id("cancel-me")
    queue = run_id("q-none")
    assert cli("start", str(spec), "--agent", SHELL_AGENT, "--id", waiting, "--task-queue", queue, "--detach").code == 0
    assert cli("cancel", waiting).code == 0
    assert cli("watch", waiting, "--worker").code == 1  # a worker takes the cancellation
    again = cli("cancel", waiting)
    assert again.code == 2 and f"run {waiting} has ended (cancelled)" in again.err
    assert cli("list", "--spec", "shapes", "--status", "cancelled", "--json").out.count(waiting) == 1
