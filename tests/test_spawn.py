"""spawn_agents: a goal's agent starts sub-agents that run in parallel and isolated, one level deep,
each durably; their results come back in order as the tool's result (function calling for
`openai:`/`anthropic:` models) or in the task sent again (a fenced block, for any other agent).
Agentfiles run on the real workflow; models are the fake OpenAI/Anthropic server, which holds
requests to the APIs' tool rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentrun.explain import report
from agentrun.lang import ir
from agentrun.lang.load import load
from agentrun.models import calls
from agentrun.models.contract import RunInput
from agentrun.models.texts import spawn_text
from tests.conftest import TEST_QUEUE, run_id, sigkill, start_worker, until, wait_for, watch_with_new_worker, write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages, Recorded, ToolUse
from tests.runs import finish

pytestmark = pytest.mark.usefixtures("worker")

TIDES = """
NAME tides
GOAL compare "Compare the tide tables of Brest and Dover." -> table
RUN main USING compare
"""
PRE = {
    "interpretation": "compare two tables",
    "scope_in": ["Brest", "Dover"],
    "scope_out": [],
    "approach": "one reader per port",
    "predictions": [],
    "assumptions": [],
    "confidence": 0.9,
}
READERS = [
    {"role": "brest-reader", "task": "Read the Brest tide table."},
    {"role": "dover-reader", "task": "Read the Dover tide table.", "outputs": ["high", "low"]},
]
DEPTH = "error: sub-agents cannot start sub-agents of their own (depth 1)"


def post(output: Any) -> str:
    body = {"output": output, "tools_used": ["spawn_agents"], "commitment_met": "yes", "scope_changed": False}
    return f"```json\n{json.dumps(body)}\n```"


def tool_result(messages: Messages) -> str | None:
    """The result of the last tool call, as either API carries it; None when the turn is not one."""
    last = messages[-1]
    if last["role"] == "tool":
        return last["content"]
    blocks = last["content"] if isinstance(last["content"], list) else []
    return next((b["content"] for b in blocks if b.get("type") == "tool_result"), None)


def model(messages: Messages) -> Any:
    """The goal's agent and, with a role for system text, each of its sub-agents."""
    first = messages[0]["content"]
    if messages[0]["role"] == "system" and first.startswith("You are a brest-reader"):
        return "Brest: high 6.1 m"
    if messages[0]["role"] == "system" and first.startswith("You are a dover-reader"):
        return '{"high": "5.2 m", "low": "0.9 m"}'
    result = tool_result(messages)
    if result is not None:
        return post({"table": result})
    if "Phase COMMIT" in messages[-1]["content"]:
        return json.dumps(PRE)
    return ToolUse(calls.SPAWN_AGENTS, {"agents": READERS}, text="Two readers, one per port.")


async def start(client: Client, spec: Path, uri: str, queue: str = TEST_QUEUE) -> WorkflowHandle:
    inp = RunInput(plan=load(str(spec)), workdir=str(spec.parent), default_agent=uri, heartbeat_s=2)
    return await client.start_workflow("AgentRun", inp, id=run_id("spawn"), task_queue=queue)


async def scheduled(handle: WorkflowHandle) -> list[tuple[str, dict[str, Any]]]:
    """Each activity the run scheduled: its summary and its input, as Temporal Web shows them."""
    found = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            arg = event.activity_task_scheduled_event_attributes.input.payloads[0].data
            found.append((json.loads(event.user_metadata.summary.data), json.loads(arg)))
    return found


def _sub_requests(llm: FakeOpenAI) -> list[Recorded]:
    return [
        r for r in llm.requests if "You are a" in json.dumps(r.body.get("messages", [])[:1] + [r.body.get("system")])
    ]


