"""Answers given while the worker that held a run has just died, or while no worker runs at all:
`answer` waits for one (`--wait`), or queues the answer for the next one (`--no-wait`); `pending` and
`status` show the run as it is in the seconds after a restart.

Real worker processes on a queue of each test's own, SIGKILLed as a crash would; the run's agent is
the fake OpenAI server, so the prompts sent after the gate can be counted.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from tests.conftest import Result, run_id, sigkill, start_worker, write_spec
from tests.runs import open_gate, state_of

PAINT = """\
name: paint
subtasks:
  colour:
    human: {prompt: "Which colour?", choices: [red, blue]}
  paint:
    instructions: "Paint it {{ human.colour }}."
"""
WAITING = "waiting for a worker to take the answer…"


@dataclass
class Lab:
    """Workers on a queue of the test's own, and the runs started there; all stopped at the end."""

    address: str
    queue: str
    workers: list[subprocess.Popen] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    def worker(self) -> subprocess.Popen:
        proc = start_worker(self.address, "--task-queue", self.queue)
        self.workers.append(proc)
        return proc

    def start(self, cli, folder: Path) -> str:
        rid = run_id("paint")
        spec = str(write_spec(folder, PAINT))
        started = cli("start", spec, "--agent", "openai:painter", "--id", rid, "--task-queue", self.queue, "--detach")
        assert started.code == 0, started.err
        self.runs.append(rid)
        return rid


@pytest.fixture
def lab(address, client, llm) -> Iterator[Lab]:
    llm.reply = lambda messages: f"{messages[-1]['content'].splitlines()[0]}\nCOMPLETION_STATUS: COMPLETE"
    setup = Lab(address, run_id("restart-q"))
    yield setup
    for proc in setup.workers:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture
async def no_leftover_runs(lab, client: Client):
    """A run a failed test leaves waiting would slow every later `pending` of the session."""
    yield
    for rid in lab.runs:
        handle = client.get_workflow_handle(rid)
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            await handle.terminate("test over")


pytestmark = pytest.mark.usefixtures("no_leftover_runs")


async def _waiting_run(cli, client: Client, lab: Lab, folder: Path) -> tuple[str, subprocess.Popen]:
    """A run waiting at its gate, and the worker that holds it."""
    first = lab.worker()
    rid = lab.start(cli, folder)
    await open_gate(client.get_workflow_handle(rid), "colour")
    return rid, first


async def _accepted_updates(client: Client, rid: str) -> int:
    events = [e async for e in client.get_workflow_handle(rid).fetch_history_events()]
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in events)


def _painted(llm) -> list[str]:
    """What the agent after the gate was asked, one entry per prompt."""
    return [prompt.splitlines()[0] for prompt in llm.prompts_for("painter")]


def _finished(cli, rid: str) -> Result:
    watched = cli("watch", rid)
    assert watched.code == 0, watched.out + watched.err
    return watched


async def test_an_answer_right_after_a_worker_restart_continues_the_run_once(cli, client, lab, llm, tmp_path):
    rid, first = await _waiting_run(cli, client, lab, tmp_path)
    sigkill(first)
    lab.worker()
    time.sleep(0.5)
    answered = cli("answer", rid, "--gate", "colour", "red")
    assert answered.code == 0, answered.err
    assert answered.out.strip() == "gate colour answered: red"
    _finished(cli, rid)
    assert _painted(llm) == ["Paint it red."]
    assert await _accepted_updates(client, rid) == 1


async def test_an_answer_waits_for_a_worker_or_gives_up_recording_nothing(cli, cli_process, client, lab, llm, tmp_path):
    rid, first = await _waiting_run(cli, client, lab, tmp_path)
    sigkill(first)

    given_up = cli("answer", rid, "--gate", "colour", "blue", "--wait", "2")
    assert given_up.code == 3 and given_up.out == ""
    assert given_up.err.splitlines() == [
        WAITING,
        f"error: no worker took the answer for run {rid} within 2s: nothing was recorded",
        f"  hint: start a worker with `python -m worker --task-queue {lab.queue}` and send it again, "
        "or add --no-wait to queue it for the next worker",
    ]

    waiting = cli_process("answer", rid, "--gate", "colour", "red", "--comment", "at last")
    assert waiting.stderr.readline().strip() == WAITING
    lab.worker()
    out, err = waiting.communicate(timeout=90)
    assert waiting.returncode == 0, err
    assert out.strip() == "gate colour answered: red"
    # Had the answer given up on been kept anywhere, the worker would have taken it first.
    _finished(cli, rid)
    assert _painted(llm) == ["Paint it red."]
    final = json.loads(cli("status", rid, "--json").out)
    assert final["gates"]["colour"]["answer"]["comment"] == "at last"
    assert await _accepted_updates(client, rid) == 1


async def test_no_wait_queues_the_answer_and_the_run_checks_it(cli, client, lab, llm, tmp_path):
    rid, first = await _waiting_run(cli, client, lab, tmp_path)
    handle = client.get_workflow_handle(rid)
    refusal = (
        "queued answer to gate 'colour' refused: 'green' is not an answer to gate 'colour': choose one of red, blue"
    )

    wrong = cli("answer", rid, "--gate", "colour", "green", "--no-wait")
    assert wrong.code == 0, wrong.err
    assert wrong.out.startswith("answer 'green' to gate colour queued: the run checks it when a worker takes it")
    await _until_refused(handle)
    pending = cli("pending")
    assert f"warning: run {rid}: {refusal}" in pending.err.splitlines()
    assert any(rid in line and "colour" in line for line in pending.out.splitlines())
    assert f"  ! {refusal}" in cli("status", rid).out.splitlines()

    sigkill(first)
    queued = cli("answer", rid, "--gate", "colour", "red", "--no-wait")
    assert queued.code == 0 and "queued" in queued.out, queued.err
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    lab.worker()
    watched = _finished(cli, rid)
    assert _painted(llm) == ["Paint it red."]
    assert f"  ! {refusal}" in watched.out
    final = json.loads(cli("status", rid, "--json").out)
    assert final["warnings"] == [refusal] and final["human"] == {"colour": "red"}
    assert await _accepted_updates(client, rid) == 0


async def _until_refused(handle: WorkflowHandle) -> None:
    """Until the worker has taken the queued answer and refused it."""
    for _ in range(300):
        if (await state_of(handle)).queued_refusals:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the queued answer was never checked")


async def test_pending_and_status_right_after_a_worker_restart_show_the_run(
    cli, cli_process, client, lab, llm, tmp_path
):
    rid, first = await _waiting_run(cli, client, lab, tmp_path)
    sigkill(first)
    lab.worker()
    status, pending = cli_process("status", rid), cli_process("pending", "--json")
    status_out, status_err = status.communicate(timeout=90)
    pending_out, pending_err = pending.communicate(timeout=90)
    assert status.returncode == 0 and pending.returncode == 0, status_err + pending_err
    assert status_out.startswith(f"{rid}: WAITING for human_approval")
    assert "? colour: Which colour? [red/blue]" in status_out
    assert rid not in pending_err
    assert [row["gate"] for row in json.loads(pending_out) if row["run_id"] == rid] == ["colour"]
    assert cli("answer", rid, "--gate", "colour", "blue").code == 0
    _finished(cli, rid)
    assert _painted(llm) == ["Paint it blue."]
