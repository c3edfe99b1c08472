"""The execution report, in the layout of the pipeline seed's "Reporting" section."""

from __future__ import annotations

import json

from workflows.state import RunState, TaskState

_STEP_STATUS = {"completed": "SUCCESS", "failed": "FAILED", "skipped": "SKIPPED", "cancelled": "CANCELLED",
                "running": "RUNNING", "pending": "NOT RUN"}


def verdict(state: RunState) -> str:
    tasks = state.tasks.values()
    done = sum(t.status == "completed" for t in tasks)
    if state.status == "completed":
        # Failed rows in a finished run were recovered (fallback, selector); a skip left a null output.
        return "PARTIAL" if any(t.status == "skipped" for t in tasks) else "COMPLETE"
    if state.status in ("running", "pending"):
        return "RUNNING"
    if state.status == "timeout":
        return "PARTIAL"
    return "PARTIAL" if done else "FAILED"


def summary(state: RunState) -> dict:
    tasks = list(state.tasks.values())
    total = (state.ended_at - state.started_at).total_seconds() if state.ended_at and state.started_at else \
        sum(t.duration_s for t in tasks)
    return {
        "status": verdict(state),
        "run_status": state.status,
        "total_steps": len(tasks),
        "completed": sum(t.status == "completed" for t in tasks),
        "failed": sum(t.status == "failed" for t in tasks),
        "skipped": sum(t.status == "skipped" for t in tasks),
        "cancelled": sum(t.status == "cancelled" for t in tasks),
        "agents": len({t.agent for t in tasks if t.status != "pending" and t.kind == "task"}),
        "total_time_s": round(total, 3),
        "retries": sum(_retries(t) for t in tasks),
        "input_tokens": state.usage.input_tokens,
        "output_tokens": state.usage.output_tokens,
    }


def to_json(state: RunState) -> str:
    return json.dumps({"summary": summary(state), **state.model_dump(mode="json")}, indent=2)


def to_markdown(state: RunState) -> str:
    s = summary(state)
    lines = [
        f"# Workflow Execution Report: {state.spec}",
        "",
        "## Execution Summary",
        f"- Status: {s['status']}",
        f"- Total steps: {s['total_steps']}",
        f"- Steps completed: {s['completed']}",
        f"- Steps failed: {s['failed']}",
        f"- Steps skipped: {s['skipped']}",
        f"- Total agents deployed: {s['agents']}",
        f"- Total time: {_duration(s['total_time_s'])}",
        f"- Retries used: {s['retries']}",
    ]
    if s["input_tokens"] or s["output_tokens"]:
        lines.append(f"- Tokens: {s['input_tokens']} in, {s['output_tokens']} out")
    lines += ["", "## Step-by-Step Results", "",
              "| Step | Task | Agent | Status | Duration | Retries | Output Size |",
              "|---|---|---|---|---|---|---|"]
    for n, t in enumerate(state.tasks.values(), 1):
        lines.append(f"| {n} | {t.id} | {t.agent} | {_STEP_STATUS.get(t.status, t.status.upper())} | "
                     f"{_duration(t.duration_s)} | {_retries(t)} | {_size(t.output_size)} |")
    lines += ["", "## Final Output", "", state.final_output.strip() or "(none)", "", "## Issues and Warnings", ""]
    issues = [f"- ERROR {e}" for e in state.errors] + [f"- WARNING {w}" for w in state.warnings]
    lines += issues or ["- none"]
    return "\n".join(lines) + "\n"


def _retries(task: TaskState) -> int:
    return max(task.attempts - 1, 0) + task.retries


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m {secs}s"


def _size(size: int) -> str:
    return f"{size / 1024:.1f}KB" if size >= 1024 else f"{size}B"
