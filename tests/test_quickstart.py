"""The README's first command on a machine with no Temporal: the embedded dev server comes up,
the quickstart completes offline, and its run survives a restart of that server. The server gets
ports of its own, so the test runs beside one a person started with that command."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from agentrun.worker import embedded
from tests.conftest import ROOT, alive


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER_PORT, UI_PORT = _free_port(), _free_port()


def _client(*args: str, cwd, state) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    environ["AGENTRUN_STATE_DIR"] = str(state)
    environ["AGENTRUN_SERVER_PORT"], environ["AGENTRUN_TEMPORAL_UI_PORT"] = str(SERVER_PORT), str(UI_PORT)
    return subprocess.run(
        [sys.executable, "-m", "agentrun.client", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _stop_server(state) -> None:
    """Stop the embedded server and wait until its process is gone: a server that has closed its
    ports may still hold its SQLite database for a while, and the next one would find it locked."""
    pid_file = state / "temporal.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 30
        while (embedded.listening(port=SERVER_PORT) or alive(pid)) and time.monotonic() < deadline:
            time.sleep(0.1)


@pytest.mark.quick
def test_quickstart_runs_offline_on_the_embedded_server(tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("quickstart-work"))
    state = tmp_path / "state"
    try:
        first = _client("start", "examples/quickstart.yaml", cwd=tmp_path, state=state)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "started the embedded Temporal dev server" in first.stderr
        run_id = re.search(r"run (\S+) started", first.stdout).group(1)
        assert f"Temporal Web: http://localhost:{UI_PORT}/namespaces/default/workflows/{run_id}" in first.stdout
        assert "- Status: COMPLETE" in first.stdout and "packaged" in first.stdout
        assert (tmp_path / "examples" / "quickstart-work" / "calc.tar.gz").exists()
        assert (state / "temporal.db").exists()

        _stop_server(state)  # the run must outlive the server process that ran it
        after = _client("status", run_id, cwd=tmp_path, state=state)
        assert after.returncode == 0, after.stderr
        assert f"{run_id}: COMPLETE" in after.stdout
        assert "started the embedded Temporal dev server" in after.stderr
    finally:
        _stop_server(state)
