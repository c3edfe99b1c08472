"""The one word a person reads for a run's status, wherever it is shown: `status`, `list`, the
report and the run page. The statuses themselves (`names.RunStatus`) stay what filters, JSON and
search attributes carry; these are their words.

A run that ended with some of its work missing is still called by how it ended; the report adds
`(partial: …)` after the word, as the seed's PARTIAL, saying what is missing."""

from __future__ import annotations

from typing import get_args

from agentrun.models.names import RunStatus

WORDS: dict[str, str] = {
    "pending": "PENDING",
    "running": "RUNNING",
    "waiting": "WAITING",
    "retrying": "RETRYING",
    "completed": "COMPLETE",
    "failed": "FAILED",
    "cancelled": "CANCELLED",
    "timeout": "TIMED OUT",
    "compensated": "ROLLED BACK",
    "terminated": "TERMINATED",
}
assert set(WORDS) == set(get_args(RunStatus)), "every status has its word"


# A step's word, as the report's table and the run page's give it.
STEP_WORDS = {
    "completed": "SUCCESS",
    "failed": "FAILED",
    "not_taken": "NOT TAKEN",  # a failure the spec routed: a selector's next alternative, a skip, a fallback
    "skipped": "SKIPPED",
    "cancelled": "CANCELLED",
    "running": "RUNNING",
    "pending": "NOT RUN",
}


def step_word(status: str) -> str:
    return STEP_WORDS.get(status, status.upper())


def word(status: str) -> str:
    """The status's word; a status this version does not know (a newer worker's) as it is, in capitals."""
    return WORDS.get(status, status.upper())


def status_of(text: str) -> RunStatus | None:
    """The status a person means by `text`: a status (`completed`) or its word in any case
    (`complete`, `rolled back`, `timed-out`); None when it is neither."""
    wanted = " ".join(text.replace("-", " ").replace("_", " ").split()).upper()
    for status in get_args(RunStatus):
        if wanted in (WORDS[status], status.upper()):
            return status
    return None


def partial(status: str, total: int, completed: int, skipped: int) -> str:
    """What a run that ended is missing, for the report's `(partial: …)`; '' when nothing is."""
    if status == "completed":
        return f"{skipped} of {total} steps skipped" if skipped else ""
    if status in ("failed", "timeout") and completed:
        return f"{completed} of {total} steps completed"
    return ""
