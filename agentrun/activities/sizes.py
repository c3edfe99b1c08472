"""How much one activity may hand back to the workflow.

Temporal refuses a payload over 2 MB (and warns from 512 KB). Over it, the SDK fails the activity
as retryable, so an agent would be asked — and paid — again for a reply that can never fit. Under
our own lower limit the workflow still has room to keep the value and say what happened; over it
the step fails at once, non-retryably, saying how big the result was.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from agentrun.spec.sizes import megabytes

MAX_RESULT_BYTES = 1_500_000
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
