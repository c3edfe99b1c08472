"""A run no worker runs: every command says so plainly and how to start one, `status` and `report`
still show its spec and steps (from its start input), and `watch --worker` runs it to its end;
once it has ended, `watch` shows its report without asking for a worker."""

from __future__ import annotations

from tests.conftest import SHELL_AGENT, run_id, sigkill, start_worker, wait_for, watched_by_a_new_worker, write_spec
from tests.test_terminal import HELD


def test_a_run_no_worker_polls_for_says_so_and_watch_worker_runs_it(cli, cli_process, tmp_path):
    spec, queue, rid = write_spec(tmp_path, HELD), run_id("q-none"), run_id("held")
    # Detached, the run waits on the queue it was given for any worker that comes later.
    hint = (
        f"no worker polls task queue '{queue}', so nothing runs it: start one with `python -m worker --task-queue "
        f"{queue}`, or run one here with `python -m client watch {rid} --worker`"
    )
    started = cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0 and started.out.splitlines()[1:] == [hint]

    status = cli("status", rid)
    assert status.code == 0
    assert status.out.splitlines()[:3] == [
        f"{rid}: RUNNING",
        f"  {'ship':<30} pending    attempts=0 iterations=0 0.0s",
        f"  ! {hint}",
    ]
    report = cli("report", rid).out
    assert "# Workflow Execution Report: held" in report and "- Total steps: 1" in report
    assert "| 1 | ship | default | NOT RUN |" in report

    watching = cli_process("watch", rid)
    assert watching.stdout.readline() == f"  ! {hint}\n"
    watching.kill()

    running = cli_process("watch", rid, "--worker")
    assert running.stdout.readline().startswith("? ship: Ship it? [approve/reject]")
    assert cli("approve", rid, "--gate", "ship").code == 0
    out, err = running.communicate(timeout=60)
    assert running.returncode == 0, out + err
    assert "✓ ship done in" in out and "- Status: COMPLETE" in out

    # Ended, it needs no worker: watching it again shows its report and no hint.
    again = cli("watch", rid)
    assert again.code == 0 and "- Status: COMPLETE" in again.out
    assert "no worker" not in again.out + again.err


def test_a_detached_run_waits_for_a_worker_started_afterwards(cli, address, tmp_path):
    spec, queue, rid = write_spec(tmp_path, QUICK), run_id("q-later"), run_id("later")
    started = cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0, started.err
    assert f"start one with `python -m worker --task-queue {queue}`" in started.out
    watched = watched_by_a_new_worker(cli, address, rid, "--task-queue", queue)  # the fix the hint gives, as printed
    assert watched.code == 0, watched.out + watched.err
    assert "- Status: COMPLETE" in watched.out


QUICK = """name: later
subtasks:
  hello:
    instructions: |
      ```sh
      echo hello from a later worker
      ```
"""


KEPT = """\
name: kept
subtasks:
  build:
    instructions: "```sh\\necho built\\n```"
  ship:
    approval: {prompt: "Ship it?"}
    instructions: "```sh\\necho shipped\\n```"
"""


def test_status_after_a_worker_is_killed_shows_the_steps_its_history_records(cli, address, tmp_path):
    """kill -9 of the worker while the run waits at a gate: `status` reads the done step from the
    run's history (done, one attempt), not as if the run had just started."""
    spec, queue, rid = write_spec(tmp_path, KEPT), run_id("q-kept"), run_id("kept")
    started = cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0, started.err
    worker = start_worker(address, "--task-queue", queue)
    try:
        wait_for(lambda: cli("status", rid).out.startswith(f"{rid}: WAITING"))
    finally:
        sigkill(worker)
    status = cli("status", rid)
    assert status.code == 0, status.err
    rows = {line.split()[0]: line.split()[1:3] for line in status.out.splitlines()[1:3]}
    assert rows == {"build": ["completed", "attempts=1"], "ship": ["pending", "attempts=0"]}, status.out
    assert "its steps are shown as its history records them" in status.out