@pytest.mark.parametrize("scheme", ["openai", "anthropic"])
async def test_sub_agents_run_in_parallel_isolated_and_answer_the_call_in_order(
    client, llm: FakeOpenAI, monkeypatch, tmp_path, scheme
):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    llm.reply = model
    brest = llm.hold_prompt("Read the Brest")
    handle = await start(client, write_spec(tmp_path, TIDES, "Agentfile"), f"{scheme}:lead")
    # Dover is asked while Brest has not answered: the two run at once.
    await until(
        lambda: any("Read the Dover" in json.dumps(r.body) for r in llm.requests) and llm.in_flight("lead") == 1
    )
    brest.set()
    state = await finish(client, handle)

    assert state.status == "completed", state.errors
    expected = (
        "Agent 1 (brest-reader):\nBrest: high 6.1 m\n\n---\n\n"
        'Agent 2 (dover-reader):\n{"high": "5.2 m", "low": "0.9 m"}'
    )
    assert state.memory["table"] == expected
    subs = _sub_requests(llm)
    assert len(subs) == 2
    for sub in subs:
        # Isolated: a system text with its role and its task, nothing of the parent's conversation,
        # and no tools (depth 1).
        assert "tools" not in sub.body
        assert "tide tables of Brest and Dover" not in json.dumps(sub.body)
        assert [m["role"] for m in sub.body["messages"]] == (["system", "user"] if scheme == "openai" else ["user"])
    dover = next(s for s in subs if "Dover" in json.dumps(s.body))
    assert "End your reply with a JSON object with the fields high, low." in json.dumps(dover.body)
    parent = [r for r in llm.requests if r not in subs]
    assert ["tools" in r.body for r in parent] == [False, True, True]  # COMMIT, EXECUTE, after the results
    assert tool_result(parent[-1].body["messages"]) == expected

    spawned = state.spawned["main.compare"]
    assert [(a.key, a.role, a.status) for a in spawned] == [
        ("main.compare/agent-1", "brest-reader", "completed"),
        ("main.compare/agent-2", "dover-reader", "completed"),
    ]
    # Sub-agents count against the run's usage and their parent's.
    assert all(a.usage.output_tokens > 0 for a in spawned)
    assert state.tasks["main.compare"].usage.output_tokens > sum(a.usage.output_tokens for a in spawned)
    assert state.iteration_count == 5
    summaries = [summary for summary, _ in await scheduled(handle)]
    assert summaries == [
        "compare: COMMIT",
        "compare: EXECUTE",
        "compare: sub-agent 1 (brest-reader)",
        "compare: sub-agent 2 (dover-reader)",
        "compare: EXECUTE (after sub-agents)",
    ]
    text = report.to_markdown(state)
    assert "| 1.1 | ↳ main.compare/agent-1 | brest-reader | SUCCESS |" in text
    assert "## Sub-agents" in text and "main.compare/agent-2 (dover-reader): SUCCESS" in text


async def test_an_agent_without_function_calling_asks_in_a_block_and_a_sub_agent_may_not_spawn(client, tmp_path):
    ask = spawn_text.offer(tools=False).split("```")[1]  # the block the prompt shows, as an agent copies it
    assert ask.startswith("spawn_agents\n")
    block = f"```spawn_agents\n{json.dumps(READERS)}\n```"
    replies = {
        "tasks": {
            "main.compare": [json.dumps(PRE), f"I will delegate.\n{block}", post({"table": "both read"})],
            "main.compare/agent-1": "Brest: high 6.1 m",
            "main.compare/agent-2": f"Too much for me; delegating.\n{block}",
        }
    }
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    handle = await start(client, write_spec(tmp_path, TIDES, "Agentfile"), f"scripted:{tmp_path / 'replies.json'}")
    state = await finish(client, handle)

    assert state.status == "completed", state.errors
    assert [(a.status, a.output) for a in state.spawned["main.compare"]] == [
        ("completed", "Brest: high 6.1 m"),
        ("refused", DEPTH.removeprefix("error: ") + "; its request was refused"),
    ]
    prompts = [(summary, arg["prompt"]) for summary, arg in await scheduled(handle)]
    assert [summary for summary, _ in prompts] == [
        "compare: COMMIT",
        "compare: EXECUTE",
        "compare: sub-agent 1 (brest-reader)",
        "compare: sub-agent 2 (dover-reader)",
        "compare: EXECUTE (after sub-agents)",
    ]
    execute, sub, again = prompts[1][1], prompts[2][1], prompts[4][1]
    assert "```spawn_agents\n" in execute  # told how to ask
    assert sub.startswith("You are a brest-reader.") and "Brest and Dover" not in sub
    # The task again, then the results in order: the refusal is the second agent's result.
    assert again.startswith(execute)
    assert "Agent 1 (brest-reader):\nBrest: high 6.1 m\n\n---\n\nAgent 2 (dover-reader):\n" + DEPTH in again


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ("{not json", "its arguments are not JSON"),
        ('{"agents": []}', "expected a non-empty list of sub-agents"),
        ('{"agents": [{"role": "a"}]}', "sub-agent 1 needs a non-empty role and task"),
        ('{"agents": [{"role": "a", "task": "b", "outputs": "x"}]}', "outputs must be a list of field names"),
        (json.dumps({"agents": [{"role": "a", "task": "b"}] * 11}), "11 sub-agents asked for; at most 10 at once"),
    ],
)
def test_a_malformed_call_starts_nothing_and_says_why(arguments: str, error: str):
    reply = calls.AgentReply(text="", tool_calls=[calls.ToolCall(id="c1", name="spawn_agents", arguments=arguments)])
    [ask] = spawn_text.asks(reply, tools=True)
    assert ask.call_id == "c1" and ask.agents == [] and error in ask.error


