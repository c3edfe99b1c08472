"""`client diff RUN_A RUN_B`: the steps whose output, status or cost differ between two runs (a run
and its fork, two runs of one spec), a line per difference."""

from __future__ import annotations

import argparse
import json
from typing import NamedTuple

from rich.console import Console
from temporalio.client import Client

from agentrun.client.runs import fetch_state
from agentrun.lang.render import clip
from agentrun.models.contract import RunState, TaskState, dollars

SHOWN_CHARS = 60


class Difference(NamedTuple):
    step: str
    what: str  # output, status or cost
    a: str
    b: str


async def diff_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    a, b = await fetch_state(client, args.run_a), await fetch_state(client, args.run_b)
    found = differences(a, b)
    if args.json:
        print(json.dumps([d._asdict() for d in found], indent=2))
        return 0
    if not found:
        console.print(f"no step differs between {a.run_id} and {b.run_id}", markup=False, highlight=False)
        return 0
    steps = list(dict.fromkeys(d.step for d in found))
    console.print(f"{len(steps)} step(s) differ between {a.run_id} and {b.run_id}:", markup=False, highlight=False)
    width = max(len(d.step) for d in found)
    for d in found:
        console.print(f"  {d.step:<{width}}  {d.what:<6}  {d.a} → {d.b}", markup=False, highlight=False)
    return 0


def differences(a: RunState, b: RunState) -> list[Difference]:
    """Each step of either run, in the order the first one lists them, compared on what it gave
    (its output), how it ended and what it cost. A step one run took over from the other is the
    same work: its cost (nothing, in the fork) is not compared."""
    found = []
    for step in dict.fromkeys([*a.tasks, *b.tasks]):
        one, other = a.tasks.get(step, TaskState(id=step)), b.tasks.get(step, TaskState(id=step))
        if one.status != other.status:
            found.append(Difference(step, "status", one.status, other.status))
        if a.outputs.get(step) != b.outputs.get(step):
            found.append(Difference(step, "output", _shown(a.outputs.get(step)), _shown(b.outputs.get(step))))
        taken = other.reused_from == a.run_id or one.reused_from == b.run_id
        if not taken and _cost(one) != _cost(other):
            found.append(Difference(step, "cost", _cost(one), _cost(other)))
    return found


def _shown(output: str | None) -> str:
    if output is None:
        return "(none)"
    return json.dumps(clip(" ".join(output.split()), SHOWN_CHARS), ensure_ascii=False)


def _cost(task: TaskState) -> str:
    return f"{task.usage.input_tokens + task.usage.output_tokens} tokens, {dollars(task.cost_usd)}"
