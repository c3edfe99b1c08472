"""What every driver needs: error types, an HTTP client without hidden retries, group stop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import ssl

import httpx
from temporalio.exceptions import ApplicationError

from agentrun.activities import children

# Non-retryable agent failures carry this type; retryable ones AGENT_UNAVAILABLE, so a workflow may
# list AGENT_ERROR in non_retryable_error_types without making transient failures fatal.
AGENT_ERROR = "AgentError"
AGENT_UNAVAILABLE = "AgentUnavailable"


def agent_error(message: str) -> ApplicationError:
    """A failure that retrying will not fix: bad configuration or a protocol violation."""
    return ApplicationError(message, type=AGENT_ERROR, non_retryable=True)


def http_client(timeout_s: float, connect_s: float = 10.0) -> httpx.AsyncClient:
    # retries=0: the activity retry policy alone decides, with Retry-After and backoff.
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(retries=0, verify=_tls()),
        timeout=httpx.Timeout(timeout_s, connect=min(connect_s, timeout_s)),
    )


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS context httpx would make (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR), made
    once a worker: making one reads every root certificate, tens of ms that each model turn paid."""
    return httpx.create_ssl_context()


def tail(data: bytes | str, limit: int = 2000) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


async def stop_process_group(proc: asyncio.subprocess.Process, grace_s: float = 3.0) -> None:
    """SIGTERM the child's whole process group, SIGKILL it if it lingers, and reap the child.

    The child must have been started with start_new_session=True so its pid is its group id.
    Shielded so that a second cancellation cannot leave the group running.
    """
    await asyncio.shield(_stop(proc, grace_s))


async def _stop(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), grace_s)
    # Grandchildren may outlive a leader that obeyed SIGTERM; the group id still names them.
    _signal_group(proc.pid, signal.SIGKILL)
    await proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def spawn(
    argv: list[str], task_id: str, workdir: str, what: str, *, credentials: bool = False, **streams
) -> asyncio.subprocess.Process:
    """Start an agent process in its own process group (so it can be stopped whole), in workdir,
    behind a guard process and with the allow-listed environment (activities.children); with
    `credentials`, the agent's own sign-in variables too (children.AGENT_CREDENTIALS).

    A missing program or workdir is a configuration mistake, not a transient failure.
    """
    env = children.environment({"AGENTRUN_TASK_ID": task_id}, also=children.AGENT_CREDENTIALS if credentials else ())
    try:
        guarded = children.guarded(argv, env, workdir)
        return await asyncio.create_subprocess_exec(*guarded, cwd=workdir, env=env, start_new_session=True, **streams)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as err:
        raise agent_error(f"{what}: cannot start {argv[0]!r} in {workdir!r}: {err}") from None
