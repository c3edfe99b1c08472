"""A graph cycle of any length keeps each Temporal execution's history short: the run continues as
new between two nodes, carrying its whole state, and `watch`, `status` and `report` on its id
follow the chain to its end."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from temporalio.api.enums.v1 import EventType

from agentrun.lang import params as spec_params
from agentrun.lang.load import load
from agentrun.models.contract import RunInput
from tests.conftest import TEST_QUEUE, run_id, write_spec
from tests.fakes.openai_server import Messages
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")
ROUNDS = 300
LIMIT = 300  # events per execution: past it, the run continues as new before its next node

COUNTER = f"""
name: counter
description: Count to {ROUNDS}, one prompt at a time
nodes:
  - {{id: count, type: agent, agent_id: counter, read_keys: [n], write_keys: [n]}}
  - {{id: check, type: router}}
edges:
  - {{source: count, target: check}}
  - {{source: check, target: count, condition: {{type: conditional, condition: "memory.n < {ROUNDS}"}}}}
start_node: count
end_nodes: [check]
max_iterations: {2 * ROUNDS + 10}
"""


def next_number(messages: Messages) -> str:
    """One more than the n the prompt shows the agent: the count only goes on if memory does."""
    seen = re.search(r'"n": (\d+)', messages[-1]["content"])
    return str(int(seen.group(1)) + 1 if seen else 1)


async def test_a_long_cycle_continues_as_new_and_keeps_every_history_short(client, llm, tmp_path, cli):
    llm.by_model = {"counter": next_number}
    plan = load(str(write_spec(tmp_path, COUNTER)), given_params=())
    inp = RunInput(
        plan=plan,
        params=spec_params.bind(plan, {}),
        workdir=str(tmp_path),
        default_agent="openai:counter",
        heartbeat_s=5,
        history_limit=LIMIT,
    )
    rid = run_id("counter")
    await client.start_workflow("AgentRun", inp, id=rid, task_queue=TEST_QUEUE)
    # `watch` follows the run by its id from one execution to the next, to the end.
    watched = await asyncio.to_thread(cli, "watch", rid, timeout=300)
    assert watched.code == 0, watched.out + watched.err
    assert "- Status: COMPLETE" in watched.out

    executions = [e async for e in client.list_workflows(f'WorkflowId = "{rid}"')]
    assert len(executions) > 1
    lengths = []
    for execution in executions:
        history = await client.get_workflow_handle(rid, run_id=execution.run_id).fetch_history()
        lengths.append(len(history.events))
        last = history.events[-1].event_type
        ended = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        assert last in (ended, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    assert max(lengths) <= LIMIT + 60, lengths  # the check comes before each node: one node past it at most
    assert sum(lengths) > 3 * LIMIT, "the whole run would not have fitted in one execution"

    prompts = llm.prompts_for("counter")
    assert len(prompts) == ROUNDS, "no node ran twice, none was skipped at a boundary"
    assert [json.loads(p.split("Input:\n", 1)[1])["n"] for p in prompts[1:]] == list(range(1, ROUNDS))

    report = cli("report", rid)
    assert report.code == 0
    assert f"- Temporal executions: {len(executions)} (the run continued as new {len(executions) - 1}" in report.out
    assert f"- Node runs: {2 * ROUNDS} (count ×{ROUNDS}, check ×{ROUNDS})" in report.out
    assert f"| n | {ROUNDS} |" in report.out
    assert [line.split()[:2] for line in cli("list").out.splitlines() if line.startswith(rid)] == [[rid, "COMPLETE"]]
    status = json.loads(cli("status", rid, "--json").out)
    assert status["status"] == "completed" and status["iteration_count"] == ROUNDS
    assert status["executions"] == len(executions)
    assert status["visited_nodes"].count("counter") == 1, "the graph itself was entered once"


UNDO = """
name: undo
nodes:
  - id: count
    type: agent
    agent_id: counter
    read_keys: [n]
    write_keys: [n]
    requires_compensation: true
    compensation: {tool_id: shell.run, params: {argv: [sh, -c, 'echo "undo $0" >> undone.txt', "{{ output }}"]}}
  - {id: check, type: router}
  - {id: fail, type: verifier, verifier_type: expression, expression: "memory.n > 5", throw_on_fail: true}
edges:
  - {source: count, target: check}
  - {source: check, target: count, condition: {type: conditional, condition: "memory.n < 5"}}
  - {source: check, target: fail}
start_node: count
end_nodes: [fail]
"""


async def test_the_compensation_stack_goes_on_into_the_next_execution(client, llm, tmp_path):
    llm.by_model = {"counter": next_number}
    state = await run_spec(client, write_spec(tmp_path, UNDO), "openai:counter", history_limit=30)
    assert state.status == "compensated", state.errors
    assert state.executions > 1
    assert (tmp_path / "undone.txt").read_text().splitlines() == [f"undo {n}" for n in range(5, 0, -1)]
    assert [(c.action_id, c.status) for c in state.compensations] == [("count", "completed")] * 5
    assert 'fail: verification failed: expression "memory.n > 5" evaluated falsy' in state.errors[0]
