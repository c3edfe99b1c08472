"""People in the loop as a user meets them: `pending`, `answer`, `approve`, `reject`, `budget`,
`cancel --rollback`, following a run that asks questions, and what the report says afterwards.

The CLI runs against the session's Temporal dev server; the runs' agents are the fake OpenAI server,
served by a real worker process on a queue of the test's own.
"""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType

from agentrun.cli.follow import _Printer
from agentrun.explain import report
from agentrun.ids import GateId
from agentrun.lang.ir import Budget
from agentrun.models.calls import Usage
from agentrun.models.contract import (
    Answer,
    CompensationEntry,
    CompensationResult,
    Gate,
    ModelUsage,
    RunState,
    RunStatus,
    TaintMark,
    TaskState,
)
from tests.conftest import run_id, start_worker, until, wait_for, write_spec
from tests.specs import SHED

T0 = datetime(2026, 11, 21, 9, 30, 0, tzinfo=UTC)
T1 = datetime(2026, 11, 21, 9, 41, 5, tzinfo=UTC)


# ---- the report, from a state built by hand --------------------------------------------------------


def _state(status: RunStatus, **fields) -> RunState:
    tasks = {
        "build": TaskState(id="build", agent="coder", status="completed", attempts=1, duration_s=2.0),
        "deploy": TaskState(id="deploy", agent="coder", status="failed", attempts=1, duration_s=1.0, error="it broke"),
    }
    return RunState(run_id="r-1", spec="ship", status=status, tasks=tasks, **fields)


def test_report_verdicts_for_rolled_back_and_cancelled_runs():
    assert report.verdict(_state("compensated")) == "ROLLED BACK"
    assert report.verdict(_state("cancelled")) == "CANCELLED"
    assert "- Status: ROLLED BACK" in report.to_markdown(_state("compensated"))
    # A failed run is FAILED, as `status` and `list` say; the report says what it did finish.
    assert report.verdict(_state("failed")) == "FAILED"
    assert "- Status: FAILED (partial: 1 of 2 steps completed)" in report.to_markdown(_state("failed"))


def test_report_lists_human_input_compensations_and_taint_after_the_existing_sections():
    gates = {
        "deploy": Gate(
            id=GateId("deploy"),
            kind="approval",
            prompt="Ship | it?",
            choices=["approve", "reject"],
            status="answered",
            opened_at=T0,
            answer=Answer(value="reject", comment="not on a Friday", by="ada", at=T1),
        ),
        "colour": Gate(
            id=GateId("colour"),
            prompt="Which colour?\nPick one.",
            choices=["red", "blue"],
            status="timed_out",
            opened_at=T0,
            answer=Answer(value="red", at=T1, timed_out=True),
        ),
    }
    state = _state(
        "failed",
        gates=gates,
        compensations=[
            CompensationResult(action_id="deploy", status="completed"),
            CompensationResult(action_id="build", status="failed", error="disk full"),
        ],
        compensation_stack=[
            CompensationEntry(action_id="fetch", compensation_action={"type": "agent"}),
            CompensationEntry(action_id="setup", compensation_action={"type": "agent"}),
        ],
        taint={
            "page": TaintMark(source="provider:http"),
            "summary": TaintMark(source="provider:http", derived_from=["page"]),
        },
    )
    text = report.to_markdown(state)
    order = [
        text.index(h)
        for h in (
            "## Execution Summary",
            "## Step-by-Step Results",
            "## Final Output",
            "## Issues and Warnings",
            "## Human Input",
            "## Compensations",
            "## Tainted Data",
        )
    ]
    assert order == sorted(order)
    assert "| deploy | Ship \\| it? | reject | not on a Friday | ada | 2026-11-21 09:41:05 UTC |" in text
    assert "| colour | Which colour? Pick one. | timed out: red |  |  | 2026-11-21 09:41:05 UTC |" in text
    assert "1. deploy: COMPLETED\n2. build: FAILED: disk full\n" in text
    assert "- Still on the stack (not run), next first: setup, fetch" in text
    assert "| page | provider:http |  |" in text and "| summary | provider:http | page |" in text
    assert "## Tainted Data\n\nValues that came from outside the run" in text, "the table says what it is"


