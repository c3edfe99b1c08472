"""Recorded histories replay against today's workflow code: interpreter changes must not break runs."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer

from agentrun.client import executions
from agentrun.lang.load import load
from agentrun.models import calls
from agentrun.models.contract import RunInput
from agentrun.worker.blobs import data_converter
from agentrun.worker.build import WORKFLOWS, runner
from tests.conftest import HISTORIES, ROOT, SHELL_AGENT, TEST_QUEUE, run_id, write_spec
from tests.fakes.openai_server import ToolUse
from tests.runs import answer, finish, open_gate, prompts_out, run_spec, sh, start_spec
from tests.trees import action, composite

pytestmark = pytest.mark.usefixtures("worker")

# Recorded before the node registry, run keys and reply protocols (one task tree each).
SPECS = {
    name: (text, {})
    for name, text in {
        "chain": f"subtasks:\n  a: {{instructions: {sh('echo a')}}}\n  b: {{instructions: {sh('echo b')}}}\n",
        "loop": 'subtasks:\n  l: {instructions: "```sh\\nn=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; '
        '[ $n -ge 2 ] && echo COMPLETION_STATUS: DONE || echo COMPLETION_STATUS: CONTINUE\\n```", '
        "loop_until: {status: DONE, message: m}}\n",
        "criteria": f"subtasks:\n  c:\n    instructions: {sh('touch ran')}\n    success_criteria:\n"
        f"      python: result = False\n      max_retries: 1\n",
        "provider": "subtasks:\n  p: {provider_call: {provider: shell, method: run, params: {command: echo hi}}}\n",
    }.items()
}

_JSON_AGENT = 'command:sh -c \'cat >/dev/null; echo "{\\"items\\": [1, 2], \\"passed\\": true}"\''
# Recorded after it, one per language: a task tree whose task works and has subtasks, and a
# pipeline with a parallel fan-out, a map, a condition and a validated loop.
AFTER_SEAMS = {
    "task-tree": (
        f"""name: tree
subtasks:
  plan:
    instructions: {sh("echo plan")}
    store_as: planned
    subtasks:
      build:
        instructions: {sh("n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; [ $n -ge 1 ] && echo COMPLETION_STATUS: DONE || echo COMPLETION_STATUS: CONTINUE")}
        loop_until: {{status: DONE}}
  check:
    provider_call: {{provider: shell, method: run, params: {{command: echo checked}}}}
""",
        {},
    ),
    "pipeline": (
        """workflow:
  name: pipe
  agents:
    lister: {prompt: "List two items as JSON."}
    worker: {prompt: "Work on {{ input }}."}
    judge: {prompt: "Judge it as JSON."}
  steps:
    - {id: list, agent: lister, output: {format: json}}
    - id: both
      type: parallel
      parallel: [{agent: worker, output_key: a}, {agent: judge, output_key: b}]
    - {id: each, type: map, map: {over: "{{ steps.list.output.items }}", agent: worker}}
    - id: route
      type: conditional
      condition: {eval: "{{ steps.list.output.passed }} == true", true: worker}
    - {id: polish, type: loop, loop: {agent: worker, validator: judge, max_iterations: 2}}
""",
        {"lister": _JSON_AGENT, "judge": _JSON_AGENT, "worker": "command:sh -c 'cat; echo worked'"},
    ),
}


def _replayer(strict: bool = True) -> Replayer:
    """Strict: our workflow code sandboxed too, so a clock or I/O call in it fails the replay (≈ 2 s
    a history, its models built again inside the sandbox); else as the worker runs it."""
    return Replayer(workflows=WORKFLOWS, data_converter=data_converter(), workflow_runner=runner(strict=strict))


async def _replays(name: str, history: WorkflowHistory, tmp_path: Path) -> None:
    """The history of a run made now replays on this code; kept as histories/NAME.json when asked."""
    if name in _to_record():
        (HISTORIES / f"{name}.json").write_text(_scrub(history.to_json(), tmp_path))
    result = await _replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, (name, result.replay_failure)


async def test_histories_recorded_now_replay(client, tmp_path):
    for name, (text, agents) in {**SPECS, **AFTER_SEAMS}.items():
        folder = tmp_path / name
        folder.mkdir()
        state = await run_spec(client, write_spec(folder, text), SHELL_AGENT, agents=agents)
        assert name in SPECS or state.status == "completed", (name, state.errors)
        await _replays(name, await client.get_workflow_handle(state.run_id).fetch_history(), tmp_path)


def _to_record() -> set[str]:
    """AGENTRUN_RECORD_HISTORIES=name,name records those histories anew; histories of earlier code
    are never recorded again, since replaying them is what proves old runs still go on."""
    return set(filter(None, os.environ.get("AGENTRUN_RECORD_HISTORIES", "").split(",")))


GATED = (
    f"subtasks:\n  a:\n    instructions: {sh('echo a')}\n    compensate: {sh('echo undo a')}\n"
    f"  b:\n    approval: true\n    instructions: {sh('echo b')}\n"
)


async def _at_gate(client: Client, tmp_path: Path, text: str, name: str) -> WorkflowHandle:
    """A run of `text` on the shell agent, started and waiting at its gate `b`."""
    plan = load(str(write_spec(tmp_path, text, f"{name}.yaml")), given_params=())
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent=SHELL_AGENT, heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id(name), task_queue=TEST_QUEUE)
    await open_gate(handle, "b")
    return handle


async def test_a_run_a_person_rejected_and_that_rolled_back_replays(client, tmp_path):
    """Updates, the gate's wait and the compensation stack are all replayed from history."""
    handle = await _at_gate(client, tmp_path, GATED, "gated")
    await answer(handle, "b", "reject")
    state = await finish(client, handle)
    assert state.status == "compensated"
    history = await handle.fetch_history()
    await _replays("gated", history, tmp_path)


