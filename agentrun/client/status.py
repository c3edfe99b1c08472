"""`status RUN`: a run's state in a few lines, or as JSON."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from temporalio.client import Client

from agentrun.client import elements, humans, no_worker, report
from agentrun.client.runs import fetch_state
from agentrun.contract import RunState, dollars, open_gates, unsettled_refusals


async def status_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    paged = elements.wanted(args)  # a bad combination of options is refused before the run is read
    state = await fetch_state(client, args.run_id)
    if paged:
        page = await elements.page(client, state, args)
        if args.json:
            print(page.to_json())
        else:
            for line in elements.lines(page):
                console.print(line, markup=False)
        return 0
    if args.json:
        print(json.dumps(status_json(state), indent=2))
        return 0
    for line in lines(state):
        console.print(line, markup=False)
    return 0


def status_json(state: RunState) -> dict:
    data = state.model_dump(mode="json", exclude={"outputs", "final_output", "step_log"})
    data["tasks"] = report.tasks_json(state)
    return data


def lines(state: RunState) -> list[str]:
    """The run's line, then one per step, map, open gate, refusal and note, then what it spent."""
    waiting = f" for {state.waiting_for}" if state.status == "waiting" and state.waiting_for else ""
    running = f" (running {state.current_task})" if state.current_task else ""
    out = [f"{state.run_id}: {state.status}{waiting}{running}"]
    out += [f"  {line.removeprefix('- ')}" for line in report.forked(state)]
    for t in state.tasks.values():
        reused = f" reused from {t.reused_from}" if t.reused_from else ""
        worker = f" worker={t.worker}" if t.worker else ""
        out.append(
            f"  {t.id:<30} {t.status:<10} attempts={t.attempts} iterations={t.iterations} {t.duration_s:.1f}s"
            f"{reused}{worker}"
        )
    for m in state.maps.values():
        done = m.total - m.counts.get("pending", 0)
        out.append(
            f"  {m.row}: {done} of {m.total} elements done in {m.batches_done} of {m.batches} batches"
            f" ({', '.join(f'{n} {s}' for s, n in sorted(m.counts.items()))}); each one: --elements {m.key}"
        )
    for gate in open_gates(state):
        since = f" (since {gate.opened_at:%Y-%m-%d %H:%M:%S} UTC)" if gate.opened_at else ""
        out.append(f"  {humans.gate_line(state.run_id, gate)}{since}")
    out += [f"  ! {refusal.message}" for refusal in unsettled_refusals(state)]
    out += [f"  ! {note}" for note in no_worker.notes(state)]
    if state.total_tokens_used or state.total_cost_usd:
        out.append(f"  used {state.total_tokens_used} tokens, {dollars(state.total_cost_usd)}")
    return out