def test_report_summary_shows_cost_per_model_tokens_and_budget_only_when_there_are_any():
    plain = report.to_markdown(_state("completed"))
    for absent in (
        "- Cost:",
        "- Tokens by model:",
        "- Budget:",
        "## Human Input",
        "## Compensations",
        "## Tainted Data",
    ):
        assert absent not in plain
    state = _state(
        "completed",
        total_cost_usd=0.0123,
        total_tokens_used=900,
        usage=Usage(input_tokens=600, output_tokens=300),
        budget=Budget(tokens=1000, usd=0.5, on_exceeded="pause"),
        usage_by_model={
            "gpt-a": ModelUsage(input_tokens=500, output_tokens=200, cost_usd=0.01),
            "gpt-b": ModelUsage(input_tokens=100, output_tokens=100, cost_usd=0.0023),
        },
    )
    text = report.to_markdown(state)
    summary = text.split("## Step-by-Step Results")[0]
    assert "- Tokens: 600 in, 300 out\n- Cost: $0.0123\n" in summary
    assert "- Tokens by model: gpt-a 500 in, 200 out ($0.01); gpt-b 100 in, 100 out ($0.0023)" in summary
    assert "- Budget: 1000 tokens, $0.5 (on exceeded: pause); used 900 tokens, $0.0123" in summary
    prompts_only = _state("completed", iteration_count=4, budget=Budget(iterations=10))
    assert "- Budget: 10 prompts (on exceeded: fail); used 0 tokens, $0, 4 prompts" in report.to_markdown(prompts_only)
    one_model = _state("completed", usage_by_model={"gpt-a": ModelUsage(input_tokens=5)})
    assert "Tokens by model" not in report.to_markdown(one_model)
    assert json.loads(report.to_json(state))["summary"]["cost_usd"] == 0.0123


def test_follow_prints_gate_and_compensation_events_once():
    out = io.StringIO()
    printer = _Printer(Console(file=out, width=300), "r-9")
    gate = Gate(id=GateId("deploy"), kind="approval", prompt="Ship it?", opened_at=T0)
    question = Gate(id=GateId("colour"), prompt="Which colour?", choices=["red", "blue"], opened_at=T0)
    state = RunState(run_id="r-9", status="waiting", gates={"deploy": gate, "colour": question})
    printer.show(state)
    printer.show(state)
    gate.status, gate.answer = "answered", Answer(value="approve", by="ada", comment="go", at=T1)
    question.status, question.answer = "timed_out", Answer(value=None, at=T1, timed_out=True)
    state.compensations = [
        CompensationResult(action_id="build", status="completed"),
        CompensationResult(action_id="fetch", status="failed", error="gone"),
    ]
    printer.show(state)
    printer.show(state)
    assert out.getvalue().splitlines() == [
        "? deploy: Ship it? [approve/reject] — answer with: python -m client approve r-9 --gate deploy (or reject)",
        "? colour: Which colour? [red/blue] — answer with: python -m client answer r-9 --gate colour VALUE",
        "✓ gate deploy answered: approve by ada (go)",
        "  ! gate colour timed out",
        "↶ build compensated",
        "✗ compensation of fetch failed: gone",
    ]


# ---- the CLI against real runs ---------------------------------------------------------------------


DONE = "done\nCOMPLETION_STATUS: COMPLETE"


@pytest.fixture
def served(llm, address):
    """A worker process on a queue of the test's own; its agents talk to the llm server."""
    llm.reply = lambda messages: f"{messages[-1]['content'].splitlines()[0]} — {DONE}"
    queue = run_id("humans-q")
    proc = start_worker(address, "--task-queue", queue)
    yield queue
    proc.terminate()
    proc.wait(timeout=30)


