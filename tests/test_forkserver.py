"""The fork server: `start` hands itself to a process that has loaded Temporal's SDK, the workflows
and the activities, which forks one process per command. The fork is the command in all but its
pid: the caller's streams, environment and folder; killed with its caller; and a server whose files
changed on disk hands the command back and is replaced.

Real processes as a user starts them (the session's fork server, from conftest), read through /proc.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import agentrun
from agentrun import forkservers, handoff, launcher
from tests.conftest import ROOT, SHELL_AGENT, _cli_env, alive, run_id, sigkill, wait_for, write_spec
from tests.test_isolation import endpoint, firsts, said, start

OFF = {launcher.ENV: "off"}
HELD = 'name: held\nsubtasks:\n  ship:\n    approval: {prompt: "Ship it?"}\n    instructions: "```sh\\necho shipped\\n```"\n'
ONE_STEP = 'name: one\nsubtasks:\n  only:\n    instructions: "```sh\\necho done\\n```"\n'


def state(pid: int) -> str:
    """R, S, T (stopped), Z…, as `ps` shows it."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def forks_of(server: int) -> list[int]:
    """The processes the fork server has forked and that are still running."""
    forks = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError, PermissionError):
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == server and state != "Z":
            forks.append(int(entry.name))
    return forks


def fork_serving(server: int, caller: int) -> int:
    """The fork that runs the command of process `caller`: it writes to the same pipes."""
    streams = [os.readlink(f"/proc/{caller}/fd/{fd}") for fd in (1, 2)]
    found = [f for f in forks_of(server) if [os.readlink(f"/proc/{f}/fd/{fd}") for fd in (1, 2)] == streams]
    assert len(found) == 1, f"no fork of {server} writes to {streams}"
    return found[0]


def read_until(fd: int, text: str, timeout_s: float = 60) -> str:
    """What a terminal shows until `text` appears, or until the program on it has ended."""
    shown, deadline = "", time.monotonic() + timeout_s
    while text not in shown:
        assert time.monotonic() < deadline, f"the terminal never showed {text!r}:\n{shown}"
        if select.select([fd], [], [], 0.5)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: every process on the terminal has closed it
                return shown
            if not chunk:
                return shown
            shown += chunk.decode(errors="replace")
    return shown


def start_at_a_terminal(address: str, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, int]:
    """`start ARGS` as a person types it, its streams on a new terminal: the command, and the
    terminal's end to read what it shows and type into it (closed by the caller)."""
    terminal, side = pty.openpty()
    started = subprocess.Popen(
        [sys.executable, "-m", "agentrun.client", "start", *args],
        stdin=side,
        stdout=side,
        stderr=side,
        env=_cli_env(address, tmp_path),
        cwd=ROOT,
    )
    os.close(side)
    return started, terminal


def environ(pid: int) -> dict[str, str]:
    """The environment process `pid` was started with."""
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


def test_start_runs_in_a_fork_with_the_callers_streams_environment_and_folder(
    cli_process, tmp_path, forkserver, servers
):
    alpha, beta = servers
    server = forkservers.server_pid(forkserver)
    assert server
    queue = run_id("fs-q")
    held = [alpha.hold("writer"), beta.hold("writer")]
    _, a = start(cli_process, tmp_path, "alpha", queue, alpha)
    _, b = start(cli_process, tmp_path, "beta", queue, beta)
    wait_for(lambda: alpha.in_flight("writer") == 1 and beta.in_flight("writer") == 1, timeout_s=60)
    for caller in (a, b):  # (each fork's environment shows in whose endpoint gets its prompts, below)
        fork = fork_serving(server, caller.pid)
        assert os.readlink(f"/proc/{fork}/cwd") == os.readlink(f"/proc/{caller.pid}/cwd") != "/"
        assert os.readlink(f"/proc/{fork}/fd/0") == os.readlink(f"/proc/{caller.pid}/fd/0")
    for gate in held:
        gate.set()
    for caller in (a, b):
        out, err = caller.communicate(timeout=120)
        assert caller.returncode == 0, out + err
        # "this process" is the command the user started, whose pid they see
        assert f"worker: this process, {caller.pid}@" in out and f"- Worker: {caller.pid}@" in out
    assert firsts(alpha) == said("alpha") and firsts(beta) == said("beta")


def test_a_start_killed_with_kill_9_takes_its_fork_with_it(cli_process, tmp_path, forkserver, servers):
    alpha, _ = servers
    server = forkservers.server_pid(forkserver)
    assert server
    alpha.hold("writer")
    _, started = start(cli_process, tmp_path, "alpha", run_id("fs-kill-q"), alpha)
    wait_for(lambda: alpha.in_flight("writer") == 1, timeout_s=60)
    fork = fork_serving(server, started.pid)
    sigkill(started)
    wait_for(lambda: not alive(fork), timeout_s=10)
    wait_for(lambda: alpha.in_flight("writer") == 0, timeout_s=10)  # its agent call went with it
    assert alive(server)