def test_a_call_for_another_tool_and_the_block_forms():
    other = calls.AgentReply(text="", tool_calls=[calls.ToolCall(id="c2", name="shell", arguments="{}")])
    assert spawn_text.asks(other, tools=True)[0].error == "there is no tool 'shell'; the one tool is spawn_agents"
    bare = calls.AgentReply(text='```spawn_agents\n[{"role": "r", "task": "t"}]\n```')
    wrapped = calls.AgentReply(text='```spawn_agents\n{"agents": [{"role": "r", "task": "t", "outputs": ["x"]}]}\n```')
    assert [a.agents for a in spawn_text.asks(bare, tools=False)] == [[spawn_text.Request("r", "t")]]
    assert [a.agents for a in spawn_text.asks(wrapped, tools=False)] == [[spawn_text.Request("r", "t", ("x",))]]
    # A chat model's block is text: it was offered the tool instead.
    assert spawn_text.asks(bare, tools=True) == []


def test_a_worker_killed_while_sub_agents_run_does_not_ask_the_finished_ones_again(
    cli, address, llm: FakeOpenAI, tmp_path
):
    three = [*READERS, {"role": "calais-reader", "task": "Read the Calais tide table."}]

    def lead(messages: Messages) -> Any:
        first = messages[0]["content"]
        if messages[0]["role"] == "system" and first.startswith("You are a "):
            return f"{first.split()[3].rstrip('.')} done"
        if tool_result(messages) is not None:
            return post({"table": tool_result(messages)})
        if "Phase COMMIT" in messages[-1]["content"]:
            return json.dumps(PRE)
        return ToolUse(calls.SPAWN_AGENTS, {"agents": three})

    llm.reply = lead
    calais = llm.hold_prompt("Read the Calais")
    queue, rid = run_id("spawn-q"), run_id("spawn-crash")
    spec = write_spec(tmp_path, TIDES, "Agentfile")
    first = start_worker(address, "--task-queue", queue)
    started = cli("start", str(spec), "--agent", "openai:lead", "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0, started.err
    wait_for(lambda: len(_sub_requests(llm)) == 3 and llm.in_flight("lead") == 1)
    wait_for(lambda: _finished_subs(cli, rid) == 2, timeout_s=60)
    sigkill(first)  # Brest's and Dover's answers are in the run's history; Calais is still at work
    calais.set()
    watched = watch_with_new_worker(cli, address, queue, rid)

    assert watched.code == 0, watched.out + watched.err
    asked = [json.dumps(r.body["messages"][-1]) for r in _sub_requests(llm)]
    assert sum("Brest" in a for a in asked) == 1 and sum("Dover" in a for a in asked) == 1
    assert sum("Calais" in a for a in asked) == 2  # the one in flight at the kill, asked again
    parent = [r for r in llm.requests if r not in _sub_requests(llm)]
    assert len(parent) == 3  # COMMIT and EXECUTE once each, then on from the results
    status = json.loads(cli("status", rid, "--json").out)
    assert [a["status"] for a in status["spawned"]["main.compare"]] == ["completed"] * 3
    assert status["memory"]["table"].endswith("Agent 3 (calais-reader):\ncalais-reader done")


def _finished_subs(cli, rid: str) -> int:
    shown = cli("status", rid, "--json")
    spawned = json.loads(shown.out).get("spawned", {}) if shown.code == 0 else {}
    return sum(a["status"] == "completed" for a in spawned.get("main.compare", []))


async def test_sub_agents_count_against_the_runs_budget(client, llm: FakeOpenAI, tmp_path):
    llm.reply = model
    plan = load(str(write_spec(tmp_path, TIDES, "Agentfile")))
    plan.budget = ir.Budget(iterations=3)  # COMMIT, EXECUTE and one sub-agent
    inp = RunInput(plan=plan, workdir=str(tmp_path), default_agent="openai:lead", heartbeat_s=2)
    handle = await client.start_workflow("AgentRun", inp, id=run_id("spawn-budget"), task_queue=TEST_QUEUE)
    state = await finish(client, handle)

    assert state.status == "failed"
    assert [(a.status, a.output.split(":")[0]) for a in state.spawned["main.compare"]] == [
        ("completed", "Brest"),
        ("failed", "budget exceeded"),
    ]
    assert len(_sub_requests(llm)) == 1
    assert state.errors[-1].startswith("main.compare: budget exceeded")