def _start(cli, tmp_path, queue: str, text: str = SHED, prefix: str = "shed") -> str:
    rid = run_id(prefix)
    result = cli(
        "start",
        str(write_spec(tmp_path, text)),
        "--agent",
        "openai:worker",
        "--id",
        rid,
        "--task-queue",
        queue,
        "--detach",
    )
    assert result.code == 0, result.err
    return rid


def _rows(cli, rid: str) -> list[dict]:
    result = cli("pending", "--json")
    assert result.code == 0, result.err
    return [row for row in json.loads(result.out) if row["run_id"] == rid]


def _wait_gate(cli, rid: str, gate: str) -> dict:
    """The pending row of gate `gate` of run `rid`, once visibility and the run both show it."""
    found: list[dict] = []
    wait_for(lambda: bool(found.extend(r for r in _rows(cli, rid) if r["gate"] == gate) or found), timeout_s=60)
    return found[0]


async def _accepted_updates(client, rid: str) -> int:
    events = [e async for e in client.get_workflow_handle(rid).fetch_history_events()]
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in events)


async def test_pending_answer_and_approve_as_a_user_meets_them(cli, client, served, llm, tmp_path):
    rid = _start(cli, tmp_path, served)
    row = _wait_gate(cli, rid, "colour")
    assert row["kind"] == "question" and row["prompt"] == "Which colour for the shed?"
    assert row["choices"] == ["red", "blue"] and row["waiting_since"] and row["timeout_at"] is None
    table = cli("pending").out
    line = next(line for line in table.splitlines() if rid in line)
    assert "colour" in line and "question" in line and "Which colour for the shed?" in line and "red/blue" in line
    status = cli("status", rid)
    assert f"{rid}: WAITING for human_approval" in status.out
    assert (
        "? colour: Which colour for the shed? [red/blue] — answer with: python -m client answer "
        f"{rid} --gate colour VALUE" in status.out
    )

    wrong = cli("answer", rid, "--gate", "colour", "green")
    assert wrong.code == 2 and wrong.out == ""
    assert wrong.err.strip() == "error: 'green' is not an answer to gate 'colour': choose one of red, blue"
    unknown = cli("answer", rid, "--gate", "colur", "red")
    assert unknown.code == 2 and "has no open gate 'colur' (open: colour)" in unknown.err
    not_approval = cli("approve", rid)
    assert not_approval.code == 2 and "gate 'colour' is a question, not an approval" in not_approval.err
    assert await _accepted_updates(client, rid) == 0  # refusals leave nothing in history
    assert llm.prompts_for("worker") == []

    answered = cli("answer", rid, "--gate", "colour", "red", "--comment", "matches the house")
    assert answered.code == 0 and answered.out.strip() == "gate colour answered: red"
    _wait_gate(cli, rid, "ship")
    again = cli("answer", rid, "--gate", "colour", "blue")
    assert again.code == 2 and "error: gate 'colour' was already answered (red)" in again.err

    approved = cli("approve", rid, "--comment", "looks good")  # the one open gate
    assert approved.code == 0 and approved.out.strip() == "gate ship answered: approve"
    watched = cli("watch", rid)
    assert watched.code == 0, watched.out + watched.err
    assert [p.splitlines()[0] for p in llm.prompts_for("worker")] == ["Paint the shed red.", "Ship the shed."]
    assert await _accepted_updates(client, rid) == 2
    text = watched.out
    assert "- Status: COMPLETE" in text and "## Human Input" in text
    assert "| colour | Which colour for the shed? | red | matches the house |" in text
    assert "| ship | Approve 'ship'? | approve | looks good |" in text
    ended = cli("approve", rid, "--gate", "ship")
    assert ended.code == 2 and f"run {rid} has ended (completed)" in ended.err
    assert cli("answer", "no-such-run", "--gate", "x", "y").code == 2
    cancelled = cli("cancel", rid)
    assert (cancelled.code, cancelled.out) == (2, "")
    assert cancelled.err == f"error: run {rid} has ended (completed); there is nothing left to answer or cancel\n"


