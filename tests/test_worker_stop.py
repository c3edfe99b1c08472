"""A worker process asked to stop says how long it may take and is gone within that, with a run's
agent still running; and a run a polling worker does not take is diagnosed by `status`."""

from __future__ import annotations

import asyncio
import signal
import sys

from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.conftest import run_id, start_worker, wait_for, write_spec

# An agent that writes a file when it starts and then takes far longer than any grace period.
SLOW = """\
name: slow
subtasks:
  think:
    instructions: "think"
"""


def test_sigterm_with_a_run_in_flight_stops_the_worker_within_its_stated_bound(cli, address, tmp_path):
    started = tmp_path / "started"
    agent = f"command:{sys.executable} -c \"open('{started}', 'w').close(); import time; time.sleep(600)\""
    spec, queue, rid = write_spec(tmp_path, SLOW), run_id("q-stop"), run_id("stop")
    worker = start_worker(address, "--task-queue", queue)
    try:
        shown = cli("start", str(spec), "--agent", agent, "--id", rid, "--task-queue", queue, "--detach")
        assert shown.code == 0, shown.err
        wait_for(started.exists, timeout_s=60)
        worker.send_signal(signal.SIGTERM)
        # Its earlier lines (the sandbox layers it found) come first; the stop's line follows the signal.
        said = ""
        while not said.startswith("worker stopping") and (line := worker.stdout.readline()):
            said = line.decode()
        assert said.startswith("worker stopping: running activities have 10 s to finish; exiting within 15 s"), said
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert cli("cancel", rid).code == 0


@workflow.defn(name="NotAgentRun")
class NotAgentRun:
    @workflow.run
    async def run(self) -> None:
        return None


async def test_status_says_a_worker_polls_the_queue_but_does_not_take_the_run_and_what_to_do(client, cli, tmp_path):
    # A worker of another program polls the run's queue: it takes the run's work and cannot do it.
    queue, rid = run_id("q-other"), run_id("stuck")
    spec = write_spec(tmp_path, SLOW)
    async with Worker(client, task_queue=queue, workflows=[NotAgentRun], workflow_runner=UnsandboxedWorkflowRunner()):
        started = await asyncio.to_thread(
            cli, "start", str(spec), "--agent", "scripted:none.yaml", "--id", rid, "--task-queue", queue, "--detach"
        )
        assert started.code == 0, started.err
        shown = await asyncio.to_thread(cli, "status", rid)
    assert shown.code == 0, shown.err
    said = " ".join(shown.out.split())
    assert f"a worker polls task queue '{queue}' but has not taken this run's work for" in said, shown.out
    assert "tried" in said and "Stop that worker (SIGTERM: it exits within 15 s)" in said
    assert f"start one with `python -m worker --task-queue {queue}`, which replays the run" in said
    await client.get_workflow_handle(rid).terminate("the test is over")
