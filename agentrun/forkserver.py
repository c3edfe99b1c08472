"""The fork server: one process that has loaded what serves a run, forking one process per command
handed to it (see agentrun.handoff for the caller's side).

It holds a lock beside its socket for as long as it lives, so one runs per interpreter and agentrun
install. It stops after IDLE_S without a command, and when agentrun's files or the installed packages
have changed since it loaded them: it then says so to the caller, which runs the command itself and
starts a new one. It forks before anything has started a thread (Temporal's runtime starts its own
when the first client connects, in the fork), and it only takes commands from its own user.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from agentrun import caller as callers
from agentrun import forkservers, startup

IDLE_S = 30 * 60
REQUEST_TIMEOUT_S = 5.0
# What `start`, `fork` and `watch --worker` import before their first prompt, from the command
# line to the worker; each command imports anything else itself.
PRELOADED = (
    "agentrun.cli",
    "agentrun.explain.prepare",
    "agentrun.cli.starting",
    "agentrun.client.engine",
    "agentrun.explain.report",
    "agentrun.cli.interrupts",
    "agentrun.activities.agents.agentapi",
    "agentrun.worker.build",
    "agentrun.worker.terminal_log",
    "agentrun.lang.load",
)


def main() -> None:
    path = forkservers.socket_path()
    unserved = None
    with _only_server(path) as lock:
        if lock is None:
            return
        with startup.loading():
            _preload()
        if len(os.listdir("/proc/self/task")) > 1:  # any thread, Python's or a library's
            raise RuntimeError("a thread started while loading: forking now would not be safe")
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with _listening(path) as listener:
            unserved = _serve(listener, _fingerprint(), lock)
    if unserved:  # told only now that the lock and socket are free, so the caller can start a new server
        with unserved:
            unserved.sendall(b'{"stale": true}\n')


def _preload() -> None:
    from agentrun.lang import dialects, ir

    ir.build_models()
    for name in PRELOADED:
        importlib.import_module(name)
    for dialect in dialects.DIALECTS:  # the loader imports a compiler for the file it reads
        importlib.import_module(f"{dialect.__name__}.compiler")


@contextlib.contextmanager
def _only_server(path: Path) -> Iterator[int | None]:
    """The lock's fd while this is the only server, else None."""
    with open(forkservers.lock_path(path), "a") as lock:
        if not _locked(lock):
            yield None
            return
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        yield lock.fileno()


def _locked(lock: io.TextIOWrapper, tries: int = 5) -> bool:
    """Take the lock, unless another server holds it; a caller asking who holds it (forkservers.server_pid)
    holds it for an instant."""
    for _ in range(tries):
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.02)
    return False


@contextlib.contextmanager
def _listening(path: Path) -> Iterator[socket.socket]:
    path.unlink(missing_ok=True)  # left by a server that was killed; we hold the lock
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(16)
        listener.settimeout(IDLE_S)
        yield listener
    finally:
        path.unlink(missing_ok=True)
        listener.close()


def _serve(listener: socket.socket, loaded: tuple[int, ...], lock: int) -> socket.socket | None:
    """Fork for each command until idle for IDLE_S (None), or until a caller finds agentrun's files
    changed since they were loaded (that caller's connection)."""
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return None
        pid, uid = _peer(conn)
        if uid != os.getuid():
            conn.close()
            continue
        if _fingerprint() != loaded:
            return conn
        with conn:
            try:
                request, fds = _read_request(conn)
            except (OSError, ValueError):
                continue
            if os.fork() == 0:
                listener.close()
                os.close(lock)  # a fork that runs for hours must not keep the next server from starting
                _run(conn, request, fds, pid)
            for fd in fds:
                os.close(fd)


def _peer(conn: socket.socket) -> tuple[int, int]:
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(REQUEST_TIMEOUT_S)
    _tag, fds, _flags, _addr = socket.recv_fds(conn, 1, 3)
    if len(fds) != 3:
        raise ValueError("a request comes with the three standard streams")
    line = conn.makefile("rb").readline()
    conn.settimeout(None)
    return json.loads(line), fds


def _fingerprint() -> tuple[int, ...]:
    """Changes when a file of agentrun (code, templates, schemas) changes or a package is installed
    or removed; bytecode caches are not its files."""
    newest, count = 0, 0
    for folder, dirs, files in os.walk(forkservers.PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
            count += 1
    sites = {p for p in sys.path if p.endswith("-packages") and os.path.isdir(p)}
    return (newest, count, *sorted(os.stat(p).st_mtime_ns for p in sites))


def _run(conn: socket.socket, request: dict, fds: list[int], caller: int) -> None:
    """In the fork: become the caller's command, run it, send its exit code, and leave."""
    callers.caller = caller
    try:
        _take_over(request, fds)
    except Exception:
        os._exit(1)  # before its pid is sent: the caller runs the command itself (a folder gone, …)
    threading.Thread(target=_end_with_caller, args=(conn,), daemon=True).start()
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    code = 1
    try:
        from agentrun import cli

        code = cli.finish(lambda: cli.run_as(request["entry"], request["argv"]))
    except BaseException:
        traceback.print_exc()  # as Python would print it in the caller's own process
    finally:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
        os._exit(code)


def _take_over(request: dict, fds: list[int]) -> None:
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in request["ignored"]:
        signal.signal(signum, signal.SIG_IGN)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin, sys.stdout, sys.stderr = (_stream(fd, s) for fd, s in enumerate(request["streams"]))
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = ["agentrun", *request["argv"]]
    sys.path[:] = request["path"]
    importlib.invalidate_caches()


def _stream(fd: int, how: dict) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered,  # type: ignore[arg-type]
        encoding=how["encoding"],
        errors=how["errors"],
        line_buffering=how["line_buffering"],
        write_through=how["write_through"],
    )


def _end_with_caller(conn: socket.socket) -> None:
    """The caller sends nothing more: when its end closes, it has exited or was killed, and the
    command ends with it, as it would have in the caller's own process."""
    with contextlib.suppress(OSError):
        while conn.recv(64):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