# Recorded after steering notes, idempotency keys and budget reservations: a provider call that
# heartbeats, prompts reserving under a token budget, and a note a person said while a gate was open.
STEERED = (
    "budget: {tokens: 100000}\nsubtasks:\n"
    "  p: {provider_call: {provider: shell, method: run, params: {command: echo hi}}}\n"
    f"  b:\n    approval: true\n    instructions: {sh('echo b')}\n"
)


async def test_a_run_a_person_steered_under_a_budget_replays(client, tmp_path):
    handle = await _at_gate(client, tmp_path, STEERED, "steered")
    await handle.execute_update("say", {"text": "Mind the tests.", "by": "ana"})
    await answer(handle, "b", "approve")
    state = await finish(client, handle)
    assert state.status == "completed" and state.notes[0].delivered_to == "b"
    history = await handle.fetch_history()
    await _replays("steered", history, tmp_path)


# Recorded after the checkpoint protocol: an Agentfile whose supervised goal is reoriented once by
# its supervisor, then let go on; whose -> output a later goal reads; and a CONVERGE goal that takes
# two rounds. Its agents, the supervisor too, are one script (replies by goal and turn), so that it
# can be recorded again as it was.
AGENTFILE = """NAME recorded
GOAL build "Build the site" -> site SUPERVISED
CONVERGE polish "Polish $site" WITHIN 3
RUN main USING build, polish
"""
_PRE = json.dumps(
    {
        "interpretation": "i",
        "scope_in": [],
        "scope_out": [],
        "approach": "a",
        "predictions": [],
        "assumptions": [],
        "confidence": 0.9,
    }
)


def _post(output: object, *concerns: str) -> str:
    return json.dumps({"output": output, "commitment_met": "yes", "scope_changed": False, "concerns": list(concerns)})


SCRIPT = {
    "tasks": {
        "main.build": [  # COMMIT, EXECUTE, SUPERVISE, EXECUTE, SUPERVISE: a concern each time, so both are judged
            _PRE,
            _post({"site": "a site"}, "no tests"),
            json.dumps({"verdict": "REORIENT", "correction": "Add tests.", "reason": "untested"}),
            _post({"site": "a tested site"}, "tests are slow"),
            json.dumps({"verdict": "CONTINUE", "correction": "", "reason": "slow is fine"}),
        ],
        "main.polish": [_PRE, _post("polished"), "CONVERGED\n" + _post("done")],
    }
}


async def test_a_supervised_agentfile_run_replays(client, tmp_path):
    (tmp_path / "script.yaml").write_text(json.dumps(SCRIPT))  # JSON is YAML
    agent = "scripted:script.yaml"  # relative to the run's workdir, so no path of ours is recorded
    state = await run_spec(client, write_spec(tmp_path, AGENTFILE, "Agentfile"), agent, agents={"supervisor": agent})
    assert state.status == "completed", state.errors
    # The run is what the recording claims to hold.
    verdicts = [(v.verdict, v.by) for a in state.supervision["main.build"].attempts for v in a.verdicts]
    assert verdicts == [("REORIENT", "agent supervisor"), ("CONTINUE", "agent supervisor")]
    assert state.memory["site"] == "a tested site" and state.tasks["main.polish"].iterations == 2
    handle = client.get_workflow_handle(state.run_id)
    prompts = await _prompts(handle)
    assert any("follow this now:\nAdd tests." in p for p in prompts)
    assert any("Goal main.polish:\nPolish a tested site" in p for p in prompts)
    history = await handle.fetch_history()
    await _replays("agentfile", history, tmp_path)


