"""How much one activity may hand back to the workflow.

A result over AGENTRUN_BLOB_THRESHOLD goes by reference, so Temporal's 2 MB per payload no longer
binds; this limit keeps one runaway reply from filling the worker's memory and the store, and says
so at once, non-retryably, rather than asking (and paying) the agent again for a reply that will
not be kept.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from agentrun.models.sizes import MAX_RESULT_BYTES, megabytes

TOO_LARGE = "ResultTooLarge"


def check_size(what: str, size: int) -> None:
    """Raise the step's non-retryable failure when `size` bytes are more than a step may return.
    `what` says whose result it is: "the reply of agent 'writer' to task 'write'"."""
    if size > MAX_RESULT_BYTES:
        raise ApplicationError(
            f"{what} is {megabytes(size)}, over the {megabytes(MAX_RESULT_BYTES)} a step may return",
            type=TOO_LARGE,
            non_retryable=True,
        )
