"""What `diff RUN_A RUN_B` compares: the steps whose output, status or cost differ between two runs
(a run and its fork, two runs of one spec)."""

from __future__ import annotations

import json
from typing import NamedTuple

from agentrun.lang.render import clip
from agentrun.models.contract import RunState, TaskState, dollars

SHOWN_CHARS = 60


class Difference(NamedTuple):
    step: str
    what: str  # output, status or cost
    a: str
    b: str


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
