"""Run isolation: the worker `start` runs in its own process executes its own run only, so a run's
prompts go to the endpoint (and under the key) of the terminal that started it; a standalone worker
polling the queue serves every run started there; and a run whose `start` was killed is taken up
again by `watch RUN --worker` without asking again what had finished.

Real client processes as a user types them, each with its own fake OpenAI server in OPENAI_BASE_URL,
and a real `python -m worker` process for the shared case."""

from __future__ import annotations

import socket
import subprocess

from tests.conftest import ENDPOINT_KEY as KEY
from tests.conftest import run_id, sigkill, start_worker, wait_for, write_spec
from tests.fakes.openai_server import FakeOpenAI

DONE = "COMPLETION_STATUS: COMPLETE"
STEPS = ("one", "two", "three")


def spec_text(name: str) -> str:
    tasks = "\n".join(f'  {step}:\n    instructions: "{name} step {step}."' for step in STEPS)
    return f"name: {name}\nsubtasks:\n{tasks}\n"


def firsts(server: FakeOpenAI) -> list[str]:
    """The first line of every prompt the server was sent, in order."""
    return [prompt.splitlines()[0] for prompt in server.prompts_for("writer")]


def said(name: str) -> list[str]:
    return [f"{name} step {step}." for step in STEPS]


def endpoint(server: FakeOpenAI) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY}


def start(cli_process, tmp_path, name: str, queue: str, server: FakeOpenAI) -> tuple[str, subprocess.Popen]:
    rid = run_id(name)
    spec = write_spec(tmp_path, spec_text(name), f"{name}.yaml")
    args = ("start", str(spec), "--agent", "openai:writer", "--id", rid, "--task-queue", queue)
    return rid, cli_process(*args, extra_env=endpoint(server))


def finished(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    return out


def test_two_starts_at_once_each_run_only_on_its_own_worker(cli_process, tmp_path, servers):
    alpha, beta = servers
    queue = run_id("iso-q")  # the same queue name for both, and no standalone worker polls it
    held = [alpha.hold("writer"), beta.hold("writer")]
    a_id, a = start(cli_process, tmp_path, "alpha", queue, alpha)
    b_id, b = start(cli_process, tmp_path, "beta", queue, beta)
    # Both runs are with their agents at once: each start brought up a worker of its own.
    wait_for(lambda: alpha.in_flight("writer") == 1 and beta.in_flight("writer") == 1, timeout_s=60)
    for gate in held:
        gate.set()
    a_out, b_out = finished(a), finished(b)
    assert firsts(alpha) == said("alpha")
    assert firsts(beta) == said("beta")
    assert f"worker: this process, {a.pid}@{socket.gethostname()} (the run's own task queue '{queue}/{a_id}')" in a_out
    assert f"- Worker: {b.pid}@{socket.gethostname()}" in b_out


def test_a_standalone_worker_polling_the_queue_runs_both(cli_process, address, tmp_path, servers):
    alpha, beta = servers
    queue = run_id("shared-q")
    with FakeOpenAI(f"done\n{DONE}", api_key=KEY) as shared:
        worker = start_worker(address, "--task-queue", queue, env=endpoint(shared))
        try:
            a_id, a = start(cli_process, tmp_path, "alpha", queue, alpha)
            b_id, b = start(cli_process, tmp_path, "beta", queue, beta)
            a_out, b_out = finished(a), finished(b)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        assert sorted(firsts(shared)) == sorted(said("alpha") + said("beta"))
    assert firsts(alpha) == [] and firsts(beta) == []
    identity = f"{worker.pid}@{socket.gethostname()}"
    for out in (a_out, b_out):
        assert f"worker: {identity} (polling task queue '{queue}')" in out
        assert f"- Worker: {identity}" in out


def test_a_killed_start_is_resumed_by_watch_worker_asking_nothing_again(cli, cli_process, tmp_path, servers):
    alpha, _ = servers
    queue = run_id("iso-kill-q")
    gate = alpha.hold_prompt("step two")
    rid, started = start(cli_process, tmp_path, "alpha", queue, alpha)
    wait_for(lambda: alpha.in_flight("writer") == 1, timeout_s=60)  # step one done, two with the agent
    sigkill(started)
    gate.set()
    resumed = cli("watch", rid, "--worker", extra_env=endpoint(alpha))
    assert resumed.code == 0, resumed.out + resumed.err
    assert f"the run's own task queue '{queue}/{rid}'" in resumed.err
    assert "- Status: COMPLETE" in resumed.out
    sent = firsts(alpha)
    assert sent.count("alpha step one.") == 1 and sent.count("alpha step three.") == 1
    assert sent.count("alpha step two.") in (1, 2)  # only the step with the agent at the kill is asked again
    assert sent[-1] == "alpha step three."
    lines = {line.split()[0]: line for line in cli("status", rid).out.splitlines()[1:]}
    killed = f"{started.pid}@{socket.gethostname()}"
    assert lines["one"].endswith(f"worker={killed}")  # the worker of the start that was killed
    assert "worker=" in lines["three"] and not lines["three"].endswith(f"worker={killed}")
