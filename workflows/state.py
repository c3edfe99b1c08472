"""RunState: what a run has done so far, exposed by query and stored in the memo at the end."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from spec.calls import Usage

TaskStatus = Literal["pending", "running", "completed", "failed", "skipped", "cancelled"]
RunStatus = Literal["pending", "running", "completed", "failed", "cancelled"]

# The memo and query carry outputs; keep each one well under Temporal's payload limits.
MAX_OUTPUT_CHARS = 64_000


class TaskState(BaseModel):
    id: str
    title: str = ""
    kind: str = "task"
    agent: str = ""
    status: TaskStatus = "pending"
    attempts: int = 0
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
    final_output: str = ""
    warnings: list[str] = []
    errors: list[str] = []
    usage: Usage = Usage()

    def begin(self, task_id: str, now: datetime) -> TaskState:
        task = self.tasks[task_id]
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
