"""kill -9 of a worker in the middle of a run: a new worker finishes it, and no completed task is re-sent."""

from __future__ import annotations

import json

from tests.conftest import run_id, sigkill, start_worker, wait_for, watch_with_new_worker, write_spec
from tests.fakes.agentapi_server import FakeAgentAPI
from tests.runs import SHELL_BRAIN, sh

QUEUE = "crash-tests"


def test_sigkill_mid_run_then_a_new_worker_completes_it(cli, address, tmp_path):
    tasks = ["t1", "t2", "t3", "t4"]
    body = "\n".join(f"  {t}: {{instructions: {sh('echo done-' + t)}}}" for t in tasks)
    spec = write_spec(tmp_path, f"name: crash\nsubtasks:\n{body}\n")
    rid = run_id("crash")
    with FakeAgentAPI(command=SHELL_BRAIN, busy_s=1.5, cwd=str(tmp_path)) as agent:
        first = start_worker(address, "--task-queue", QUEUE)
        started = cli(
            "start", str(spec), "--agent", f"agentapi:{agent.url}", "--id", rid, "--task-queue", QUEUE, "--detach"
        )
        assert started.code == 0, started.err
        wait_for(lambda: len(agent.received) >= 2)  # t2 is with the agent now
        sigkill(first)
        watched = watch_with_new_worker(cli, address, QUEUE, rid)
        sent = [next(t for t in tasks if f"done-{t}" in prompt) for prompt in agent.received]
    assert watched.code == 0, watched.out + watched.err
    assert "- Status: COMPLETE" in watched.out
    assert sent.count("t1") == 1 and sent.count("t3") == 1 and sent.count("t4") == 1
    assert sent.count("t2") in (1, 2)  # only the task in flight at the kill may be sent again
    assert sent.index("t3") > max(i for i, t in enumerate(sent) if t == "t2")
    status = json.loads(cli("status", rid, "--json").out)
    assert [t["status"] for t in status["tasks"]] == ["completed"] * 4
