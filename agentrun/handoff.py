"""Handing `start`, `fork` and `watch --worker` to the fork server (agentrun.forkserver).

Loading Temporal's SDK, the workflows, the activities and the IR's models is most of what `start`
does before its agent's first prompt (≈ 600 ms here). The fork server loads them once and forks a
process for each command handed to it. That process takes this one's terminal (its three standard
streams), environment, working folder, umask and arguments, so it is this command in all but its
pid: what it prints, reads and exits with are this command's, signals sent here are passed on, and
it is killed when this process dies, even by `kill -9`.

Where no fork server answers, the command runs in this process, as it always did, and a fork server
is started in the background for the next one. `AGENTRUN_FORKSERVER=off` keeps every command here.
This module is imported before anything else of every command, so it uses the standard library
alone, and only os and sys until it hands a command off: the others start no slower for it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket
    import subprocess

ENV = "AGENTRUN_FORKSERVER"
HANDED = ("start", "fork")
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
# What the fork server is started with: enough to import the same packages, and no credentials,
# since it outlives the command that started it. Each command it runs gets its caller's environment.
KEPT = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "XDG_RUNTIME_DIR", "VIRTUAL_ENV")
KEPT_PREFIXES = ("PYTHON", "LC_")
PACKAGE = Path(__file__).resolve().parent


def main(entry: str) -> None:
    """Run the command line `entry` ("client" for `python -m client`, "agentrun") with sys.argv:
    in the fork server when it takes the command, else here."""
    argv = sys.argv[1:]
    code = hand_off(entry, argv) if wanted(argv) else None
    if code is not None:
        os._exit(code)
    from agentrun import cli

    cli.exit_with(lambda: cli.agentrun(argv) if entry == "agentrun" else cli.client(argv))


def wanted(argv: list[str]) -> bool:
    """Is this a command that loads what serves a run (start, fork, watch --worker), with the fork
    server allowed and possible here (Linux)?"""
    if os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no") or sys.platform != "linux":
        return False
    if not argv or "-h" in argv or "--help" in argv:
        return False
    return argv[0] in HANDED or (argv[0] == "watch" and "--worker" in argv)


def socket_path() -> Path:
    """One fork server per interpreter and agentrun install, in a folder only this user can open."""
    import hashlib

    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    folder = Path(base) / f"agentrun-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    stat = folder.stat()
    if stat.st_uid != os.getuid() or stat.st_mode & 0o077:
        raise PermissionError(f"{folder} is not this user's alone")
    key = hashlib.sha256(f"{sys.executable}\0{PACKAGE}".encode()).hexdigest()[:16]
    return folder / f"forkserver-{key}.sock"


def hand_off(entry: str, argv: list[str]) -> int | None:
    """The command's exit code once the fork server has run it; None if it did not take it."""
    import socket

    try:
        path = socket_path()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(path))
    except OSError:
        start_server()
        return None
    with conn:
        try:
            _send_request(conn, entry, argv)
        except OSError:  # the server went away (its files changed), this folder is gone: nothing was forked
            start_server()
            return None
        replies = conn.makefile("rb")
        pid = _reply(replies).get("pid")
        if pid is None:  # it stopped serving (its code changed on disk): run here, start a new one
            start_server()
            return None
        _pass_signals_to(pid)
        code = _reply(replies).get("exit")
    if code is None:
        print(f"agentrun: the process that ran this command (pid {pid}) ended without an exit code", file=sys.stderr)
        return 1
    return int(code)


def _send_request(conn: socket.socket, entry: str, argv: list[str]) -> None:
    import json
    import signal
    import socket

    umask = os.umask(0)
    os.umask(umask)
    request = {
        "entry": entry,
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": umask,
        "path": sys.path,
        "ignored": [int(s) for s in _forwarded() if signal.getsignal(s) == signal.SIG_IGN],
        "streams": [_stream(s) for s in (sys.stdin, sys.stdout, sys.stderr)],
    }
    socket.send_fds(conn, [b"R"], _standard_fds())
    conn.sendall(json.dumps(request).encode() + b"\n")


def _standard_fds() -> list[int]:
    """This process's fds 0, 1 and 2; /dev/null in place of one that is closed."""
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            fds.append(os.open(os.devnull, os.O_RDWR))
    return fds


def _stream(stream: object) -> dict:
    """How Python set up one of this process's standard streams, for the fork to set up its own alike
    (line buffered on a terminal, written through under `-u`, the locale's encoding)."""
    return {
        "encoding": getattr(stream, "encoding", None) or "utf-8",
        "errors": getattr(stream, "errors", None) or "strict",
        "line_buffering": bool(getattr(stream, "line_buffering", False)),
        "write_through": bool(getattr(stream, "write_through", False)),
    }


def _reply(replies) -> dict:
    import json

    line = replies.readline()
    return json.loads(line) if line else {}


def _forwarded() -> list[int]:
    import signal

    return [getattr(signal, name) for name in FORWARDED]


def _pass_signals_to(pid: int) -> None:
    import signal

    def passed(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    def suspended(_signum: int, _frame: object) -> None:
        # Ctrl-Z: the fork is outside the terminal's session, where SIGTSTP stops nothing, so it gets
        # SIGSTOP; this process then stops as it would have, and on `fg` or `bg` both go on.
        passed(signal.SIGSTOP, None)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)
        signal.signal(signal.SIGTSTP, suspended)
        passed(signal.SIGCONT, None)

    for signum in _forwarded():
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, passed)
    if signal.getsignal(signal.SIGTSTP) != signal.SIG_IGN:
        signal.signal(signal.SIGTSTP, suspended)


def start_server() -> subprocess.Popen | None:
    """Start a fork server in the background unless one holds the lock (loading, or serving); a
    command must not fail for it. Its pid is in the lock file once it holds the lock."""
    import subprocess

    try:
        path = socket_path()
        if server_pid(path) is not None:
            return None
        env = {k: v for k, v in os.environ.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE.parent), env.get("PYTHONPATH")]))
        with open(path.with_suffix(".log"), "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-P", "-m", "agentrun.forkserver"],  # -P: not "/" first on sys.path
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
    except OSError:
        return None


def ready(path: Path) -> bool:
    """Does a fork server serve at `path`, with what is on disk now? One that finds its files
    changed stops (start_server then starts another)."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(path))
            conn.shutdown(socket.SHUT_WR)  # no command: it only checks its files
            return "stale" not in _reply(conn.makefile("rb"))
    except OSError:
        return False


def lock_path(path: Path) -> Path:
    return path.with_suffix(".lock")


def server_pid(path: Path) -> int | None:
    """The pid of the fork server holding the lock beside `path` (loading, or serving), if one does."""
    import fcntl

    with open(lock_path(path), "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            text = lock.read().strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(lock, fcntl.LOCK_UN)
        return None
