"""Run a child process in its own process group, with a deadline, and always clean it up.

Shared by the shell provider and the success-criteria checker: both run user code, and user
code may start children of its own, so killing only the direct child is not enough.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from agentrun.activities import children

TAIL_CHARS = 2000
MAX_KEPT_BYTES = 1_000_000


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None when the deadline killed the process
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    """The end of a long output: where the reason for a failure usually is."""
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_every_s: float = 1.0,
) -> Finished:
    """Run argv to completion or until timeout_s, calling heartbeat while waiting.

    Output goes to temporary files rather than pipes: a background grandchild that inherits a
    pipe would otherwise keep us waiting for EOF long after the command itself ended.
    On timeout, cancellation or normal exit the whole process group is killed, so nothing the
    user code started outlives the call. argv runs behind a guard process (so it cannot signal the
    worker as its parent) with `env`, by default the allow-listed environment: see activities.children.
    """
    env = dict(env) if env is not None else children.environment()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = await asyncio.create_subprocess_exec(
            *children.guarded(argv, env, cwd),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            finished = await _wait(proc, timeout_s, heartbeat, heartbeat_every_s)
        finally:
            _kill_group(proc.pid)
            # Reap the child even when cancelled, so no zombie is left behind.
            await asyncio.shield(proc.wait())
        return Finished(
            returncode=proc.returncode if finished else None,
            stdout=_read(out),
            stderr=_read(err),
        )


async def _wait(
    proc: asyncio.subprocess.Process,
    timeout_s: float,
    heartbeat: Callable[[], None] | None,
    every_s: float,
) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (remaining := deadline - loop.time()) > 0:
        try:
            await asyncio.wait_for(proc.wait(), timeout=min(every_s, remaining))
            return True
        except TimeoutError:
            if heartbeat is not None:
                heartbeat()
    return False


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _read(f: IO[bytes]) -> str:
    """What the process wrote, its last MAX_KEPT_BYTES at most: a check or command that writes
    gigabytes must not grow the worker by as much."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - MAX_KEPT_BYTES))
    text = f.read().decode("utf-8", errors="replace")
    return text if size <= MAX_KEPT_BYTES else f"… ({size - MAX_KEPT_BYTES:,} bytes before this were cut)\n{text}"