def test_ctrl_z_stops_the_fork_with_its_caller_and_both_go_on_together(address, tmp_path, forkserver, servers):
    alpha, _ = servers
    server = forkservers.server_pid(forkserver)
    assert server
    gate = alpha.hold("writer")
    spec = write_spec(tmp_path, "name: alpha\nsubtasks:\n  one:\n    instructions: alpha step one.\n")
    args = ("start", str(spec), "--agent", "openai:writer", "--task-queue", run_id("fs-stop-q"))
    started = subprocess.Popen(
        [sys.executable, "-m", "agentrun.client", *args],
        env=_cli_env(address, tmp_path, endpoint(alpha)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,  # a job of its own, as a shell starts it, so a stop signal stops it
    )
    try:
        wait_for(lambda: alpha.in_flight("writer") == 1, timeout_s=60)
        fork = fork_serving(server, started.pid)
        os.kill(started.pid, signal.SIGTSTP)  # Ctrl-Z
        wait_for(lambda: state(started.pid) == "T" and state(fork) == "T", timeout_s=10)
        os.kill(started.pid, signal.SIGCONT)  # fg
        wait_for(lambda: state(fork) != "T" and state(started.pid) != "T", timeout_s=10)
        gate.set()
        out, err = started.communicate(timeout=120)
        assert started.returncode == 0 and "- Status: COMPLETE" in out, out + err
    finally:
        gate.set()
        if started.poll() is None:
            sigkill(started)


def test_with_the_fork_server_off_start_runs_in_its_own_process(cli_process, tmp_path, forkserver, servers):
    alpha, _ = servers
    server = forkservers.server_pid(forkserver)
    assert server
    gate = alpha.hold("writer")
    rid = run_id("alpha")
    spec = write_spec(tmp_path, "name: alpha\nsubtasks:\n  one:\n    instructions: alpha step one.\n", "alpha.yaml")
    args = ("start", str(spec), "--agent", "openai:writer", "--id", rid, "--task-queue", run_id("fs-off-q"))
    started = cli_process(*args, extra_env={**endpoint(alpha), **OFF})
    wait_for(lambda: alpha.in_flight("writer") == 1, timeout_s=60)
    streams = os.readlink(f"/proc/{started.pid}/fd/1")
    assert all(os.readlink(f"/proc/{f}/fd/1") != streams for f in forks_of(server))
    assert len(os.listdir(f"/proc/{started.pid}/task")) > 1  # Temporal's runtime threads: the worker is here
    gate.set()
    out, err = started.communicate(timeout=120)
    assert started.returncode == 0, out + err


def test_mistakes_read_the_same_through_the_fork_server_as_in_a_process_of_their_own(cli, tmp_path):
    bad = write_spec(tmp_path, "name: bad\nsubtasks:\n  one:\n    instructions: x\n   two: y\n", "bad.yaml")
    for args in (("start",), ("start", str(tmp_path / "missing.yaml")), ("start", str(bad)), ("start", str(bad), "-x")):
        handed, here = cli(*args), cli(*args, extra_env=OFF)
        assert handed.code == here.code == 2
        assert (handed.out, handed.err) == (here.out, here.err) and here.err


def test_a_server_whose_files_changed_hands_the_command_back_and_a_new_one_starts(cli, tmp_path, forkserver):
    old = forkservers.server_pid(forkserver)
    assert old and handoff.ready(forkserver)
    changed = Path(agentrun.__file__).parent / "models" / "names.py"  # its text stays; only its time changes
    os.utime(changed, ns=(changed.stat().st_atime_ns, time.time_ns()))
    secret = {"OPENAI_API_KEY": "sk-" + run_id("secret")}
    result = cli("start", str(write_spec(tmp_path, ONE_STEP)), "--agent", SHELL_AGENT, extra_env=secret)
    assert result.code == 0 and "- Status: COMPLETE" in result.out, result.out + result.err
    wait_for(lambda: not alive(old), timeout_s=10)
    wait_for(lambda: handoff.ready(forkserver), timeout_s=60)  # the start that was handed back started it
    new = forkservers.server_pid(forkserver)
    assert new not in (None, old)
    assert "OPENAI_API_KEY" not in environ(new)  # it outlives the command, so it has no credentials


def test_a_person_answers_a_gate_at_the_terminal_the_fork_took_over(address, tmp_path, forkserver):
    server = forkservers.server_pid(forkserver)
    assert server
    spec = write_spec(tmp_path, HELD)
    started, terminal = start_at_a_terminal(
        address, tmp_path, str(spec), "--agent", SHELL_AGENT, "--task-queue", run_id("fs-tty-q")
    )
    try:
        asked = read_until(terminal, "Ship it?")
        fork = fork_serving(server, started.pid)  # it asks on the caller's terminal
        assert os.readlink(f"/proc/{fork}/fd/0") == os.readlink(f"/proc/{started.pid}/fd/0")
        os.write(terminal, b"approve\n")
        rest = read_until(terminal, "## Issues and Warnings")
        assert started.wait(timeout=60) == 0, asked + rest
        assert "- Status: COMPLETE" in rest and "shipped" in rest
    finally:
        if started.poll() is None:
            sigkill(started)
        os.close(terminal)
