"""kill -9 of the worker in the middle of a batched map: a new worker finishes the run, and no
element of a batch that had finished is sent to the agent again."""

from __future__ import annotations

import json
import re
from collections import Counter

from tests.conftest import run_id, sigkill, start_worker, wait_for, watch_with_new_worker, write_spec

SPEC = """workflow:
  name: crashmap
  inputs:
    - {name: items, type: json, required: true}
  agents:
    worker: {prompt: "<{{item}}>"}
    reducer: {prompt: "Combine."}
  steps:
    - id: each
      type: map
      map: {over: "{{inputs.items}}", agent: worker, reduce: reducer, concurrency: 10, batch: 10}
"""

# Logs each prompt, answers with it; from item 30 on it first waits for the file `go`, so that
# batches 0-2 have finished and batch 3 is with the agent when the worker is killed.
AGENT = """p=$(cat)
printf '%s' "$p" >> calls.log
n=${p#<}; n=${n%>}
if [ "$n" -ge 30 ]; then while [ ! -e go ]; do sleep 0.05; done; fi
printf '%s' "$p"
"""


def calls(folder) -> Counter[int]:
    path = folder / "calls.log"
    return Counter(int(n) for n in re.findall(r"<(\d+)>", path.read_text())) if path.exists() else Counter()


def test_sigkill_mid_map_then_a_new_worker_runs_no_finished_batch_again(cli, address, tmp_path):
    spec = write_spec(tmp_path, SPEC)
    (tmp_path / "agent.sh").write_text(AGENT)
    queue, rid = run_id("crashmap-q"), run_id("crashmap")
    items = json.dumps(list(range(60)))
    first = start_worker(address, "--task-queue", queue)
    started = cli(
        "start",
        str(spec),
        "-p",
        f"items={items}",
        "--agent",
        "command:sh agent.sh",
        "--agent",
        "reducer=command:cat",
        "--id",
        rid,
        "--task-queue",
        queue,
        "--detach",
    )
    assert started.code == 0, started.err
    wait_for(lambda: all(calls(tmp_path)[i] for i in range(30, 40)))  # batch 3 is with the agent
    sigkill(first)
    (tmp_path / "go").touch()
    watched = watch_with_new_worker(cli, address, queue, rid)
    assert watched.code == 0, watched.out + watched.err
    sent = calls(tmp_path)
    assert all(sent[i] == 1 for i in range(30)), sent  # batches that had finished: never again
    assert all(sent[i] in (1, 2) for i in range(30, 40)), sent  # in flight at the kill: maybe again
    assert all(sent[i] == 1 for i in range(40, 60)), sent
    status = json.loads(cli("status", rid, "--json").out)
    assert status["maps"]["each"]["counts"] == {"completed": 60} and status["maps"]["each"]["batches_done"] == 6
    assert [int(n) for n in re.findall(r"<(\d+)>", status["steps"]["each"]["output"])] == list(range(60))