async def _prompts(handle: WorkflowHandle) -> list[str]:
    """The prompts the run sent its agents, as its history holds them."""
    sent = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name == calls.RUN_AGENT:
                sent.append(json.loads(attributes.input.payloads[0].data)["prompt"])
    return sent


# Recorded after behaviour trees, one per way a tree runs: walked by the engine, asking the local tree
# agent (retries on an action, a selector falling through, a parallel, $VAR writes), and driven by
# the agent over the run's updates (the protocol, running, var_write, a failed precondition in a
# selector, a think, a parallel).
TREE_AGENT = f"command:{sys.executable} {ROOT / 'examples' / 'agents' / 'tree_agent.py'}"
TREE = {
    "name": "recorded",
    "version": "1.0.0",
    "state": {"local": {"n": 0}, "global": {"limit": 2}},
    "tree": composite(
        "sequence",
        "Root",
        action(
            "Count",
            'instruct: Add one to $VAR.n.\n```sh\necho "\\$VAR.n = $((VAR_n + 1))"\n```',
            "evaluate: $VAR.n reached $CONST.limit.\n```sh\ntest $VAR_n -ge $CONST_limit\n```",
            retries=2,
        ),
        composite(
            "selector",
            "Pick",
            action("Never", "evaluate: never\n```sh\nfalse\n```"),
            action("Fallback", "instruct: ok\n```sh\necho ok\n```"),
        ),
        composite(
            "parallel",
            "Both",
            action("Left", "instruct: l\n```sh\necho l\n```"),
            action("Right", "instruct: r\n```sh\necho r\n```"),
        ),
    ),
}


async def test_behaviour_tree_runs_of_both_modes_replay(client, tmp_path):
    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps(TREE))
    walked = await run_spec(client, tree, TREE_AGENT)
    assert walked.status == "completed" and walked.memory == {"n": 2}, walked.errors
    assert [e.outcome for e in walked.trace][:4] == [
        "step_complete",
        "evaluation_failed",
        "step_complete",
        "evaluation_passed",
    ]
    address = f"traces/{run_id('recorded')}.json"
    await executions.start_execution(client, str(tree), address, TEST_QUEUE)
    for call in DRIVEN:
        await call(client, address)
    assert (await executions.resume_execution(client, address))["status"] == "complete"
    for name, run in (("tree", walked.run_id), ("tree-mcp", executions.execution_id(address))):
        history = await client.get_workflow_handle(run).fetch_history()
        await _replays(name, history, tmp_path)


# Recorded after long maps ran in batches: five items in batches of two, three child workflows open at
# once; the run's history and one batch's.
BATCHED = """workflow:
  name: batched
  agents:
    lister: {prompt: "List five items as JSON."}
    worker: {prompt: "Work on {{ item }}."}
    joiner: {prompt: "Join them."}
  steps:
    - {id: list, agent: lister, output: {format: json}}
    - {id: each, type: map, map: {over: "{{ steps.list.output.items }}", agent: worker, reduce: joiner, batch: 2}}
"""
_FIVE = 'command:sh -c \'cat >/dev/null; echo "{\\"items\\": [1, 2, 3, 4, 5]}"\''


async def test_a_batched_map_and_one_of_its_batches_replay(client, tmp_path):
    agents = {"lister": _FIVE, "worker": "command:sh -c 'cat; echo worked'", "joiner": "command:cat"}
    plan = load(str(write_spec(tmp_path, BATCHED)), given_params=())
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent=SHELL_AGENT, agents=agents, heartbeat_s=5)
    # The batches' ids come from the run's: it is replayed under the id it was recorded with.
    rid = "map-batches" if "map-batches" in _to_record() else run_id("map-batches")
    state = await finish(client, await client.start_workflow("AgentRun", inp, id=rid, task_queue=TEST_QUEUE))
    assert state.status == "completed", state.errors
    assert state.maps["each"].batches == 3 and state.steps["each"]["output"].count("worked") == 5
    for name, workflow_id in (("map-batches", rid), ("map-batch", f"{rid}/each/batch-1")):
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        await _replays(name, history, tmp_path)