def test_reject_ends_the_run_and_undoes_what_was_done(cli, served, llm, tmp_path):
    rid = _start(cli, tmp_path, served)
    _wait_gate(cli, rid, "colour")
    assert cli("answer", rid, "--gate", "colour", "blue").code == 0
    _wait_gate(cli, rid, "ship")
    rejected = cli("reject", rid, "--gate", "ship", "--comment", "not today")
    assert rejected.code == 0 and rejected.out.strip() == "gate ship answered: reject"
    watched = cli("watch", rid)
    assert watched.code == 1
    prompts = llm.prompts_for("worker")
    assert prompts[0].startswith("Paint the shed blue.") and "Ship the shed." not in "".join(prompts)
    assert prompts[1].startswith("Strip the paint. You reported: Paint the shed blue.")
    text = watched.out
    assert "- Status: ROLLED BACK" in text
    assert "| ship | Approve 'ship'? | reject | not today |" in text
    assert "## Compensations\n\n1. paint: COMPLETED" in text
    assert "↶ paint compensated" in text
    data = json.loads(cli("status", rid, "--json").out)
    assert data["status"] == "compensated" and data["gates"]["ship"]["answer"]["value"] == "reject"
    assert data["compensations"] == [{"action_id": "paint", "status": "completed", "error": ""}]


def test_cancel_with_rollback_runs_the_compensations_of_a_waiting_run(cli, served, llm, tmp_path):
    rid = _start(cli, tmp_path, served)
    _wait_gate(cli, rid, "colour")
    assert cli("answer", rid, "--gate", "colour", "red").code == 0
    _wait_gate(cli, rid, "ship")
    cancelled = cli("cancel", rid, "--rollback")
    assert cancelled.code == 0, cancelled.err
    assert cancelled.out.splitlines() == [
        f"rollback requested for {rid}: 1 compensation(s) queued, run as it is cancelled",
        f"cancellation requested for {rid}",
    ]
    watched = cli("watch", rid)
    assert watched.code == 1
    assert llm.prompts_for("worker")[-1].startswith("Strip the paint. You reported: Paint the shed red.")
    assert "- Status: CANCELLED" in watched.out and "1. paint: COMPLETED" in watched.out
    assert json.loads(cli("status", rid, "--json").out)["status"] == "cancelled"
    assert rid not in {row["run_id"] for row in json.loads(cli("pending", "--json").out)}


async def test_watch_answers_inline_through_the_prompter(cli, client, served, llm, tmp_path):
    from agentrun.cli.starting import watch
    from agentrun.client.engine import Engine

    rid = _start(cli, tmp_path, served)
    asked: list[str] = []

    def prompter(gate) -> str:
        asked.append(gate.id)
        if gate.id == "colour":
            return "blue"
        # Someone else approves first; the answer typed here is then refused.
        assert cli("approve", rid, "--gate", "ship", "--comment", "from elsewhere").code == 0
        return "reject"

    out = io.StringIO()
    # The run must not end before the answer typed here is refused (under load it could, and the
    # refusal would then read "the run has ended"): the last prompt waits for the refusal.
    shipping = llm.hold_prompt("Ship the shed.")

    async def ship_once_refused() -> None:
        await until(lambda: "already answered" in out.getvalue(), timeout_s=120)
        shipping.set()

    releasing = asyncio.ensure_future(ship_once_refused())
    code = await watch(Engine(client), rid, Console(file=out, width=300, highlight=False), prompter)
    await releasing
    text = out.getvalue()
    assert code == 0, text
    assert asked == ["colour", "ship"]
    assert "? colour: Which colour for the shed? [red/blue]" in text and "✓ gate colour answered: blue" in text
    assert "error: gate 'ship' was already answered (approve)" in text
    assert "✓ gate ship answered: approve" in text and "(from elsewhere)" in text
    assert [p.splitlines()[0] for p in llm.prompts_for("worker")] == ["Paint the shed blue.", "Ship the shed."]
    assert "- Status: COMPLETE" in text


BUDGET = """\
name: thrift
budget: {tokens: 30, on_exceeded: pause}
subtasks:
  one: {instructions: "Write the first part."}
  two: {instructions: "Write the second part."}
"""


