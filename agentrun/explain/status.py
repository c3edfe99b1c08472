"""A run's state as `status RUN` prints it: a few lines, or JSON; the run's page shows the same."""

from __future__ import annotations

from typing import Any

from agentrun.explain import gates, report, tool_uses, waiting
from agentrun.models import run_words
from agentrun.models.calls import Partial
from agentrun.models.contract import RunState, dollars, open_gates, unsettled_refusals

SO_FAR_CHARS = 60  # of a running step's reply, on its line


def status_json(state: RunState, so_far: dict[str, Partial] | None = None) -> dict[str, Any]:
    """The state; each running step with `partial`, its agent's reply so far (null before any)."""
    data = state.model_dump(mode="json", exclude={"outputs", "final_output", "step_log"})
    data["tasks"] = report.tasks_json(state)
    for task in data["tasks"]:
        if task["status"] == "running":
            record = (so_far or {}).get(task["id"])
            task["partial"] = record.model_dump(mode="json") if record else None
    return data


def lines(state: RunState, so_far: dict[str, Partial] | None = None) -> list[str]:
    """The run's line, then one per step (and what a running one has written so far), then `notes`."""
    waiting = f" for {state.waiting_for}" if state.status == "waiting" and state.waiting_for else ""
    running = f" (running {state.current_task})" if state.current_task else ""
    out = [f"{state.run_id}: {run_words.word(state.status)}{waiting}{running}"]
    out += [f"  {line.removeprefix('- ')}" for line in report.forked(state)]
    for t in state.tasks.values():
        reused = f" reused from {t.reused_from}" if t.reused_from else ""
        worker = f" worker={t.worker}" if t.worker else ""
        out.append(
            f"  {t.id:<30} {t.status:<10} attempts={t.attempts_made} iterations={t.iterations} {t.duration_s:.1f}s"
            f"{reused}{worker}"
        )
        uses = state.tool_calls.get(t.id)
        if uses:
            out.append(f"    {tool_uses.counts(uses)}; last: {tool_uses.line(uses[-1])}")
        record = (so_far or {}).get(t.id)
        if record is not None and t.status == "running":
            out.append(f"    {so_far_line(record)}")
    return out + notes(state)


def notes(state: RunState) -> list[str]:
    """What `status` says after the steps: each map's progress, open gate, refusal and note, then
    what the run spent."""
    out = []
    for m in state.maps.values():
        done = m.total - m.counts.get("pending", 0)
        out.append(
            f"  {m.row}: {done} of {m.total} elements done in {m.batches_done} of {m.batches} batches"
            f" ({', '.join(f'{n} {s}' for s, n in sorted(m.counts.items()))}); each one: --elements {m.key}"
        )
    for gate in open_gates(state):
        since = f" (since {gate.opened_at:%Y-%m-%d %H:%M:%S} UTC)" if gate.opened_at else ""
        out.append(f"  {gates.gate_line(state.run_id, gate)}{since}")
    out += [f"  ! {refusal.message}" for refusal in unsettled_refusals(state)]
    out += [f"  ! {note}" for note in waiting.notes(state)]
    out += [
        f"  note {n.n} from {n.sender} waits for {n.step or 'the next prompt'}: {n.text}"
        for n in state.notes
        if not n.delivered_to
    ]
    if state.total_tokens_used or state.total_cost_usd:
        out.append(f"  used {state.total_tokens_used} tokens, {dollars(state.total_cost_usd)}")
    return out


def so_far_line(record: Partial) -> str:
    """`writing: 1234 characters, 310 tokens in 42s, quiet 3s: "…the end of the reply so far"`."""
    end = " ".join(record.tail.split())[-SO_FAR_CHARS:]
    said = f': "…{end}"' if end else ""
    return (
        f"{record.status}: {record.chars} characters, {record.tokens} tokens in {record.elapsed_s:.0f}s, "
        f"quiet {record.quiet_s:.0f}s{said}"
    )
