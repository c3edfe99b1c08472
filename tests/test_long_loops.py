"""Long tool loops at linear cost: a step's conversation is stored once per message in the run's
store, and each model turn's input names it by reference. The model still receives the whole
conversation each turn, as it did when the workflow sent it; what history keeps of a turn no longer
grows with the turns before it."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentrun.explain import report
from agentrun.models.calls import RUN_AGENT, AgentCall
from tests.conftest import write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages, ToolUse
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

SPEC = """
workflow:
  name: reader
  agents:
    reader:
      prompt: "Read the notes one by one and say how many you read."
      tools: [Read]
      max_tool_calls: 60
  steps:
    - id: read
      agent: reader
"""


def notes(tmp_path: Path, count: int, size: int) -> Path:
    """`count` files of `size` random letters (no two alike, nothing a store could fold together)."""
    work = tmp_path / "work"
    work.mkdir()
    rng = random.Random(count)
    for n in range(count):
        (work / f"note{n}.txt").write_text("".join(rng.choices(string.ascii_letters, k=size)))
    return work


def reader(count: int):
    """A model that reads note0..note{count-1}, one a turn, then says how many it read."""

    def model(messages: Messages) -> ToolUse | str:
        done = sum(1 for m in messages if m["role"] == "tool")
        return ToolUse("read", {"path": f"note{done}.txt"}) if done < count else f"read {done}"

    return model


async def loop(client: Client, llm: FakeOpenAI, tmp_path: Path, count: int, size: int) -> list:
    """Run the reading loop; the run's history events."""
    work = notes(tmp_path, count, size)
    llm.reply = reader(count)
    state = await run_spec(client, write_spec(tmp_path, SPEC), "openai:reader", workdir=work)
    assert state.status == "completed", state.errors
    assert state.steps["read"]["output"] == f"read {count}"
    return [e async for e in client.get_workflow_handle(state.run_id).fetch_history_events()]


async def agent_inputs(client: Client, events: list) -> list[AgentCall]:
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == RUN_AGENT
    ]
    return [(await client.data_converter.decode(a.input.payloads[:1], [AgentCall]))[0] for a in scheduled]


async def test_each_turn_the_model_receives_the_whole_conversation_sent_by_reference(client, llm: FakeOpenAI, tmp_path):
    events = await loop(client, llm, tmp_path, 4, 300)
    work = tmp_path / "work"

    # Each request is the one before it, then the model's call and the file it read, in full:
    # exactly what the workflow sent when each turn's input carried the whole conversation.
    bodies = [r.body["messages"] for r in llm.requests]
    assert len(bodies) == 5
    assert bodies[0] == [{"role": "user", "content": "Read the notes one by one and say how many you read."}]
    for n in range(1, 5):
        before, asked, answer = bodies[n - 1], *bodies[n][-2:]
        assert bodies[n][: len(before)] == before and len(bodies[n]) == len(before) + 2
        call = asked["tool_calls"][0]
        assert asked["role"] == "assistant" and call["function"]["name"] == "read"
        assert answer == {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": (work / f"note{n - 1}.txt").read_text(),
        }
    # History kept none of it twice: each turn named its conversation, and the file it had read
    # by where the read's activity kept it.
    inputs = await agent_inputs(client, events)
    assert [c.transcript for c in inputs] == [[]] * 5
    added = [[(e.message.role, e.message.content, bool(e.kept)) for e in c.thread.added] for c in inputs if c.thread]
    assert added == [[]] + [[("tool", "", True)]] * 4


async def test_what_history_keeps_of_a_turn_does_not_grow_with_the_loop(client, llm: FakeOpenAI, tmp_path):
    events = await loop(client, llm, tmp_path, 40, 5000)

    # The bytes of history the first 20 turns took, and the next 20 (from the 21st prompt on).
    prompts = [
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == RUN_AGENT
    ]
    sizes = [e.ByteSize() for e in events]
    first, second = sum(sizes[prompts[0] : prompts[20]]), sum(sizes[prompts[20] : prompts[40]])
    # Sent whole, the second 20 turns took about 2.5 times the first (5 MB against 2 MB).
    assert second <= first * 1.1, (first, second)
    assert first <= 20 * (5000 + 5000), first  # each result once, and a little more


async def test_past_the_model_s_context_the_oldest_tool_results_are_cut_and_the_report_says_so(
    client, llm: FakeOpenAI, tmp_path
):
    work = notes(tmp_path, 5, 1500)
    llm.reply = reader(5)
    spec = write_spec(tmp_path, SPEC.replace("max_tool_calls: 60", "max_context_tokens: 1000"))
    state = await run_spec(client, spec, "openai:reader", workdir=work)

    assert state.status == "completed", state.errors
    # The last request: the four older results cut to their head and a marker, the newest whole.
    results = [m["content"] for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    texts = [(work / f"note{n}.txt").read_text() for n in range(5)]
    for said, text in zip(results[:4], texts):
        assert said.startswith(text[:500]) and not said.startswith(text[:501])
        assert "1000 more characters of this tool result are left out to fit the model's context" in said
    assert results[4] == texts[4]
    assert state.context_cut == {"read": 4}
    assert "(4 of the oldest tool results were cut to their first characters" in report.to_markdown(state)
