"""What the terminal shows when things go wrong: a line per retry and no traceback from the worker
`start` runs in its own process (the detail goes to a log file it names), one line per failure from
`python -m worker`, a quiet exit when the reader of the output goes away, and Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SHELL_AGENT, _cli_env, run_id, start_worker, write_spec

ONE_TASK = "name: lonely\nsubtasks:\n  build: {instructions: Build it.}\n"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_agent_shows_a_line_per_retry_and_the_detail_goes_to_a_named_log(cli, tmp_path):
    spec = write_spec(tmp_path, ONE_TASK)
    queue = run_id("q-unreachable")  # no worker polls it: `start` runs one in-process
    result = cli("start", str(spec), "--agent", f"agentapi:http://127.0.0.1:{_closed_port()}", "--task-queue", queue)
    lines = (result.out + result.err).splitlines()
    assert result.code == 1
    assert "Traceback" not in result.out + result.err
    retries = [line for line in lines if line.startswith("  ↺ build: agent 'default' unreachable, retry ")]
    # A poll may miss the first one-second window under load; the others are each seconds long.
    assert 3 <= len(retries) <= 4 and "retry 4 of 4 in 8s (agentapi: ConnectError" in retries[-1]
    assert len(lines) < 45  # the report is most of it; before, 15 tracebacks made it ~500
    log = Path(re.search(r"full detail in (\S+\.log)", result.out).group(1))
    assert log.parent == tmp_path / "state" / "logs" and "Traceback" in log.read_text()

    failing = cli("start", str(spec), "--agent", "command:false", "--task-queue", queue)
    assert failing.code == 1 and "✗ build failed: command 'false' exited with code 1" in failing.out
    assert "Traceback" not in failing.out + failing.err


def test_the_worker_logs_a_line_per_failure_and_tracebacks_only_when_verbose(cli, address, tmp_path):
    spec = write_spec(tmp_path, ONE_TASK)
    for verbose in (False, True):
        queue, log = run_id("q-worker-log"), tmp_path / f"worker-{verbose}.log"
        worker = start_worker(address, "--task-queue", queue, *(["--verbose"] if verbose else []), log=log)
        try:
            assert cli("start", str(spec), "--agent", "command:false", "--task-queue", queue).code == 1
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        text = log.read_text()
        assert ("Traceback" in text) is verbose
        if not verbose:
            (line,) = [line for line in text.splitlines() if "run_agent" in line]
            assert re.fullmatch(
                r"\d\d:\d\d:\d\d WARNING run_agent attempt 1 of run lonely-\w+: failed: .*command 'false' exited "
                r"with code 1: \(no stderr\)",
                line,
            )


def test_output_cut_short_by_its_reader_exits_quietly(cli, address, tmp_path):
    rid = run_id("pipe")
    spec = write_spec(tmp_path, ONE_TASK.replace("Build it.", '"```sh\\necho built\\n```"'))
    assert cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", run_id("q-pipe")).code == 0
    # `status --json | head -1`, with the reader gone before anything is written
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrun.client", "status", rid, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_cli_env(address, tmp_path),
        cwd=ROOT,
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""


HELD = """\
name: held
subtasks:
  ship:
    approval: {prompt: "Ship it?"}
    instructions: "```sh\\necho shipped\\n```"
"""


def _interrupt(address: str, tmp_path: Path, *args: str, presses: int, after: str) -> tuple[int, str, str]:
    """Run the CLI as from a terminal, press Ctrl-C `presses` times once `after` is printed."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "agentrun.client", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_cli_env(address, tmp_path),
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell's foreground job
    )
    out = ""
    while after not in out:
        line = proc.stdout.readline()
        assert line, f"the CLI ended before printing {after!r}: {out}{proc.stderr.read()}"
        out += line
    for _ in range(presses):
        os.kill(proc.pid, signal.SIGINT)
    more, err = proc.communicate(timeout=60)
    return proc.returncode, out + more, err


def test_ctrl_c_names_the_run_and_says_nothing_runs_it_when_its_worker_was_in_this_process(cli, address, tmp_path):
    spec, queue = write_spec(tmp_path, HELD), run_id("q-held")
    for presses in (1, 2):
        rid = run_id("held")
        args = ("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", queue)
        code, out, err = _interrupt(address, tmp_path, *args, presses=presses, after="? ship: Ship it?")
        assert code == 130 and "Traceback" not in out + err
        assert f"interrupted: run {rid} stays in Temporal, but the worker in this process has stopped" in err
        assert f"hint: go on with `python -m client watch {rid} --worker`" in err
        assert f"python -m worker --task-queue {queue}" in err
