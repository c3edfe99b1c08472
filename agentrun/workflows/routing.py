"""A failure the spec routes is not an error of the run: a selector's alternative that fails (a
precondition not met, most often) before the next one runs, and a node whose `on_failure` skips it
or falls back. Its rows read "not taken", and its errors leave the run's list of errors, so a run
that went the way its spec says reads as one that did (no `✗ … failed`, no ERROR in the report).

Rows and errors are rewritten in the same workflow task that recorded them, so nobody reading the
run's state sees them as failures in between.
"""

from __future__ import annotations

from typing import NamedTuple

from temporalio import workflow

from agentrun.models.contract import RunState

# Runs recorded before kept such rows failed and their errors in the run's list.
ROUTED_NOT_FAILED = "routed-failure-not-error"


class Mark(NamedTuple):
    """Where the run's errors stood before the work whose failure may be routed."""

    errors: int


def mark(state: RunState) -> Mark:
    return Mark(len(state.errors))


def not_taken(state: RunState, since: Mark) -> None:
    """The rows that failed since `since`: not taken; their errors are no longer the run's."""
    if len(state.errors) <= since.errors or not workflow.patched(ROUTED_NOT_FAILED):
        return
    state.not_taken(since.errors)