async def test_a_note_handed_to_a_batch_replays(client, tmp_path):
    # Recorded after people's notes reached a long map's batches: the lister waits for the file `go`
    # while the note for the map is said, so the note is handed to batch 0 and carried by each[0].
    wait = "while [ ! -e go ]; do sleep 0.05; done; "
    lister = _FIVE.replace("sh -c '", f"sh -c '{wait}")
    agents = {"lister": lister, "worker": "command:sh -c 'cat; echo worked'", "joiner": "command:cat"}
    plan = load(str(write_spec(tmp_path, BATCHED)), given_params=())
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent=SHELL_AGENT, agents=agents, heartbeat_s=5)
    rid = "steered-batches" if "steered-batches" in _to_record() else run_id("steered-batches")
    handle = await client.start_workflow("AgentRun", inp, id=rid, task_queue=TEST_QUEUE)
    await prompts_out(handle, 1)  # the lister's
    await handle.execute_update("say", {"text": "Mind the tests.", "step": "each", "by": "ana"})
    (tmp_path / "go").touch()
    state = await finish(client, handle)
    assert state.status == "completed", state.errors
    assert [(n.delivered_to, n.delivered_turn) for n in state.notes] == [("each[0]", 1)]
    for name, workflow_id in (("steered-batches", rid), ("steered-batch", f"{rid}/each/batch-0")):
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        await _replays(name, history, tmp_path)


def _driven() -> list:
    x = executions
    return [
        x.next_step,
        lambda c, a: x.submit(c, a, "success", "read it"),
        x.next_step,
        lambda c, a: x.var_write(c, a, "n", 2),
        lambda c, a: x.submit(c, a, "running"),
        lambda c, a: x.submit(c, a, "success"),
        x.next_step,
        lambda c, a: x.think(c, a, "2 >= 2"),
        lambda c, a: x.eval_step(c, a, True),
        x.next_step,
        lambda c, a: x.eval_step(c, a, False, "never"),
        x.next_step,
        lambda c, a: x.submit(c, a, "success"),
        x.next_step,
        lambda c, a: x.submit(c, a, "success"),
        x.next_step,
        lambda c, a: x.submit(c, a, "success"),
        x.next_step,
    ]


DRIVEN = _driven()


async def test_a_graph_run_that_continued_as_new_replays(client, tmp_path):
    """Recorded after state graphs: the hub-and-spoke supervisor graph on its recorded replies, with
    a history limit so low that it continues as new every few nodes; its first execution and its
    last (which starts from the state the one before carried) are kept."""
    graphs = ROOT / "examples" / "graphs"
    spec = write_spec(tmp_path, (graphs / "hub_and_spoke.yaml").read_text(), "graph.yaml")
    (tmp_path / "replies.yaml").write_text((graphs / "hub_and_spoke.replies.yaml").read_text())
    state = await run_spec(client, spec, "scripted:replies.yaml", params={"topic": "tides"}, history_limit=20)
    assert state.status == "completed", state.errors
    assert [c.delegated_to for c in state.supervisor_history] == ["research", "write", "__done__"]
    runs = [e.run_id async for e in client.list_workflows(f'WorkflowId = "{state.run_id}"')]
    assert len(runs) == state.executions >= 2
    histories = [await client.get_workflow_handle(state.run_id, run_id=r).fetch_history() for r in runs]
    first, last = histories[-1], histories[0]  # listed newest first
    for i, history in enumerate(histories):  # the first and the last are kept; those between replay
        await _replays(
            "graph" if history is first else "graph-continued" if history is last else str(i), history, tmp_path
        )


async def test_a_graph_run_with_a_map_a_vote_and_a_subgraph_replays(client, tmp_path):
    """Recorded after the fan-out kinds: examples/graphs/fan_out.yaml on its recorded replies, a
    map with its synthesizer, a vote and a subgraph run as a child workflow; the parent's history
    and the child's are kept."""
    graphs = ROOT / "examples" / "graphs"
    spec = write_spec(tmp_path, (graphs / "fan_out.yaml").read_text(), "fan_out.yaml")
    (tmp_path / "replies.yaml").write_text((graphs / "fan_out.replies.yaml").read_text())
    state = await run_spec(client, spec, "scripted:replies.yaml", params={"topic": "tides"})
    assert state.status == "completed", state.errors
    assert state.memory["headline_consensus"] == "The Moon Moves the Sea" and state.memory["research_count"] == 3
    child = state.subgraph_runs["brief"][0]
    assert child.status == "completed" and state.memory["brief"].startswith("The Moon Moves the Sea.")
    histories = [
        await client.get_workflow_handle(state.run_id).fetch_history(),
        await client.get_workflow_handle(child.run_id).fetch_history(),
    ]
    for name, history in zip(("graph-fanout", "graph-subgraph"), histories):
        await _replays(name, history, tmp_path)


