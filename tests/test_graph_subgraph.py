"""A bundle's subgraph runs as a Temporal child workflow of its own: its memory mapped in and out,
its undos joining the parent's stack when it completes, its own rollback before the parent's when it
fails, and a worker killed while it runs costing no finished child step a second prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrun.client.runs import fetch_state
from agentrun.explain.report import to_markdown
from tests.conftest import run_id, sigkill, start_worker, wait_for, watch_with_new_worker, write_spec
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")


def undo(name: str) -> dict:
    return {
        "tool_id": "shell.run",
        "params": {"argv": ["sh", "-c", f'echo "undo {name} $0" >> undone.txt', "{{ output }}"]},
    }


TRIP = {
    "manifest": {"name": "trip", "version": "1.0.0"},
    "graph": {
        "id": "main",
        "name": "trip",
        "description": "Book a trip",
        "inputs": {"city": {"schema": {"type": "string"}}, "budget": {"schema": {"type": "string"}}},
        "nodes": [
            {
                "id": "book",
                "type": "agent",
                "agent_id": "booker",
                "read_keys": ["city"],
                "write_keys": ["booking"],
                "requires_compensation": True,
                "compensation": undo("book"),
            },
            {
                "id": "trip",
                "type": "subgraph",
                "failure_policy": {"max_retries": 1},
                "subgraph_config": {
                    "subgraph_id": "stay",
                    "input_mapping": {"city": "place"},
                    "output_mapping": {"hotel": "booked_hotel"},
                },
            },
            {
                "id": "check",
                "type": "verifier",
                "failure_policy": {"max_retries": 1},
                "verifier_config": {
                    "type": "expression",
                    "expression": "memory.booked_hotel == 'Grand'",
                    "throw_on_fail": True,
                },
            },
        ],
        "edges": [{"source": "book", "target": "trip"}, {"source": "trip", "target": "check"}],
        "start_node": "book",
        "end_nodes": ["check"],
    },
    "graphs": [
        {
            "id": "stay",
            "name": "stay",
            "description": "Find a hotel",
            "nodes": [
                {
                    "id": "hotel",
                    "type": "agent",
                    "agent_id": "hotelier",
                    "read_keys": ["place", "city"],
                    "write_keys": ["hotel"],
                    "requires_compensation": True,
                    "compensation": undo("hotel"),
                },
                {
                    "id": "confirm",
                    "type": "verifier",
                    "failure_policy": {"max_retries": 1},
                    "verifier_config": {
                        "type": "jsonpath",
                        "target_key": "hotel",
                        "path": "$",
                        "assertion": {"op": "matches", "pattern": "^[A-Z]"},
                        "throw_on_fail": True,
                    },
                },
            ],
            "edges": [{"source": "hotel", "target": "confirm"}],
            "start_node": "hotel",
            "end_nodes": ["confirm"],
        }
    ],
}
AGENTS = {"booker": "openai:booker", "hotelier": "openai:hotelier"}


async def _trip(client, llm, folder: Path, hotel: str):
    folder.mkdir()
    llm.by_model = {"booker": "Booked", "hotelier": hotel}
    spec = write_spec(folder, json.dumps(TRIP, indent=2), "trip.json")
    state = await run_spec(client, spec, "openai:none", params={"city": "Oslo", "budget": "shoestring"}, agents=AGENTS)
    child_id = f"{state.run_id}--trip-1"
    return state, await fetch_state(client, child_id), child_id


def _undone(folder: Path) -> list[str]:
    return (folder / "undone.txt").read_text().splitlines()


async def test_a_subgraph_runs_as_a_child_run_and_its_undos_join_the_parents_stack(client, llm, tmp_path):
    state, child, child_id = await _trip(client, llm, tmp_path / "later", "Hilton")
    assert state.status == "compensated", "the parent's check failed after the child completed"
    assert child.status == "completed" and child.parent_run == state.run_id
    assert child.memory["place"] == "Oslo" and "budget" not in child.memory, "only what input_mapping names"
    assert '"place": "Oslo"' in llm.prompts_for("hotelier")[0] and "shoestring" not in llm.prompts_for("hotelier")[0]
    assert state.memory["booked_hotel"] == "Hilton" and "hotel" not in state.memory, "output_mapping's name"
    assert _undone(tmp_path / "later") == ["undo hotel Hilton", "undo book Booked"], "the child's undo first"
    assert [(c.action_id, c.status) for c in state.compensations] == [
        ("subgraph:trip:hotel", "completed"),
        ("book", "completed"),
    ]
    described = await client.get_workflow_handle(child_id).describe()
    assert described.workflow_type == "AgentRun" and described.parent_id == state.run_id
    report = to_markdown(state)
    assert f"| ↳ run {child_id} | graph stay | SUCCESS |" in report
    assert f"- Subgraph trip ran graph stay as run {child_id}: COMPLETE" in report
    assert "- Node runs: 5 (book ×1, trip ×1, check ×1, hotel-undo ×1, book-undo ×1)" in report, "not main, the graph"
    assert f"- Part of run: {state.run_id}" in to_markdown(child)


async def test_a_failed_subgraph_undoes_its_own_work_then_the_parent_undoes_its_own(client, llm, tmp_path):
    state, child, child_id = await _trip(client, llm, tmp_path / "failed", "nowhere")
    assert child.status == "compensated" and [c.action_id for c in child.compensations] == ["hotel"]
    assert state.status == "compensated"
    assert _undone(tmp_path / "failed") == ["undo hotel nowhere", "undo book Booked"]
    assert [c.action_id for c in state.compensations] == ["book"], "the child's undo ran once, in the child"
    assert state.errors[-1].startswith(
        f"trip: subgraph 'stay' (run {child_id}) ended compensated: rolled back after task confirm failed: "
        "verification failed"
    )
    assert "check" not in state.node_runs
    assert f"| ↳ run {child_id} | graph stay | ROLLED BACK |" in to_markdown(state)


CRASH = {
    "manifest": {"name": "relay", "version": "1.0.0"},
    "graph": {
        "id": "main",
        "name": "relay",
        "description": "Pass the baton",
        "nodes": [
            {"id": "p1", "type": "agent", "agent_id": "p1", "write_keys": ["a"]},
            {
                "id": "leg",
                "type": "subgraph",
                "read_keys": ["a"],
                "subgraph_config": {"subgraph_id": "legs", "input_mapping": {"a": "a"}, "output_mapping": {"d": "d"}},
            },
            {"id": "p2", "type": "agent", "agent_id": "p2", "read_keys": ["d"], "write_keys": ["e"]},
        ],
        "edges": [{"source": "p1", "target": "leg"}, {"source": "leg", "target": "p2"}],
        "start_node": "p1",
        "end_nodes": ["p2"],
    },
    "agents": [{"id": name, "model": name} for name in ("p1", "c1", "c2", "c3", "p2")],
    "graphs": [
        {
            "id": "legs",
            "name": "legs",
            "nodes": [
                {"id": "c1", "type": "agent", "agent_id": "c1", "read_keys": ["a"], "write_keys": ["b"]},
                {"id": "c2", "type": "agent", "agent_id": "c2", "read_keys": ["b"], "write_keys": ["c"]},
                {"id": "c3", "type": "agent", "agent_id": "c3", "read_keys": ["c"], "write_keys": ["d"]},
            ],
            "edges": [{"source": "c1", "target": "c2"}, {"source": "c2", "target": "c3"}],
            "start_node": "c1",
            "end_nodes": ["c3"],
        }
    ],
}


def test_a_worker_killed_inside_a_subgraph_the_run_completes_without_repeating_finished_child_steps(
    cli, address, llm, tmp_path
):
    llm.by_model = {name: f"{name} done" for name in ("p1", "c1", "c2", "c3", "p2")}
    queue, rid = run_id("subgraph-crash-q"), run_id("relay")
    spec = write_spec(tmp_path, json.dumps(CRASH, indent=2), "relay.json")
    held = llm.hold("c2")
    first = start_worker(address, "--task-queue", queue)
    try:
        started = cli("start", str(spec), "--id", rid, "--task-queue", queue, "--detach")
        assert started.code == 0, started.err
        wait_for(lambda: llm.in_flight("c2") == 1)  # the child run is at its second step
        sigkill(first)
    finally:
        if first.poll() is None:
            sigkill(first)
        held.set()
    watched = watch_with_new_worker(cli, address, queue, rid)
    assert watched.code == 0, watched.out + watched.err
    assert "- Status: COMPLETE" in watched.out
    counts = {name: len(llm.prompts_for(name)) for name in ("p1", "c1", "c2", "c3", "p2")}
    assert counts == {"p1": 1, "c1": 1, "c2": 2, "c3": 1, "p2": 1}, "only the step in flight at the kill again"
    assert "c3 done" in llm.prompts_for("p2")[0], "what the child made reached the parent"
    report = cli("report", rid).out
    assert f"| ↳ run {rid}--leg-1 | graph legs | SUCCESS |" in report
    child = cli("report", f"{rid}--leg-1").out
    assert "- Status: COMPLETE" in child and f"- Part of run: {rid}" in child
