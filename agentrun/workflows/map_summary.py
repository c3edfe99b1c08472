"""A batched map's elements summed up in the run's state as their batches come back: counts by
status, the first failures, the slowest few, and what they spent, counted in the run's totals and
budgets. Its size does not grow with the list."""

from __future__ import annotations

from agentrun.models.contract import ElementNote, MapSummary, RunState, TaintMark, TaskState
from agentrun.workflows.batching import BatchResult, Spent

MAX_FAILURES = 20
SLOWEST = 5
MAX_COPIED = 50  # warnings and errors of one map's elements copied into the run's own lists
MAX_TAINT_SOURCES = 20


class Tally:
    """One run of a batched map: its summary, the row that stands for its elements, and what its
    batches said that the run keeps."""

    def __init__(self, state: RunState, summary: MapSummary, row: TaskState):
        self.state, self.summary, self.row = state, summary, row
        self.copied = 0
        self.taint_source = ""
        self.taint_from: list[str] = []

    def add(self, result: BatchResult) -> None:
        for note in result.notes:
            self._note(note)
        self._spend(result.spent)
        self._copy(result)
        if result.tainted_count:
            self.taint_source = self.taint_source or result.taint_source
            self.taint_from = list(dict.fromkeys([*self.taint_from, *result.taint_from]))[:MAX_TAINT_SOURCES]
        if not result.deferred and not result.failed and not result.cancelled:
            self.summary.batch_done()

    def _note(self, note: ElementNote) -> None:
        if note.status == "pending":
            return  # not run: a later part of its batch reports it
        self.summary.count(note, MAX_FAILURES, SLOWEST)
        self.row.add_element(note.retries, note.output_size)

    def _spend(self, spent: Spent) -> None:
        self.state.add_spent(
            self.row, spent.prompts, spent.retries, spent.cost_usd, spent.usage, spent.by_model, spent.by_step
        )

    def _copy(self, result: BatchResult) -> None:
        """The elements' warnings and errors into the run's, up to MAX_COPIED for the map; the
        rest are counted, and kept in the batches' own states."""
        state = self.state
        lines = [(state.warnings, state.warn, w) for w in result.warnings]
        lines += [(state.errors, state.record_error, e) for e in result.errors]
        for said, say, line in lines:
            if line in said:
                continue  # said once for the run (an unpriced model)
            if self.copied < MAX_COPIED:
                say(line)
                self.copied += 1
            else:
                self.summary.drop_notes(1)
        self.summary.drop_notes(result.dropped)

    def mark_taint(self) -> None:
        """One mark for the elements whose output is marked, under the row that stands for them."""
        if self.taint_source:
            self.state.mark(self.row.id, TaintMark(source=self.taint_source, derived_from=self.taint_from))