def _scrub(text: str, tmp_path) -> str:
    """Recorded histories keep no paths of the machine that recorded them (replay ignores them),
    in the JSON and in the payloads it holds as base64."""
    pairs = (
        (str(tmp_path), "/tmp/run"),
        (sys.executable, "python"),
        (str(ROOT), "/src/agentrun"),
        (sys.prefix, "/python"),
        (sys.base_prefix, "/python"),
    )

    def plain(part: str) -> str:
        for path, neutral in pairs:
            part = part.replace(path, neutral)
        return part

    def payload(found: re.Match) -> str:
        try:
            data = base64.b64decode(found.group(1), validate=True).decode()
        except (ValueError, UnicodeDecodeError):  # not text: nothing of ours in it
            return found.group(0)
        return f'"data": "{base64.b64encode(plain(data).encode()).decode()}"'

    return re.sub(r'"data": "([A-Za-z0-9+/=]*)"', payload, plain(text))


# Recorded after tools: a model that writes a file, runs it and reads what it printed, each call an
# activity of its own, and one call refused (a path outside the work directory).
TOOLS = """workflow:
  name: tools
  agents:
    coder: {prompt: "Write hi.sh, run it into out.txt and say what it printed.", tools: [Read, Write, Bash]}
  steps:
    - {id: code, agent: coder}
"""


async def test_a_run_with_tool_calls_replays(client, llm, tmp_path):
    llm.reply = [
        ToolUse("write", {"path": "hi.sh", "content": "echo hi"}),
        ToolUse("bash", {"command": "sh hi.sh > out.txt"}),
        ToolUse("read", {"path": "../outside.txt"}),
        ToolUse("read", {"path": "out.txt"}),
        "It printed hi",
    ]
    state = await run_spec(client, write_spec(tmp_path, TOOLS), "openai:coder")
    assert state.status == "completed", state.errors
    outcomes = [(u.tool, u.outcome) for u in state.tool_calls["code"]]
    assert outcomes == [("write", "ok"), ("bash", "ok"), ("read", "refused"), ("read", "ok")]
    await _replays("tools", await client.get_workflow_handle(state.run_id).fetch_history(), tmp_path)


# Recorded after the policy's ask: a deploy a person approved (it ran), one they rejected (it did not).
ASKED = TOOLS.replace("  name: tools\n", "  name: tools-ask\n  policy: ask-policy.toml\n")


async def test_a_run_with_tool_calls_a_person_approved_and_rejected_replays(client, llm, tmp_path):
    from agentrun.client.run import Run

    (tmp_path / "ask-policy.toml").write_text('[bash]\nask = ["sh deploy.sh *"]\n')
    (tmp_path / "deploy.sh").write_text('echo "deployed $1"\n')
    llm.reply = [
        ToolUse("bash", {"command": "sh deploy.sh prod"}),
        ToolUse("bash", {"command": "sh deploy.sh qa"}),
        "ok",
    ]
    handle = await start_spec(client, write_spec(tmp_path, ASKED), "openai:coder")
    run = Run(client, handle.id)
    await open_gate(handle, "code.bash")
    await run.approve("code.bash", by="ana")
    await open_gate(handle, "code.bash#2")
    await run.reject("code.bash#2", comment="not qa", by="ana")
    state = await finish(client, handle)
    assert [u.outcome for u in state.tool_calls["code"]] == ["ok", "refused"], state.errors
    await _replays("tools-ask", await handle.fetch_history(), tmp_path)


def _recorded() -> list[str]:
    return sorted(p.name for p in HISTORIES.glob("*.json")) if HISTORIES.exists() else []


@pytest.mark.parametrize("name", _recorded())
async def test_committed_histories_still_replay(name):
    data = json.loads((HISTORIES / name).read_text())
    # Replayed under the id it ran with: a run names its child workflows after it.
    started = data["events"][0].get("workflowExecutionStartedEventAttributes", {})
    history = WorkflowHistory.from_json(started.get("workflowId") or name.removesuffix(".json"), data)
    # As the worker replays them: what these prove is that old runs go on. The code paths old runs
    # take that new ones do not (a patch's old branch) are read by tests/test_determinism.py.
    await _replayer(strict=False).replay_workflow(history)


def test_histories_are_committed():
    recorded = [*SPECS, *AFTER_SEAMS, "gated", "agentfile", "tree", "tree-mcp", "graph", "graph-continued"]
    recorded += ["graph-fanout", "graph-subgraph", "map-batches", "map-batch", "steered"]
    recorded += ["steered-batches", "steered-batch", "tools", "tools-ask"]
    expected = sorted(f"{name}.json" for name in recorded)
    assert _recorded() == expected, "record new ones with AGENTRUN_RECORD_HISTORIES=name,name"