def test_a_paused_budget_is_raised_with_the_budget_command(cli, served, llm, tmp_path):
    llm.reply = lambda messages: " ".join(["word"] * 40) + "\n" + DONE
    rid = _start(cli, tmp_path, served, BUDGET, "thrift")
    row = _wait_gate(cli, rid, "budget")
    assert row["kind"] == "budget" and "30" in row["prompt"]
    assert json.loads(cli("status", rid, "--json").out)["waiting_for"] == "resource_limit"
    assert len(llm.requests) == 1
    low = cli("budget", rid, "--tokens", "10")
    assert low.code == 2 and "is not above the" in low.err and "already used" in low.err
    nothing = cli("budget", rid)
    assert nothing.code == 2 and "say how far to raise the budget" in nothing.err
    raised = cli("budget", rid, "--tokens", "100000", "--comment", "worth it")
    assert raised.code == 0 and raised.out.strip() == "budget budget raised to 100000 tokens"
    watched = cli("watch", rid)
    assert watched.code == 0, watched.out
    assert len(llm.requests) == 2
    assert "- Budget: 100000 tokens (on exceeded: pause); used" in watched.out


PICK = """\
workflow:
  name: pick
  agents:
    writer: {prompt: "Write about {{human.topic}}."}
  steps:
    - id: topic
      type: human
      prompt: Which topic?
      choices: [tea, coffee]
    - id: write
      agent: writer
      approval: true
"""


def test_a_pipeline_asks_with_a_human_step_and_an_approval(cli, served, llm, tmp_path):
    rid = run_id("pick")
    started = cli(
        "start",
        str(write_spec(tmp_path, PICK)),
        "--agent",
        "writer=openai:writer",
        "--id",
        rid,
        "--task-queue",
        served,
        "--detach",
    )
    assert started.code == 0, started.err
    assert _wait_gate(cli, rid, "topic")["choices"] == ["tea", "coffee"]
    assert cli("answer", rid, "--gate", "topic", "tea").code == 0
    assert _wait_gate(cli, rid, "write")["kind"] == "approval"
    assert llm.requests == []  # the approval comes before the step's prompt
    assert cli("approve", rid).out.strip() == "gate write answered: approve"
    watched = cli("watch", rid)
    assert watched.code == 0, watched.out
    assert llm.prompts_for("writer")[0].startswith("Write about tea.")
    assert "| topic | Which topic? | tea |" in watched.out and "| write | Approve 'write'? | approve |" in watched.out


def test_report_money_keeps_the_digits_of_tiny_sums():
    text = report.to_markdown(_state("completed", total_cost_usd=0.000008))
    assert "- Cost: $0.000008\n" in text


def test_prices_in_agentrun_yaml_cost_the_run_and_a_usd_budget_stops_it(cli, served, llm, tmp_path):
    llm.reply = lambda messages: " ".join(["word"] * 40) + "\n" + DONE
    (tmp_path / "agentrun.yaml").write_text("prices:\n  worker: {input: 1000, output: 1000}\n")
    spec = BUDGET.replace("budget: {tokens: 30, on_exceeded: pause}", "budget: {usd: 0.01}")
    rid = _start(cli, tmp_path, served, spec, "thrift")
    watched = cli("watch", rid)
    assert watched.code == 1 and len(llm.requests) == 1
    spent = json.loads(cli("status", rid, "--json").out)
    assert spent["total_cost_usd"] == pytest.approx(spent["total_tokens_used"] * 1000 / 1e6)
    assert f"two: budget exceeded: ${spent['total_cost_usd']:g} spent, over the budget of $0.01" in watched.out


def test_a_bad_price_table_is_one_error_naming_its_file(cli, tmp_path):
    (tmp_path / "agentrun.yaml").write_text("prices:\n  worker: {input: cheap}\n")
    result = cli("start", str(write_spec(tmp_path, BUDGET)), "--agent", "openai:worker", "--detach")
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"{tmp_path / 'agentrun.yaml'}:1:1: error: 'prices' in agentrun.yaml: ")
    assert "hint: prices:" in result.err
