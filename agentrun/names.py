"""Names the command line needs before anything heavy loads: the task queue and the statuses a run
can have. agentrun.contract, the whole client-worker contract, takes them from here."""

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
