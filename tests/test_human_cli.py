"""People in the loop as a user meets them: `pending`, `answer`, `approve`, `reject`, `budget`,
`cancel --rollback`, following a run that asks questions, and what the report says afterwards.

The CLI runs against the session's Temporal dev server; the runs' agents are the fake OpenAI server,
served by a real worker process on a queue of the test's own.
"""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType

from client import report
from client.follow import _Printer
from spec.calls import Usage
from spec.ir import Budget
from tests.conftest import run_id, start_worker, until, wait_for, write_spec
from workflows.state import (Answer, CompensationEntry, CompensationResult, Gate, ModelUsage, RunState, TaintMark,
                             TaskState)

T0 = datetime(2026, 11, 21, 9, 30, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 11, 21, 9, 41, 5, tzinfo=timezone.utc)


# ---- the report, from a state built by hand --------------------------------------------------------

def _state(status: str, **fields) -> RunState:
    tasks = {"build": TaskState(id="build", agent="coder", status="completed", attempts=1, duration_s=2.0),
             "deploy": TaskState(id="deploy", agent="coder", status="failed", attempts=1, duration_s=1.0,
                                 error="it broke")}
    return RunState(run_id="r-1", spec="ship", status=status, tasks=tasks, **fields)


def test_report_verdicts_for_rolled_back_and_cancelled_runs():
    assert report.verdict(_state("compensated")) == "ROLLED BACK"
    assert report.verdict(_state("cancelled")) == "CANCELLED"
    assert "- Status: ROLLED BACK" in report.to_markdown(_state("compensated"))
    assert report.verdict(_state("failed")) == "PARTIAL"  # unchanged: a step completed before the failure


def test_report_lists_human_input_compensations_and_taint_after_the_existing_sections():
    gates = {
        "deploy": Gate(id="deploy", kind="approval", prompt="Ship | it?", choices=["approve", "reject"],
                       status="answered", opened_at=T0,
                       answer=Answer(value="reject", comment="not on a Friday", by="ada", at=T1)),
        "colour": Gate(id="colour", prompt="Which colour?\nPick one.", choices=["red", "blue"], status="timed_out",
                       opened_at=T0, answer=Answer(value="red", at=T1, timed_out=True)),
    }
    state = _state("failed", gates=gates,
                   compensations=[CompensationResult(action_id="deploy", status="completed"),
                                  CompensationResult(action_id="build", status="failed", error="disk full")],
                   compensation_stack=[CompensationEntry(action_id="fetch", compensation_action={"type": "agent"}),
                                       CompensationEntry(action_id="setup", compensation_action={"type": "agent"})],
                   taint={"page": TaintMark(source="provider:http"),
                          "summary": TaintMark(source="provider:http", derived_from=["page"])})
    text = report.to_markdown(state)
    order = [text.index(h) for h in ("## Execution Summary", "## Step-by-Step Results", "## Final Output",
                                      "## Issues and Warnings", "## Human Input", "## Compensations",
                                      "## Tainted Data")]
    assert order == sorted(order)
    assert "| deploy | Ship \\| it? | reject | not on a Friday | ada | 2026-11-21 09:41:05 UTC |" in text
    assert "| colour | Which colour? Pick one. | timed out: red |  |  | 2026-11-21 09:41:05 UTC |" in text
    assert "1. deploy: COMPLETED\n2. build: FAILED: disk full\n" in text
    assert "- Still on the stack (not run), next first: setup, fetch" in text
    assert "| page | provider:http |  |" in text and "| summary | provider:http | page |" in text


def test_report_summary_shows_cost_per_model_tokens_and_budget_only_when_there_are_any():
    plain = report.to_markdown(_state("completed"))
    for absent in ("- Cost:", "- Tokens by model:", "- Budget:", "## Human Input", "## Compensations",
                   "## Tainted Data"):
        assert absent not in plain
    state = _state("completed", total_cost_usd=0.0123, total_tokens_used=900, usage=Usage(input_tokens=600,
                                                                                            output_tokens=300),
                   budget=Budget(tokens=1000, usd=0.5, on_exceeded="pause"),
                   usage_by_model={"gpt-a": ModelUsage(input_tokens=500, output_tokens=200, cost_usd=0.01),
                                   "gpt-b": ModelUsage(input_tokens=100, output_tokens=100, cost_usd=0.0023)})
    text = report.to_markdown(state)
    summary = text.split("## Step-by-Step Results")[0]
    assert "- Tokens: 600 in, 300 out\n- Cost: $0.0123\n" in summary
    assert "- Tokens by model: gpt-a 500 in, 200 out ($0.0100); gpt-b 100 in, 100 out ($0.0023)" in summary
    assert "- Budget: 1000 tokens, $0.5 (on exceeded: pause); used 900 tokens, $0.0123" in summary
    one_model = _state("completed", usage_by_model={"gpt-a": ModelUsage(input_tokens=5)})
    assert "Tokens by model" not in report.to_markdown(one_model)
    assert json.loads(report.to_json(state))["summary"]["cost_usd"] == 0.0123


def test_follow_prints_gate_and_compensation_events_once():
    out = io.StringIO()
    printer = _Printer(Console(file=out, width=300), "r-9")
    gate = Gate(id="deploy", kind="approval", prompt="Ship it?", opened_at=T0)
    question = Gate(id="colour", prompt="Which colour?", choices=["red", "blue"], opened_at=T0)
    state = RunState(run_id="r-9", status="waiting", gates={"deploy": gate, "colour": question})
    printer.show(state)
    printer.show(state)
    gate.status, gate.answer = "answered", Answer(value="approve", by="ada", comment="go", at=T1)
    question.status, question.answer = "timed_out", Answer(value=None, at=T1, timed_out=True)
    state.compensations = [CompensationResult(action_id="build", status="completed"),
                           CompensationResult(action_id="fetch", status="failed", error="gone")]
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
