"""The call_provider activity: run one provider call and keep its result."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.activities.providers.base import Provider, ProviderError
from agentrun.activities.providers.registry import ProviderLoadError, UnknownProvider, get_provider
from agentrun.activities.redact import raise_redacted, redact
from agentrun.activities.sizes import check_size
from agentrun.models.calls import CALL_PROVIDER, ProviderCall, ProviderResult

HEARTBEAT_EVERY_S = 1.0
T = TypeVar("T")


@activity.defn(name=CALL_PROVIDER)
async def call_provider(call: ProviderCall) -> ProviderResult:
    try:
        provider = get_provider(call.provider)
    except (UnknownProvider, ProviderLoadError) as e:
        raise ApplicationError(str(e), type=type(e).__name__, non_retryable=True) from e
    try:
        # A failed command's message quotes its output: it is kept in history as much as a result.
        text = redact(await _heartbeating(_invoke(provider, call)))
    except ApplicationError as e:
        raise_redacted(e)
    check_size(f"the result of {call.provider}.{call.method} for task '{call.task_id}'", len(text.encode()))
    if call.output_file:
        _write_output(call.workdir, call.output_file, text)
    return ProviderResult(text=text)


async def _invoke(provider: Provider, call: ProviderCall) -> str:
    where = f"{call.provider}.{call.method}"
    try:
        if inspect.iscoroutinefunction(provider.call):
            result: Any = await provider.call(call.method, dict(call.params), call.workdir)
        else:
            result = await asyncio.to_thread(provider.call, call.method, dict(call.params), call.workdir)
            if inspect.isawaitable(result):
                result = await result
    except ProviderError as e:
        raise ApplicationError(str(e), type=e.kind, non_retryable=not e.retryable) from e
    except (ValueError, TypeError, KeyError) as e:
        # From plugins that validate with plain exceptions: the same call would fail again.
        raise ApplicationError(f"{where}: {e!r}", type="BadParams", non_retryable=True) from e
    except Exception as e:
        raise ApplicationError(f"{where}: {e!r}", type=type(e).__name__) from e
    if isinstance(result, bytes):
        result = result.decode("utf-8", errors="replace")
    if not isinstance(result, str):
        raise ApplicationError(
            f"{where} returned {type(result).__name__}, expected str",
            type="BadProviderResult",
            non_retryable=True,
        )
    return result


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await work while heartbeating, so a long call is not mistaken for a dead worker."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=HEARTBEAT_EVERY_S)
            if not task.done():
                activity.heartbeat()
    finally:
        if not task.done():
            # asyncio.wait does not pass our cancellation on; do it, and let the work clean up.
            task.cancel()
            await asyncio.wait({task})
    return task.result()


def _write_output(workdir: str, output_file: str, text: str) -> None:
    path = Path(workdir) / output_file
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ApplicationError(
            f"cannot write output_file {output_file!r}: {e}",
            type="OutputFileError",
            non_retryable=True,
        ) from e
