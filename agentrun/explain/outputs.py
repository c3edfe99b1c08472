"""Steps' outputs after the report: with `report --outputs` each one in full (a batched map's are in
its batches: `report --elements` pages through them); always, for a step whose output failed
validation, the reply that failed."""

from __future__ import annotations

import re

from agentrun.models.contract import RunState, TaskState
from agentrun.models.sizes import megabytes


def section(state: RunState, every: bool = True) -> str:
    """The section, or "" when it would be empty and not asked for."""
    lines = ["", "## Outputs" if every else "## Replies That Failed Validation"]
    batched = {m.row: m for m in state.maps.values()}
    for n, (key, task) in enumerate(state.tasks.items(), 1):
        output = state.outputs.get(key)
        if every and key in batched:
            m = batched[key]
            where = f"`agentrun report {state.run_id} --elements {m.key} --page N`"
            lines += ["", f"### {n}. {key}", "", f"{m.total} outputs, kept by the map's batches: {where}"]
            continue
        failed = task.status == "failed"
        if output is None or not (every or failed):
            continue
        lines += ["", f"### {n}. {key}" + (" (the reply that failed)" if failed else ""), "", *fenced(output)]
        lines += _cut(state.run_id, key, output, task)
    if len(lines) == 2:
        return "\n".join([*lines, "", "(no step has an output yet)"]) + "\n" if every else ""
    return "\n".join(lines) + "\n"


def _cut(run_id: str, key: str, output: str, task: TaskState) -> list[str]:
    """A note under an output the run kept only the beginning of (a large one goes whole to the
    next steps, but a run's state keeps MAX_OUTPUT_CHARS of it for reports)."""
    if task.output_size <= len(output.encode()):
        return []
    where = f"; `logs {run_id} --task {key}` shows it whole" if task.agent else ""
    return ["", f"(its first {len(output):,} characters of {megabytes(task.output_size)}{where})"]


def fenced(text: str) -> list[str]:
    """The text as a code block its own backticks cannot end."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text.rstrip("\n"), fence]
