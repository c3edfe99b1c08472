"""The fork servers' files, shared by the caller's side (agentrun.handoff) and `server status` /
`server stop` (agentrun.cli.server): where each server keeps its socket, its lock (which holds its
pid) and the note of the install it serves, and which servers run for this install.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parent


def socket_path() -> Path:
    """One fork server per interpreter and agentrun install, in a folder only this user can open."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    folder = Path(base) / f"agentrun-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    stat = folder.stat()
    if stat.st_uid != os.getuid() or stat.st_mode & 0o077:
        raise PermissionError(f"{folder} is not this user's alone")
    key = hashlib.sha256(f"{sys.executable}\0{PACKAGE}".encode()).hexdigest()[:16]
    return folder / f"forkserver-{key}.sock"


def lock_path(path: Path) -> Path:
    return path.with_suffix(".lock")


def server_pid(path: Path) -> int | None:
    """The pid of the fork server holding the lock beside `path` (loading, or serving), if one does."""
    with open(lock_path(path), "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            text = lock.read().strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(lock, fcntl.LOCK_UN)
        return None


def install_path(path: Path) -> Path:
    return path.with_suffix(".install")


class Running(NamedTuple):
    """A fork server of this install: its pid, the interpreter it runs and its socket."""

    pid: int
    python: str
    socket: Path


def this_installs_servers() -> list[Running]:
    """The fork servers running for this agentrun install, whatever interpreter runs each (the
    system's, a virtual environment's); never another install's."""
    current = socket_path()
    found = {current: sys.executable}
    for marker in current.parent.glob("forkserver-*.install"):
        try:
            about = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        if about.get("package") == str(PACKAGE):
            found[marker.with_suffix(".sock")] = str(about.get("python", ""))
    running = []
    for path, python in sorted(found.items()):
        pid = server_pid(path)
        if pid:  # 0: a server is taking the lock and has not written its pid yet
            running.append(Running(pid, python, path))
    return running


def stop(server: Running, timeout_s: float = 10) -> bool:
    """Stop a fork server (SIGTERM): it lets go of its lock and socket and exits; commands it already
    runs go on, each in its own process. True once it has exited."""
    try:
        os.kill(server.pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout_s
    while server_pid(server.socket) == server.pid or not _gone(server.pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _gone(pid: int) -> bool:
    """Has process `pid` exited? One its parent has not reaped yet (a zombie) has."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the pid is another user's process now
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
