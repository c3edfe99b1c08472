"""Running one bash command so that whatever it does ends with the call, not the worker.

- Its environment is made, not inherited: PATH, HOME and PWD (the work directory), TMPDIR, TERM,
  the locale, and the call's idempotency key. No key, token or password of the worker is there.
- Behind the OS boundary (tools.wall) when given a room: bubblewrap's root of its own with its
  own PID and network namespaces, and Landlock; otherwise (the policy's sandbox = "off") its own
  PID and mount namespaces with a fresh /proc (`unshare`; as a normal user inside a user namespace
  of its own). Either way the worker's processes, and their /proc/<pid>/environ, are not there to
  read or signal, and when the call ends its first process dies and the kernel kills every other.
- Its own control group where the machine gives one (tools.cgroups): at most `processes` tasks and
  `memory_bytes` of memory; otherwise RLIMIT_NPROC (above what the user already runs) and RLIMIT_AS.
- RLIMIT_FSIZE: no file it writes, its captured output included, grows past `file_bytes`.
- A time limit, after which its whole process group, namespace and control group are killed.

Where namespaces cannot be made (a container without the right), the command still runs in its own
session with the rest, and a process that leaves the session may outlive the call; the worker logs
which protections it has at its first bash call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from agentrun.activities.tools import cgroups, wall
from agentrun.models.tools import ToolLimits

log = logging.getLogger(__name__)
# Without a PID namespace a command sees the worker's /proc/<pid>/environ: the worker is not dumpable
# (made so at its start; here again for a process that runs commands without being a worker).
hide_worker = wall.hide_worker

# Joins the control groups and sets the limits, then becomes the command: runs between the
# worker's fork and the command, so the worker itself never changes its own limits. With util-linux's
# setpriv and prlimit (beside unshare) it is a shell, a few milliseconds; else a Python of its own, about 30.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'
_LAUNCHER = r"""
import ctypes, json, os, resource, signal, sys
# Python ignores these two at start, and an exec would pass that on: the command gets the defaults.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the worker
config = json.loads(sys.argv[1])
for path in config["cgroups"]:
    with open(path, "w") as f:
        f.write(str(os.getpid()))
for name, value in config["rlimits"]:
    resource.setrlimit(getattr(resource, name), (value, value))
argv = sys.argv[2:]
try:
    os.execvp(argv[0], argv)
except OSError as e:
    os.write(2, f"cannot start {argv[0]!r}: {e.strerror}\n".encode())
    os._exit(127)
"""
_PRLIMIT_NAMES = {"RLIMIT_FSIZE": "fsize", "RLIMIT_CORE": "core", "RLIMIT_AS": "as", "RLIMIT_NPROC": "nproc"}


# Variables of the worker a command may see (values taken from the worker), besides those set here.
PASSED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None  # None: killed at the time limit
    signal: int | None  # the signal that ended it, if one did
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int


def environment(workdir: str, key: str = "", tmp: str = "/tmp") -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=workdir, PWD=workdir, TMPDIR=tmp, TERM="dumb", SHELL="/bin/bash")
    if key:
        env["AGENTRUN_IDEMPOTENCY_KEY"] = key
    return env


async def run_command(
    command: str,
    workdir: str,
    limits: ToolLimits,
    timeout_s: float,
    *,
    key: str = "",
    keep_chars: int = 32_000,
    heartbeat: Callable[[], None] | None = None,
    room: wall.Room | None = None,
) -> Outcome:
    """Run `command` with bash in the sandbox; its output, its start and end when it is long. With
    a `room`, behind the OS boundary's layers (tools.wall) as well."""
    with tempfile.TemporaryDirectory(prefix="agentrun-tmp-") as tmp:
        if room is not None and not wall.layers().bwrap:  # Landlock alone: a temporary folder of its own
            room = dataclasses.replace(room, tmp=tmp)
        return await _run(command, workdir, limits, timeout_s, key, keep_chars, heartbeat, room)


