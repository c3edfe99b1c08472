"""Names the command line needs before anything heavy loads: the task queue and the statuses a run
can have. agentrun.models.contract, the whole client-worker contract, takes them from here."""

from __future__ import annotations

from typing import Literal

TASK_QUEUE = "agentrun"

# `terminated` is set by the client for a run ended from outside (Temporal's Terminate), never by the run.
RunStatus = Literal[
    "terminated",
    "pending",
    "running",
    "waiting",
    "retrying",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "compensated",
]


def run_queue(shared: str, run_id: str) -> str:
    """The task queue of a run that the client's own worker runs: only that worker polls it, and the
    run's children, batches and subgraphs stay on it (Temporal's default for both)."""
    return f"{shared}/{run_id}"


def shared_queue(queue: str, run_id: str) -> str:
    """The queue a run's own queue was named after; a shared queue as it is."""
    return queue.removesuffix(f"/{run_id}")


def own_queue(queue: str, run_id: str) -> bool:
    """Whether `queue` is the run's own queue (see run_queue), not one that workers share."""
    return queue != shared_queue(queue, run_id)
