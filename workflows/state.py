"""RunState: what a run has done so far, exposed by query and stored in the memo at the end."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from spec.calls import Usage
from spec.render import to_text

TaskStatus = Literal["pending", "running", "completed", "failed", "skipped", "cancelled"]
RunStatus = Literal["pending", "running", "completed", "failed", "cancelled", "timeout"]

# The memo and query carry outputs; keep each one well under Temporal's payload limits.
MAX_OUTPUT_CHARS = 64_000


class TaskState(BaseModel):
    id: str
    title: str = ""
    kind: str = "task"
    agent: str = ""
    status: TaskStatus = "pending"
    attempts: int = 0
    retries: int = 0  # node-level re-runs after a failure (the spec's retry policy)
    iterations: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_s: float = 0.0
    output_size: int = 0
    error: str = ""
    usage: Usage = Usage()


class RunState(BaseModel):
    run_id: str = ""
    spec: str = ""
    dialect: str = ""
    status: RunStatus = "pending"
    current_task: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tasks: dict[str, TaskState] = {}
    outputs: dict[str, str] = {}
    # Pipeline values later templates read: steps.<id>.output / .outputs, and store_as names.
    steps: dict[str, dict[str, Any]] = {}
    memory: dict[str, Any] = {}
    final_output: str = ""
    warnings: list[str] = []
    errors: list[str] = []
    usage: Usage = Usage()

    def begin(self, task_id: str, now: datetime) -> TaskState:
        task = self.tasks.setdefault(task_id, TaskState(id=task_id))
        task.status, task.started_at, self.current_task = "running", now, task_id
        return task

    def finish(self, task_id: str, status: TaskStatus, now: datetime, output: str = "", error: str = "") -> None:
        task = self.tasks[task_id]
        task.status, task.ended_at, task.error = status, now, error
        task.duration_s = (now - task.started_at).total_seconds() if task.started_at else 0.0
        if status == "completed":
            task.output_size = len(output.encode())
            self.outputs[task_id] = output[:MAX_OUTPUT_CHARS]
            self.final_output = self.outputs[task_id]
        if error:
            self.errors.append(f"{task_id}: {error}")
        if self.current_task == task_id:
            self.current_task = None

    def add_usage(self, task_id: str, usage: Usage) -> None:
        for target in (self.tasks[task_id].usage, self.usage):
            target.input_tokens += usage.input_tokens
            target.output_tokens += usage.output_tokens

    def record_step(self, step_id: str, value: Any, store_as: str | None) -> None:
        self.steps[step_id] = {"output": value, "outputs": value if isinstance(value, dict) else {}}
        self.final_output = to_text(value)[:MAX_OUTPUT_CHARS] if value is not None else ""
        if store_as:
            self.memory[store_as] = value

    def expand(self, template_id: str, rows: list[TaskState]) -> None:
        """Put one row per map element where the map body's row was, keeping the report's order."""
        tasks = {}
        for key, task in self.tasks.items():
            if key == template_id:
                tasks.update({row.id: row for row in rows})
            else:
                tasks[key] = task
        self.tasks = tasks
