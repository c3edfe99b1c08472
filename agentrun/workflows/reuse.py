"""Steps a run records, and a fork takes over.

Every finished run of a step (an agent task, a provider call, a question to people) is recorded in
the run's `step_log` with the value it gave the nodes after it. A fork of that run is handed the
records of the steps before the one it goes on from: as the fork's walk reaches the same run of the
same step (its run key and round), the record stands in for it, so no agent is asked and nothing is
spent, and what comes next sees the same values. The fork's own changes to memory are made just
before the first step it does not take over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.lang.render import to_text
from agentrun.models.contract import MAX_OUTPUT_CHARS, Fork, RunState, StepRecord
from agentrun.workflows import taint
from agentrun.workflows.failures import TaskFailed

if TYPE_CHECKING:
    from agentrun.workflows.scope import Scope

STEP_LOG = "step-log"  # runs recorded before this kept no step log: replaying them must not add one

STEPS = (ir.Task, ir.Provider, ir.Human)


class Replayed(TaskFailed):
    """A failure a fork took over from its parent's record: nothing ran, so nothing waits to retry."""


@dataclass(frozen=True)
class Turn:
    """One run of a step under way: which round of its run key, and the parent's record of it when
    the fork takes it over."""

    key: str
    node: str
    round: int
    began: int
    record: StepRecord | None


class Reuse:
    def __init__(self, state: RunState, fork: Fork | None, recording: bool):
        self.state, self.fork, self.recording = state, fork, recording
        self.given = {(r.key, r.round): r for r in fork.reuse} if fork else {}
        # In the state, which a run that continues as new carries (not kept where the log is not).
        self.rounds: dict[str, int] = state.step_rounds if recording else {}
        self.writes: dict[str, dict[str, Any]] = {}  # blackboard writes of each step under way
        self.went_on = fork is None or len(state.step_log) > state.reused_runs  # it ran a step itself

    def begin(self, key: str, node: str) -> Turn:
        turn = self.rounds[key] = self.rounds.get(key, 0) + 1
        self.writes[key] = {}
        return Turn(key, node, turn, len(self.state.step_log), self.given.get((key, turn)))

    def next_is_taken(self, key: str) -> bool:
        """Will the next run of `key` be taken over? Its gate was passed in the parent, then."""
        return (key, self.rounds.get(key, 0) + 1) in self.given

    def wrote(self, key: str, path: str, value: Any) -> None:
        if key in self.writes:
            self.writes[key][path] = value

    def going_on(self, key: str) -> None:
        """A step runs: its row no longer shows a run taken over (a loop's earlier round); the
        fork's memory changes are made before the first step it runs itself."""
        self.state.running_again(key)
        if self.went_on or self.fork is None:
            return
        self.went_on = True
        for path, value in self.fork.memory.items():
            self.state.write_var(path, value)

    def ended(self, turn: Turn, status: str, value: Any = None, error: str = "") -> None:
        writes = self.writes.pop(turn.key, {})
        if not self.recording:
            return
        kept = _fits(value)
        self.state.log_step(
            StepRecord(
                key=turn.key,
                node=turn.node,
                round=turn.round,
                began=turn.began,
                status="failed" if status == "failed" else "completed",
                value=value if kept else None,
                kept=kept,
                error=error,
                writes=writes,
            )
        )


def take_over(reuse: Reuse, node: ir.Task | ir.Provider | ir.Human, scope: Scope, turn: Turn) -> Any:
    """Stand the parent's record in for this run of the step: its row, its blackboard writes, its
    value or its failure, as if it had run; nothing is asked and nothing is spent."""
    record, state, key = turn.record, reuse.state, turn.key
    assert record is not None and reuse.fork is not None
    now = workflow.now()
    task = state.begin(key, now)
    task.take_over(reuse.fork.parent, node.agent if isinstance(node, ir.Task) else task.agent)
    state.count_reused()
    for path, value in record.writes.items():
        state.write_var(path, value)
    reuse.writes[key] = dict(record.writes)  # kept in the fork's own log, for a fork of the fork
    reuse.ended(turn, record.status, record.value, record.error)
    if record.status == "failed":
        state.finish(key, "failed", now, error=record.error)
        raise Replayed(key, record.error)
    if isinstance(node, ir.Human):  # as the question's own step leaves it
        state.hear(node.id, record.value)
        state.finish(key, "completed", now, output=record.value or "")
        return record.value
    state.finish(key, "completed", now, output=to_text(record.value))
    taint.mark_leaf(node, key, state, scope)
    return record.value


def _fits(value: Any) -> bool:
    """Small enough to keep in the run's state beside its output."""
    return len(json.dumps(value, ensure_ascii=False, default=str)) <= MAX_OUTPUT_CHARS
