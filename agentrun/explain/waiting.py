"""What to tell a person about a run no worker answers for: how to get a worker to it. The state a
client builds for such a run (client.no_worker) carries NO_WORKER among its warnings, then these."""

from __future__ import annotations

from agentrun import spelling
from agentrun.models import names
from agentrun.models.contract import RunState

# The warning a state built without a worker carries; `pending` and `status` look for it.
NO_WORKER = "no worker is answering for this run"


def worker_command(task_queue: str) -> str:
    """How to start a worker for runs on this queue."""
    return spelling.worker() + ("" if task_queue == names.TASK_QUEUE else f" --task-queue {task_queue}")


def hint(run_id: str, task_queue: str, polled: bool = False) -> str:
    """What to do when no worker runs `run_id`; `polled` when a worker polls its queue but did not answer."""
    if polled:
        why = f"a worker polls task queue '{task_queue}' but did not answer for this run"
    else:
        why = f"no worker polls task queue '{task_queue}', so nothing runs it"
    return (
        f"{why}: start one with `{worker_command(task_queue)}`, "
        f"or run one here with `{spelling.client()} watch {run_id} --worker`"
    )


def stuck_hint(run_id: str, task_queue: str, why: str) -> str:
    """What to do when a worker polls the run's queue but does not take the run's work (`why`)."""
    return (
        f"a worker polls task queue '{task_queue}' but {why}: the worker that holds the run is stuck on it, "
        f"or cannot run it (another version of agentrun?). Stop that worker (SIGTERM: it exits within 15 s) "
        f"and start one with `{worker_command(task_queue)}`, which replays the run; or run one here with "
        f"`{spelling.client()} watch {run_id} --worker`"
    )


def notes(state: RunState) -> list[str]:
    """What a state built without a worker says beyond the marker: why nothing is known, and what to do."""
    if NO_WORKER not in state.warnings:
        return []
    return state.warnings[state.warnings.index(NO_WORKER) + 1 :]
