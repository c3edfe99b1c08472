"""`server status` and `server stop`: what `start` leaves running in the background (the embedded
Temporal server, this install's fork server) is listed and stopped, and another install's fork
server on the same machine is left running. The embedded server and the fork servers get ports and
a runtime folder of their own, so the test runs beside the suite's and a person's."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, alive, wait_for, write_spec
from tests.test_quickstart import SERVER_PORT, UI_PORT, _stop_server

# A spec whose only step is a provider call: it needs no agent, so `start` is given none.
PROVIDER_ONLY = """name: note
subtasks:
  write:
    provider_call: {provider: shell, method: run, params: {command: "echo written > note.txt"}}
"""


@pytest.fixture
def runtime() -> Iterator[Path]:
    """The fork servers' folder: short, since a socket's path may not pass 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="ar-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _environ(tmp_path: Path, runtime: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "AGENTRUN_"))}
    environ.update(
        AGENTRUN_STATE_DIR=str(tmp_path / "state"),
        AGENTRUN_SERVER_PORT=str(SERVER_PORT),
        AGENTRUN_TEMPORAL_UI_PORT=str(UI_PORT),
        XDG_RUNTIME_DIR=str(runtime),  # the fork servers' sockets and locks
    )
    return environ


def _client(tmp_path: Path, runtime: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "client", *args],
        cwd=ROOT,
        env=_environ(tmp_path, runtime),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _another_install(runtime: Path) -> subprocess.Popen:
    """A fork server of another agentrun install (another checkout, another venv): it holds its own
    lock in the same folder, as a real one does, and says which install it is."""
    folder = runtime / f"agentrun-{os.getuid()}"
    folder.mkdir(mode=0o700)
    sock = folder / "forkserver-0123456789abcdef.sock"
    sock.with_suffix(".install").write_text(json.dumps({"package": "/elsewhere/agentrun", "python": sys.executable}))
    holder = (
        "import fcntl, os, sys, time\n"
        f"lock = open({str(sock.with_suffix('.lock'))!r}, 'a')\n"
        "fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "lock.truncate(0); lock.write(str(os.getpid())); lock.flush()\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


def test_server_status_and_stop_cover_this_installs_servers_and_leave_another_installs_alone(tmp_path, runtime):
    spec = write_spec(tmp_path, PROVIDER_ONLY)
    other = _another_install(runtime)
    state = tmp_path / "state"
    try:
        before = _client(tmp_path, runtime, "server", "status")
        assert before.returncode == 0, before.stderr
        assert before.stdout.splitlines() == [
            f"embedded Temporal server: not running (none started from {state})",
            "fork server: none running for this install",
        ]

        started = _client(tmp_path, runtime, "start", str(spec))  # no --agent: no step talks to one
        assert started.returncode == 0, started.stdout + started.stderr
        assert "- Status: COMPLETE" in started.stdout
        assert (tmp_path / "note.txt").read_text() == "written\n"
        server_pid = int((state / "temporal.pid").read_text())

        def fork_server_listed() -> bool:
            return "fork server: running" in _client(tmp_path, runtime, "server", "status").stdout

        wait_for(fork_server_listed, timeout_s=60, poll_s=0.5)
        status = _client(tmp_path, runtime, "server", "status").stdout.splitlines()
        assert status[0].startswith(f"embedded Temporal server: running, pid {server_pid}, 127.0.0.1:{SERVER_PORT}")
        assert f"Web UI http://localhost:{UI_PORT}" in status[0]
        assert len(status) == 2 and status[1].startswith("fork server: running, pid ")
        fork_pid = int(status[1].split("pid ")[1].split(",")[0])
        assert fork_pid not in (other.pid, server_pid)

        stopped = _client(tmp_path, runtime, "server", "stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert stopped.stdout.splitlines() == [
            f"embedded Temporal server: stopped (pid {server_pid}); its runs wait in its database for the next start",
            f"fork server: stopped (pid {fork_pid}, for {sys.executable})",
        ]
        assert not alive(server_pid) and not alive(fork_pid)
        assert other.poll() is None, "another install's fork server was stopped"

        after = _client(tmp_path, runtime, "server", "status")
        assert after.stdout.splitlines() == before.stdout.splitlines()
        assert _client(tmp_path, runtime, "server", "stop").stdout.splitlines() == [
            "embedded Temporal server: not running",
            "fork server: none running for this install",
        ]
    finally:
        other.kill()
        other.wait()
        _stop_server(state)
        for lock in runtime.rglob("forkserver-*.lock"):
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(lock.read_text() or "x"), signal.SIGTERM)
