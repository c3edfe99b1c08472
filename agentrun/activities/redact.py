"""Keeping the worker's secrets out of history: what an activity returns or raises passes here.

A secret is the value of a worker environment variable whose name says it is one (…_API_KEY,
…_TOKEN, …PASSWORD…) and which is long enough not to be an ordinary word (8 characters). Children
never see those variables (activities.children), but an agent may still read a key from a file or
an HTTP service may echo one back; wherever one appears in text bound for history it becomes
`[redacted NAME]`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import NoReturn

from temporalio.exceptions import ApplicationError

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION", re.IGNORECASE)
MIN_SECRET_CHARS = 8


def secrets() -> list[tuple[str, str]]:
    """(name, value) of the worker's secrets, longest value first: a value that contains another
    is replaced whole, not left half-shown around the shorter one's marker."""
    found = [(n, v) for n, v in os.environ.items() if len(v) >= MIN_SECRET_CHARS and SECRET_NAME.search(n)]
    return sorted(found, key=lambda item: len(item[1]), reverse=True)


def redactor() -> Callable[[str], str]:
    """`redact` with the worker's secrets read once, for a caller with several texts (an agent call's
    heartbeats and reply, an error's causes): reading the environment is most of the cost."""
    found = secrets()

    def clean(text: str) -> str:
        for name, value in found:
            if value in text:
                text = text.replace(value, f"[redacted {name}]")
        return text

    return clean


def redact(text: str) -> str:
    return redactor()(text)


def raise_redacted(err: ApplicationError) -> NoReturn:
    """Raise err itself when neither its message nor the errors that caused it quote a secret; else
    the same failure with its message redacted and without its causes, which Temporal records too."""
    causes: list[BaseException] = []
    cause = err.__cause__
    while cause is not None and len(causes) < 20:
        causes.append(cause)
        cause = cause.__cause__
    clean = redactor()
    if all(clean(t) == t for t in [err.message, *(str(c) for c in causes)]):
        raise err
    raise ApplicationError(
        clean(err.message),
        type=err.type,
        non_retryable=err.non_retryable,
        next_retry_delay=err.next_retry_delay,
    ) from None
