"""agentrun: a durable engine for multi-agent workflows on Temporal.

The public API is `agentrun.connect()` and what it returns (an `Engine`, whose `start` gives a
`Run`); the names below are its values. `agentrun.lang` loads spec files into the plan,
`agentrun.workflows` interprets it in one Temporal workflow, `agentrun.activities` talks to agents,
tools and providers, `agentrun.worker` runs them, `agentrun.client` is the API and `agentrun.cli`
the command line (`agentrun`, or `python -m client` in a checkout).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# Every command line imports this package first: the API's names load on first use, so `--help`
# and the spec commands do not pay for Temporal's client (tests/test_fast_commands.py).
_EXPORTS = {
    "connect": "agentrun.client.engine",
    "run": "agentrun.client.program",
    "Engine": "agentrun.client.engine",
    "Run": "agentrun.client.run",
    "RunEvent": "agentrun.client.models",
    "RunResult": "agentrun.client.models",
    "RunSummary": "agentrun.client.models",
    "StepStarted": "agentrun.client.models",
    "StepFinished": "agentrun.client.models",
    "PartialOutput": "agentrun.client.models",
    "QuestionOpened": "agentrun.client.models",
    "QuestionAnswered": "agentrun.client.models",
    "NoteDelivered": "agentrun.client.models",
    "RunEnded": "agentrun.client.models",
    "Answered": "agentrun.client.models",
    "Raised": "agentrun.client.models",
    "Pending": "agentrun.client.models",
    "Question": "agentrun.client.models",
    "Progress": "agentrun.client.models",
    "RunInfo": "agentrun.client.models",
    "Look": "agentrun.client.models",
    "UnderWay": "agentrun.client.models",
    "Retry": "agentrun.client.models",
    "Said": "agentrun.client.models",
    "ForkPlan": "agentrun.client.models",
    "RunState": "agentrun.models.contract",
    "Answer": "agentrun.models.contract",
    "Note": "agentrun.models.contract",
    "UserError": "agentrun.errors",
    "NoSuchRun": "agentrun.errors",
    "NoWorker": "agentrun.errors",
    "Refused": "agentrun.errors",
    "Unavailable": "agentrun.errors",
    "SpecError": "agentrun.lang.errors",
}
__all__ = [
    "connect",
    "run",
    "Engine",
    "Run",
    "RunEvent",
    "RunResult",
    "RunSummary",
    "StepStarted",
    "StepFinished",
    "PartialOutput",
    "QuestionOpened",
    "QuestionAnswered",
    "NoteDelivered",
    "RunEnded",
    "Answered",
    "Raised",
    "Pending",
    "Question",
    "Progress",
    "RunInfo",
    "Look",
    "UnderWay",
    "Retry",
    "Said",
    "ForkPlan",
    "RunState",
    "Answer",
    "Note",
    "UserError",
    "NoSuchRun",
    "NoWorker",
    "Refused",
    "Unavailable",
    "SpecError",
    "__version__",
]

if TYPE_CHECKING:  # what pyright and editors see of the names __getattr__ loads
    from agentrun.client.engine import Engine, connect
    from agentrun.client.models import (
        Answered,
        ForkPlan,
        Look,
        NoteDelivered,
        PartialOutput,
        Pending,
        Progress,
        Question,
        QuestionAnswered,
        QuestionOpened,
        Raised,
        Retry,
        RunEnded,
        RunEvent,
        RunInfo,
        RunResult,
        RunSummary,
        Said,
        StepFinished,
        StepStarted,
        UnderWay,
    )
    from agentrun.client.program import run
    from agentrun.client.run import Run
    from agentrun.errors import NoSuchRun, NoWorker, Refused, Unavailable, UserError
    from agentrun.lang.errors import SpecError
    from agentrun.models.contract import Answer, Note, RunState


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrun' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
