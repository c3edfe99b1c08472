"""The caller's side of the fork server (agentrun.forkserver), for `start`, `fork` and `watch --worker`
(agentrun.launcher decides which commands come here).

Loading Temporal's SDK, the workflows, the activities and the IR's models is most of what `start`
does before its agent's first prompt (≈ 600 ms here). The fork server loads them once and forks a
process for each command handed to it. That process takes this one's terminal (its three standard
streams), environment, working folder, umask and arguments, so it is this command in all but its
pid: what it prints, reads and exits with are this command's, signals sent here are passed on, and
it is killed when this process dies, even by `kill -9`. Where no fork server takes the command, it
runs in this process, as it always did, and a fork server is started in the background for the next.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

from agentrun.forkservers import PACKAGE, install_path, server_pid, socket_path

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# What the fork server is started with: enough to import the same packages, and no credentials,
# since it outlives the command that started it. Each command it runs gets its caller's environment.
KEPT = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "XDG_RUNTIME_DIR", "VIRTUAL_ENV")
KEPT_PREFIXES = ("PYTHON", "LC_")


def hand_off(entry: str, argv: list[str]) -> int | None:
    """The command's exit code once the fork server has run it; None if none took it: none serves,
    or it found its files changed, or the request could not be sent (it went away, this folder is
    gone). It forks nothing before it has the whole request, and it sends the fork's pid first."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(socket_path()))
    except OSError:
        return None
    with conn:
        try:
            _send_request(conn, entry, argv)
        except OSError:
            return None
        replies = conn.makefile("rb")
        pid = _reply(replies).get("pid")
        if pid is None:
            return None
        _pass_signals_to(pid)
        code = _reply(replies).get("exit")
    if code is None:
        print(f"agentrun: the process that ran this command (pid {pid}) ended without an exit code", file=sys.stderr)
        return 1
    return int(code)


def _send_request(conn: socket.socket, entry: str, argv: list[str]) -> None:
    umask = os.umask(0)
    os.umask(umask)
    request = {
        "entry": entry,
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": umask,
        "path": sys.path,
        "ignored": [int(s) for s in FORWARDED if signal.getsignal(s) == signal.SIG_IGN],
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


def _reply(replies: BinaryIO) -> dict:
    line = replies.readline()
    return json.loads(line) if line else {}


def _pass_signals_to(pid: int) -> None:
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

    for signum in FORWARDED:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, passed)
    if signal.getsignal(signal.SIGTSTP) != signal.SIG_IGN:
        signal.signal(signal.SIGTSTP, suspended)


def start_server() -> None:
    """Start a fork server in the background unless one holds the lock (loading, or serving); a
    command must not fail for it. Its pid is in the lock file once it holds the lock."""
    try:
        path = socket_path()
        if server_pid(path) is not None:
            return
        env = {k: v for k, v in os.environ.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE.parent), env.get("PYTHONPATH")]))
        # Which install and interpreter the server is for: `server status` and `server stop` find
        # this install's servers by it, and leave every other install's alone.
        install_path(path).write_text(json.dumps({"package": str(PACKAGE), "python": sys.executable}))
        with open(path.with_suffix(".log"), "ab") as log:
            subprocess.Popen(
                [sys.executable, "-P", "-m", "agentrun.forkserver"],  # -P: not "/" first on sys.path
                env=env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
    except OSError:
        pass


def ensure_server(timeout_s: float = 120) -> Path:
    """A fork server serving what is on disk now, started if need be (a bench, a test session); its
    socket. Raises RuntimeError, naming its log, if none comes up within `timeout_s`."""
    path = socket_path()
    deadline = time.monotonic() + timeout_s
    while not ready(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no fork server came up; see {path.with_suffix('.log')}")
        start_server()
        time.sleep(0.1)
    return path


def ready(path: Path) -> bool:
    """Does a fork server serve at `path`, with what is on disk now? One that finds its files
    changed stops (start_server then starts another)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(path))
            conn.shutdown(socket.SHUT_WR)  # no command: it only checks its files
            return "stale" not in _reply(conn.makefile("rb"))
    except OSError:
        return False
