"""What people send a run is capped everywhere they can send it: the CLI, the MCP server, the run's
own updates and queued signals (the page's routes are in test_ui_guard.py). Each case is judged by
what the run kept: its notes, its gates, the bytes stored for it. And a note is stored once: sending
one does not make the worker store the run's whole (growing) state again."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from temporalio.client import WorkflowUpdateFailedError

from agentrun.ids import GateId
from agentrun.models import contract, limits
from agentrun.models.contract import AnswerInput, BudgetInput, NoteInput
from tests.conftest import ROOT, run_id, start_worker, wait_for, write_spec
from tests.runs import open_gate, start_spec, state_of
from tests.specs import SHED


@pytest.fixture
def shed(tmp_path) -> Path:
    return write_spec(tmp_path, SHED, "shed.yaml")


@pytest.mark.usefixtures("worker")
async def test_the_runs_own_updates_refuse_what_is_too_large_and_too_many(client, shed):
    """A client that skips the checks (any Temporal client can send updates) meets the run's own."""
    handle = await start_spec(client, shed, "openai:worker")
    await open_gate(handle, "colour")
    huge = [
        (contract.SAY, NoteInput(text="x" * 1_000_000, by="mallory")),
        (contract.SAY, NoteInput(text="ok", by="m" * (limits.BY_CHARS + 1))),
        (contract.ANSWER, AnswerInput(gate=GateId("colour"), value="red", comment="c" * (limits.COMMENT_CHARS + 1))),
    ]
    for update, given in huge:
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(update, given)
    state = await state_of(handle)
    assert state.notes == [] and state.gates["colour"].status == "open"

    for n in range(limits.UNDELIVERED_NOTES):
        await handle.execute_update(contract.SAY, NoteInput(text=f"note {n}", by="ana"))
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(contract.SAY, NoteInput(text="one too many", by="ana"))
    assert len((await state_of(handle)).notes) == limits.UNDELIVERED_NOTES
    await handle.terminate("test over")


@pytest.mark.usefixtures("worker")
async def test_a_queued_answer_too_large_is_kept_as_a_refusal_not_taken(client, shed):
    handle = await start_spec(client, shed, "openai:worker")
    await open_gate(handle, "colour")
    await handle.signal(
        contract.QUEUE_ANSWER, AnswerInput(gate=GateId("colour"), value="red", comment="c" * 3_000, by="mallory")
    )
    await handle.signal(contract.QUEUE_ANSWER, AnswerInput(gate=GateId("colour"), value="blue", by="ana"))
    state = await state_of(handle)
    for _ in range(100):
        state = await state_of(handle)
        if state.gates["colour"].status != "open":
            break
        await asyncio.sleep(0.05)
    assert state.gates["colour"].answer is not None and state.gates["colour"].answer.value == "blue"
    assert any("2,000" in refusal.message for refusal in state.queued_refusals)
    await handle.terminate("test over")


def test_budget_raises_beyond_reason_are_refused():
    assert limits.budget_refusal(BudgetInput(usd=float("nan")))
    assert limits.budget_refusal(BudgetInput(usd=float("inf")))
    assert limits.budget_refusal(BudgetInput(tokens=10**13))
    assert limits.budget_refusal(BudgetInput(iterations=10**7))
    assert limits.budget_refusal(BudgetInput(tokens=1_000, usd=5.0, iterations=50)) is None


@pytest.mark.usefixtures("worker_process")
def test_say_on_the_command_line_refuses_a_note_too_long(cli, shed):
    rid = run_id("shed")
    assert cli("start", str(shed), "--agent", "openai:worker", "--id", rid, "--detach").code == 0
    wait_for(lambda: "colour" in json.loads(cli("status", rid, "--json").out).get("gates", {}), poll_s=0.3)
    said = cli("say", rid, "n" * (limits.NOTE_CHARS + 1), "--as", "ana")
    assert said.code == 2 and "at most 8,000" in said.err
    assert json.loads(cli("status", rid, "--json").out)["notes"] == []
    assert cli("say", rid, "Use oil paint.", "--as", "ana").code == 0
    assert cli("cancel", rid).code == 0


@pytest.mark.usefixtures("worker_process")
async def test_the_mcp_say_tool_is_capped_and_marks_its_notes(client, address, shed, tmp_path):
    handle = await start_spec(client, shed, "openai:worker")
    handle = client.get_workflow_handle(handle.id)
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "agentrun.client", "mcp", "--no-worker"], env=environ, cwd=str(tmp_path)
    )
    async with Client(server) as session:
        big = await session.call_tool("say", {"run_id": handle.id, "text": "x" * 1_000_000, "by": "agent"})
        assert big.is_error
        small = await session.call_tool("say", {"run_id": handle.id, "text": "Use oil paint.", "by": "ana"})
        assert not small.is_error, small.content
    notes = (await state_of(handle)).notes
    assert [(n.text, n.by) for n in notes] == [("Use oil paint.", "ana via MCP")]
    await handle.terminate("test over")


def test_a_note_is_stored_once_not_with_the_whole_state_each_time(cli, address, blob_folder, shed):
    """A worker storing values of 2 KB and more outside history; ten notes of 1,500 characters each
    sent with `say` while nobody reads the run. Each used to make the worker store the run's state,
    which grows by each note: the sum of all those states."""
    queue = f"stored-{uuid.uuid4().hex[:6]}"
    worker = start_worker(address, "--task-queue", queue, env={"AGENTRUN_BLOB_THRESHOLD": "2048"})
    rid = run_id("shed")
    try:
        assert (
            cli("start", str(shed), "--agent", "openai:worker", "--id", rid, "--task-queue", queue, "--detach").code
            == 0
        )
        wait_for(lambda: "colour" in json.loads(cli("status", rid, "--json").out).get("gates", {}), poll_s=0.3)

        def stored() -> int:
            return sum(f.stat().st_size for f in blob_folder.rglob("*.payload") if rid in str(f))

        before = stored()
        assert before > 0, "the run's values are stored outside history, or this measures nothing"
        for n in range(10):
            said = cli("say", rid, f"{n}" + "n" * 1_499, "--as", "ana")
            assert said.code == 0, said.err
        grown = stored() - before
        print(f"stored for 10 notes of 1,500 characters: {grown:,} bytes")
        assert grown < 10 * 1_500, grown
        assert cli("cancel", rid).code == 0
    finally:
        worker.terminate()
        worker.wait(timeout=30)
