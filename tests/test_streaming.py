"""Drivers that read a reply as it arrives: run_agent in Temporal's activity environment against the
fake servers made to let a reply out a word at a time. The heartbeats carry the reply so far; the
reply recorded is the one an unstreamed call gets."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from agentrun.activities.agent import run_agent
from agentrun.models.calls import AgentCall, AgentReply, Partial
from tests.fakes.agentapi_server import FakeAgentAPI
from tests.fakes.drip import Drip
from tests.fakes.openai_server import FakeOpenAI, ToolUse

REPLY = "The plan has three steps: read, write, test."


def call(uri: str, prompt: str = "make a plan", workdir: Path | str = ".", **fields: Any) -> AgentCall:
    return AgentCall(
        run_id="run-1", task_id="plan", agent_id="planner", uri=uri, prompt=prompt, workdir=str(workdir), **fields
    )


class Watched:
    """run_agent running in the background, its heartbeats kept."""

    def __init__(self, agent_call: AgentCall) -> None:
        self.beats: list[Partial] = []
        env = ActivityEnvironment()
        env.on_heartbeat = lambda *details: self.beats.extend(d for d in details if isinstance(d, Partial))
        self.task: asyncio.Task[AgentReply] = asyncio.create_task(env.run(run_agent, agent_call))

    async def shows(self, text: str) -> Partial:
        """The first heartbeat whose reply so far is `text` (waiting for it; the call must not end first)."""
        return await self.first(lambda tail: tail == text)

    async def first(self, wanted: Callable[[str], bool]) -> Partial:
        """The first heartbeat whose reply so far is `wanted` (waiting for it; the call must not end first)."""
        while not any(wanted(b.tail) for b in self.beats):
            assert not self.task.done(), f"the call ended first; heartbeats: {[b.tail for b in self.beats]}"
            await asyncio.sleep(0.05)
        return next(b for b in self.beats if wanted(b.tail))


async def let_out(drip: Drip, watched: Watched) -> AgentReply:
    """Let the reply out a word at a time, checking that each heartbeat after it shows it so far."""
    await asyncio.to_thread(drip.wait_sent, 1)
    first = await watched.shows("The ")
    assert first.status in ("writing", "running") and first.chars == 4 and first.first_token_s is not None
    drip.allow(1)
    await watched.shows("The plan ")
    drip.allow_all()
    return await watched.task


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    """A streaming server and one that refuses `stream: true`, with the same replies."""
    replies = {"writer": REPLY, "caller": ToolUse("spawn_agents", {"agents": [{"role": "r", "task": "t"}]}, "On it.")}
    with (
        FakeOpenAI(by_model=dict(replies), api_key="sk-test") as streaming,
        FakeOpenAI(by_model=dict(replies), api_key="sk-test", streams=False) as plain,
    ):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        yield streaming, plain


def point_at(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("model", ["writer", "caller"])
async def test_a_streamed_reply_is_recorded_as_the_unstreamed_one(
    provider: str, model: str, servers: tuple[FakeOpenAI, FakeOpenAI], monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    streaming, plain = servers
    tools = ["spawn_agents"] if model == "caller" else []
    replies = []
    for server in (streaming, plain, plain):
        point_at(server, monkeypatch)
        with caplog.at_level(logging.WARNING, logger="agentrun.agents"):
            replies.append(await ActivityEnvironment().run(run_agent, call(f"{provider}:{model}", tools=tools)))
    streamed, unstreamed, again = (recorded(r) for r in replies)
    assert streamed == unstreamed == again
    if model == "caller":  # the call's id as the server named it (the fake numbers its requests)
        assert replies[0].tool_calls[0].id == ("call_1" if provider == "openai" else "toolu_1")
    assert replies[0].usage.output_tokens > 0 and replies[0].usage.input_tokens > 0
    # The streaming server was asked to stream (OpenAI: with usage in the last chunk)...
    (asked,) = streaming.requests
    assert asked.body["stream"] is True
    assert asked.body.get("stream_options") == ({"include_usage": True} if provider == "openai" else None)
    # ...the other refused it once, was asked again plainly, and then never asked to stream again.
    assert [r.body.get("stream", False) for r in plain.requests] == [True, False, False]
    said = [r.getMessage() for r in caplog.records if "without streaming" in r.getMessage()]
    assert len(said) == 1 and plain.base_url in said[0] and "refused a streamed request" in said[0]


def recorded(reply: AgentReply) -> dict[str, Any]:
    """What history keeps of a reply, but the tool calls' ids (the fake numbers them by request)."""
    data = reply.model_dump(exclude={"first_token_s"})
    for tool_call in data["tool_calls"]:
        tool_call.pop("id")
    return data


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_heartbeats_carry_a_chat_reply_as_it_streams(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(reply=REPLY) as server:
        point_at(server, monkeypatch)
        drip = server.drip("writer")
        watched = Watched(call(f"{provider}:writer"))
        reply = await let_out(drip, watched)
    assert reply.text == REPLY and reply.first_token_s is not None
    assert reply.usage.output_tokens == len(REPLY.split())
    tails = [b.tail for b in watched.beats]
    assert all(later.startswith(earlier) for earlier, later in zip(tails, tails[1:], strict=False))
    assert max(b.tokens for b in watched.beats) >= 2


@pytest.mark.parametrize("events", [True, False], ids=["events", "polled"])
async def test_heartbeats_carry_an_agentapi_reply_as_it_grows(events: bool) -> None:
    with FakeAgentAPI(command=f"echo '{REPLY}'", busy_s=0.2, events=events) as server:
        drip = server.drip()
        watched = Watched(call(f"agentapi:{server.url}"))
        reply = await let_out(drip, watched)
    assert reply.text == REPLY  # what /messages holds once the agent is stable, as before
    assert any(b.status == "running" for b in watched.beats)
    assert (server.subscribers_seen > 0) is events


def paused_agent(tmp_path: Path, first: str, then: str) -> tuple[Watched, Path]:
    """A command agent that prints the line `first`, waits until the returned file exists, then
    prints `then`; watched from the start."""
    go_on = tmp_path / "go-on"
    script = (
        "import pathlib, time\n"
        f"print({first!r}, flush=True)\n"
        f"while not pathlib.Path({str(go_on)!r}).exists(): time.sleep(0.02)\n"
        f"print({then!r})\n"
    )
    (tmp_path / "agent.py").write_text(script)
    return Watched(call(f"command:{sys.executable} agent.py", workdir=tmp_path)), go_on


async def test_heartbeats_carry_a_command_reply_line_by_line(tmp_path: Path) -> None:
    watched, go_on = paused_agent(tmp_path, "first line", "second line")
    beat = await watched.shows("first line\n")
    assert beat.chars == len("first line\n")
    go_on.touch()
    reply = await watched.task
    assert reply.text == "first line\nsecond line\n" and reply.first_token_s is not None


async def test_a_secret_in_the_reply_so_far_is_redacted_in_heartbeats_and_the_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A heartbeat's reply so far shows in Temporal Web and can reach history; the agent read the
    # worker's token from somewhere else (children never see it in their environment).
    monkeypatch.setenv("SERVICE_TOKEN", "tok-0123456789")
    watched, go_on = paused_agent(tmp_path, "using tok-0123456789", "done")
    beat = await asyncio.wait_for(watched.first(lambda tail: tail.startswith("using ")), timeout=30)
    assert beat.tail == "using [redacted SERVICE_TOKEN]\n"
    go_on.touch()
    reply = await watched.task
    assert all("tok-0123456789" not in beat.tail for beat in watched.beats)
    assert reply.text == "using [redacted SERVICE_TOKEN]\ndone\n"