async def _run(
    command: str,
    workdir: str,
    limits: ToolLimits,
    timeout_s: float,
    key: str,
    keep_chars: int,
    heartbeat: Callable[[], None] | None,
    room: wall.Room | None,
) -> Outcome:
    group = await asyncio.to_thread(cgroups.create, limits.processes, limits.memory_bytes)
    # The EXIT trap keeps bash as the command's first process, rather than letting it become a
    # single command by exec: a command killed by a signal is then reported as bash reports it.
    argv = ["bash", "-c", f"trap : EXIT\n{command}"]
    if room is not None:
        argv = wall.wrap(room, argv)
    if room is None or not wall.layers().bwrap:  # bwrap makes its own PID namespace
        prefix = await asyncio.to_thread(namespaces)
        if not prefix:
            hide_worker()
        argv = [*prefix, *argv]
    launch = launcher(group.procs_files if group else [], _rlimits(limits, group), argv)
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = await asyncio.create_subprocess_exec(
                *launch,
                cwd=workdir,
                env=environment(workdir, key, room.tmp if room is not None else "/tmp"),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                finished = await _wait(proc, timeout_s, heartbeat)
            finally:
                _kill_group(proc.pid)
                if group is not None:
                    await asyncio.to_thread(group.kill_all)
                await asyncio.shield(proc.wait())
            code = proc.returncode
            stdout, stdout_bytes = _read(out, keep_chars)
            stderr, stderr_bytes = _read(err, keep_chars)
    finally:
        if group is not None:
            await asyncio.to_thread(group.remove)
    ended_by = _signal_of(code)
    return Outcome(
        exit_code=(code if code is not None and code >= 0 else 128 + (ended_by or 0)) if finished else None,
        signal=ended_by,
        stdout=stdout,
        stderr=stderr,
        stdout_bytes=stdout_bytes,
        stderr_bytes=stderr_bytes,
    )


def launcher(procs_files: list[str], rlimits: list[tuple[str, int]], argv: list[str]) -> list[str]:
    """argv behind what joins the control groups and sets the limits. The command also gets
    SIGKILL when the worker dies (a kill -9 of the worker ends its commands, namespace and all)."""
    tools = _prlimit()
    if tools:
        setpriv, prlimit = tools
        flags = [f"--{_PRLIMIT_NAMES[name]}={value}" for name, value in rlimits]
        shell = ["/bin/sh", "-c", _JOIN, "sh", *procs_files, "--", *argv]
        return [setpriv, "--pdeathsig=KILL", "--", prlimit, *flags, "--", *shell]
    config = {"cgroups": procs_files, "rlimits": rlimits}
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(config), *argv]


@functools.cache
def _prlimit() -> tuple[str, str] | None:
    """util-linux's setpriv and prlimit, when both are there."""
    setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
    return (setpriv, prlimit) if setpriv and prlimit else None


def _rlimits(limits: ToolLimits, group: cgroups.CallGroup | None) -> list[tuple[str, int]]:
    found = [("RLIMIT_FSIZE", limits.file_bytes), ("RLIMIT_CORE", 0)]
    if group is None or not group.limits_memory:
        found.append(("RLIMIT_AS", limits.memory_bytes))
    if group is None and os.geteuid() != 0:
        # Counted over all of the user's processes: allow what already runs, plus the command's own.
        found.append(("RLIMIT_NPROC", _tasks_of(os.getuid()) + limits.processes))
    return found


def _tasks_of(uid: int) -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
    return count


@functools.cache
def namespaces() -> tuple[str, ...]:
    """The `unshare` prefix that gives a command its own PID and mount namespaces and /proc, or ()
    when this machine does not allow them; tried once a worker."""
    flags = ["--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-root-user", *flags]
    prefix = ("unshare", *flags, "--")
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is None or done.returncode != 0:
        log.warning("bash tool: no PID/mount namespaces here (unshare failed); commands run in their own session only")
        return ()
    return prefix


def _signal_of(code: int | None) -> int | None:
    if code is None:
        return None
    if code < 0:
        return -code
    # The shell reports a command killed by a signal as 128 + the signal.
    return code - 128 if 128 < code < 128 + signal.NSIG else None


async def _wait(proc: asyncio.subprocess.Process, timeout_s: float, heartbeat: Callable[[], None] | None) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (remaining := deadline - loop.time()) > 0:
        try:
            await asyncio.wait_for(proc.wait(), timeout=min(1.0, remaining))
            return True
        except TimeoutError:
            if heartbeat is not None:
                heartbeat()
    return False


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read(f: IO[bytes], keep_chars: int) -> tuple[str, int]:
    """What the command wrote: its start and its end when it wrote more than keep_chars."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if size <= keep_chars:
        return f.read().decode("utf-8", errors="replace"), size
    half = keep_chars // 2
    head = f.read(half).decode("utf-8", errors="replace")
    f.seek(size - half)
    tail = f.read().decode("utf-8", errors="replace")
    return f"{head}\n[… {size - 2 * half} bytes cut …]\n{tail}", size
