"""What a provider is, and the errors it raises.

A provider is any object with a method

    call(self, method: str, params: dict[str, Any], workdir: str) -> str

It may be a plain function (the activity runs it in a thread) or `async def` (awaited on the
worker's event loop; prefer this for long calls, because a thread cannot be cancelled).
`method` and `params` come straight from the task's `provider_call`; `workdir` is the run's
work directory; the returned string is the call's result.

Providers are found by name: the built-ins plus every entry point in the group
`agentrun.providers`, whose value is a class (or factory) called with no arguments.

To tell the engine whether trying again could help, raise `ProviderError(retryable=...)`;
`BadParams` is for calls that can never succeed as written. Any other exception is treated as
transient, except ValueError/TypeError/KeyError, which are taken to mean bad params.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Provider(Protocol):
    def call(self, method: str, params: dict[str, Any], workdir: str) -> str | Awaitable[str]: ...


class ProviderError(Exception):
    """A provider call failed; `kind` names the failure for the workflow's error type."""

    def __init__(self, message: str, *, retryable: bool, kind: str = "ProviderError") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.kind = kind


class BadParams(ProviderError):
    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, kind="BadParams")


def check_keys(where: str, params: Mapping[str, Any], allowed: Collection[str], required: Collection[str] = ()) -> None:
    """Reject misspelled or missing params up front, rather than silently ignoring them."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise BadParams(f"{where}: unknown params {unknown}; allowed: {sorted(allowed)}")
    missing = sorted(set(required) - set(params))
    if missing:
        raise BadParams(f"{where}: missing required params {missing}")


def get_timeout(where: str, params: Mapping[str, Any], default: float) -> float:
    value = params.get("timeout_s", default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BadParams(f"{where}: timeout_s must be a positive number, got {value!r}")
    return float(value)
