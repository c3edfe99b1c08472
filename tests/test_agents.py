"""run_agent through the real Temporal activity environment against real loopback servers."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentrun.activities.agent import release_agent, run_agent
from agentrun.models.calls import AgentCall, AgentReply, ChatMessage
from tests.conftest import alive
from tests.fakes.agentapi_server import FakeAgentAPI
from tests.fakes.openai_server import FakeOpenAI


def make_call(uri: str, prompt: str = "hello", workdir: Path | str = ".", **fields: Any) -> AgentCall:
    return AgentCall(
        run_id="run-1",
        task_id=fields.pop("task_id", "t1"),
        agent_id="a1",
        uri=uri,
        prompt=prompt,
        workdir=str(workdir),
        **fields,
    )


async def run(call: AgentCall, env: ActivityEnvironment | None = None) -> AgentReply:
    return await (env or ActivityEnvironment()).run(run_agent, call)


async def failure(call: AgentCall) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await run(call)
    return caught.value


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# agentapi, reuse


@pytest.fixture
def agentapi() -> Iterator[FakeAgentAPI]:
    # lag_s keeps a stale `stable` after each message; startup_s makes the first send wait.
    with FakeAgentAPI(command="tr a-z A-Z", busy_s=0.8, startup_s=1.0, lag_s=0.6) as server:
        yield server


async def test_agentapi_waits_for_stable_and_sends_the_stripped_prompt(
    agentapi: FakeAgentAPI,
) -> None:
    assert agentapi.status == "running"
    reply = await run(make_call(f"agentapi:{agentapi.url}", "  fix the tests please \n"))
    assert reply.text == "FIX THE TESTS PLEASE"  # not the banner, not the half-written screen
    assert reply.model == "claude"
    assert agentapi.received == ["fix the tests please"]
    assert agentapi.rejected == [] and agentapi.posts_while_running == 0


async def test_agentapi_reuse_keeps_one_conversation_and_skips_stale_replies(
    agentapi: FakeAgentAPI,
) -> None:
    first = await run(make_call(f"agentapi:{agentapi.url}", "first question"))
    second = await run(make_call(f"agentapi:{agentapi.url}", "second question", task_id="t2"))
    assert (first.text, second.text) == ("FIRST QUESTION", "SECOND QUESTION")
    assert [(m["id"], m["role"]) for m in agentapi.messages] == [
        (0, "agent"),
        (1, "user"),
        (2, "agent"),
        (3, "user"),
        (4, "agent"),
    ]
    assert agentapi.received == ["first question", "second question"]
    assert agentapi.rejected == []


async def test_agentapi_empty_prompt_is_not_sent(agentapi: FakeAgentAPI) -> None:
    err = await failure(make_call(f"agentapi:{agentapi.url}", " \n\t"))
    assert err.non_retryable and err.type == "AgentError" and "empty prompt" in err.message
    assert agentapi.received == []


async def test_agentapi_unreachable_server_is_retryable() -> None:
    err = await failure(make_call(f"agentapi:http://127.0.0.1:{unused_port()}"))
    assert not err.non_retryable and err.type == "AgentUnavailable"


async def test_agentapi_a_status_reply_that_is_not_json_is_retried_as_transport(agentapi: FakeAgentAPI) -> None:
    # A server restarting behind a proxy answers with a page: the attempt fails as a refused
    # connection does (retried by the activity's policy), before any prompt is sent.
    agentapi.garbled = 1
    err = await failure(make_call(f"agentapi:{agentapi.url}", "fix it"))
    assert not err.non_retryable and err.type == "AgentUnavailable", err.message
    assert "not JSON" in err.message and "502 restarting" in err.message
    assert agentapi.received == []
    reply = await run(make_call(f"agentapi:{agentapi.url}", "fix it"))  # the next attempt goes through
    assert reply.text.strip() == "FIX IT" and agentapi.received == ["fix it"]


async def test_agentapi_whole_wait_is_bounded_by_the_task_timeout() -> None:
    with FakeAgentAPI(command="cat", busy_s=30) as server:
        started = time.monotonic()
        err = await failure(make_call(f"agentapi:{server.url}", "slow", timeout_s=1.5))
    assert not err.non_retryable and time.monotonic() - started < 5


# agentapi, refresh: the driver starts the CLI fake as if it were the real binary


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def refresh_uri(agent_type: str, cmd: str) -> str:
    return "agentapi:http://127.0.0.1:0?" + urlencode({"type": agent_type, "cmd": cmd})


async def test_agentapi_refresh_runs_one_private_server_per_task(agentapi_bin: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "agent.sh").write_text('echo "$(cat) in $(basename "$PWD") for $AGENTRUN_TASK_ID"\n')
    uri = refresh_uri("codex", "sh agent.sh")
    for n in (1, 2):
        for prompt in (f" ping {n} ", f"again {n}"):  # two prompts of one task: one server
            call = make_call(uri, prompt, workdir, lifecycle="refresh", task_id=f"t{n}")
            reply = await run(call)
            assert reply.text == f"{prompt.strip()} in work for t{n}"
            assert reply.model == "codex"
        assert await release_agent(call) is True
        assert await release_agent(call) is False  # already stopped
    starts = [e for e in events(agentapi_bin) if e["event"] == "start"]
    assert len(starts) == 2 and starts[0]["pid"] != starts[1]["pid"]
    assert all(s["agent_type"] == "codex" and s["command"] == ["sh", "agent.sh"] for s in starts)
    assert [e["content"] for e in events(agentapi_bin) if e["event"] == "message"] == [
        "ping 1",
        "again 1",
        "ping 2",
        "again 2",
    ]
    assert [e["event"] for e in events(agentapi_bin)].count("stop") == 2  # SIGTERM honoured
    for start in starts:
        assert not alive(start["pid"])
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", start["port"]), timeout=1).close()


async def test_agentapi_refresh_stops_the_server_on_cancel(
    agentapi_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENTAPI_BUSY_S", "30")
    env = ActivityEnvironment()
    task = asyncio.create_task(run(make_call(refresh_uri("claude", "cat"), "work", tmp_path, lifecycle="refresh"), env))
    await wait_for(lambda: any(e["event"] == "message" for e in events(agentapi_bin)))
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (start,) = [e for e in events(agentapi_bin) if e["event"] == "start"]
    assert not alive(start["pid"])


async def test_agentapi_refresh_missing_binary_is_not_retryable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTRUN_AGENTAPI_BIN", str(tmp_path / "no-such-agentapi"))
    err = await failure(make_call(refresh_uri("claude", "claude"), "hi", tmp_path, lifecycle="refresh"))
    assert err.non_retryable and "AGENTRUN_AGENTAPI_BIN" in err.message


async def test_agentapi_refresh_server_that_dies_reports_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrapper = tmp_path / "agentapi"
    wrapper.write_text("#!/bin/sh\necho 'unknown flag --type' >&2\nexit 3\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("AGENTRUN_AGENTAPI_BIN", str(wrapper))
    err = await failure(make_call(refresh_uri("claude", "claude"), "hi", tmp_path, lifecycle="refresh"))
    assert err.non_retryable and "code 3" in err.message and "unknown flag --type" in err.message


# openai / anthropic


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    def reply(messages: list[dict[str, Any]]) -> str:
        return f"{len(messages)} messages, last: {messages[-1]['content']}"

    with FakeOpenAI(reply=reply, api_key="sk-test", served_model="served-model-1") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        yield server


TRANSCRIPT = [
    ChatMessage(role="system", content="be brief"),
    ChatMessage(role="user", content="hi"),
    ChatMessage(role="assistant", content="hello there"),
]


async def test_openai_sends_transcript_and_reads_usage(llm: FakeOpenAI) -> None:
    reply = await run(make_call("openai:gpt-test", "how are you", transcript=TRANSCRIPT))
    assert reply.text == "4 messages, last: how are you"
    assert reply.model == "served-model-1"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (2 + 1 + 2 + 3, 6)
    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == [{"role": m.role, "content": m.content} for m in TRANSCRIPT] + [
        {"role": "user", "content": "how are you"}
    ]


async def test_openai_bad_key_is_not_retryable(llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    err = await failure(make_call("openai:gpt-test"))
    assert err.non_retryable and err.type == "AgentError"
    assert "401" in err.message and "Incorrect API key" in err.message


async def test_openai_503_is_retryable_then_succeeds(llm: FakeOpenAI) -> None:
    llm.fail_next(1, 503)
    err = await failure(make_call("openai:gpt-test"))
    assert not err.non_retryable and err.type == "AgentUnavailable" and "503" in err.message
    assert err.next_retry_delay is None
    assert (await run(make_call("openai:gpt-test"))).text == "1 messages, last: hello"


async def test_openai_429_honours_retry_after(llm: FakeOpenAI) -> None:
    llm.fail_next(1, 429, retry_after=7)
    err = await failure(make_call("openai:gpt-test"))
    assert not err.non_retryable and err.next_retry_delay == timedelta(seconds=7)


async def test_openai_400_is_not_retryable_and_carries_the_detail(llm: FakeOpenAI) -> None:
    err = await failure(make_call("openai:"))
    assert err.non_retryable and "400" in err.message and "must provide a model" in err.message


async def test_anthropic_puts_system_aside_and_reads_usage(llm: FakeOpenAI) -> None:
    reply = await run(make_call("anthropic:claude-test", "how are you", transcript=TRANSCRIPT))
    (request,) = llm.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-test" and request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["system"] == "be brief" and request.body["max_tokens"] == 4096
    assert [m["role"] for m in request.body["messages"]] == ["user", "assistant", "user"]
    assert reply.text == "4 messages, last: how are you"
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.model) == (
        8,
        6,
        "served-model-1",
    )


# command


async def test_command_reply_is_stdout_of_a_program_run_in_the_workdir(tmp_path: Path) -> None:
    uri = """command:sh -c 'echo "$(cat) in $(basename "$PWD") for $AGENTRUN_TASK_ID"'"""
    reply = await run(make_call(uri, "question", tmp_path, task_id="build"))
    assert reply.text == f"question in {tmp_path.name} for build\n"


async def test_command_nonzero_exit_is_not_retryable(tmp_path: Path) -> None:
    err = await failure(make_call("command:sh -c 'echo boom >&2; exit 3'", workdir=tmp_path))
    assert err.non_retryable and "code 3" in err.message and "boom" in err.message


async def test_command_missing_program_is_not_retryable(tmp_path: Path) -> None:
    err = await failure(make_call("command:no-such-program-xyz", workdir=tmp_path))
    assert err.non_retryable and "no-such-program-xyz" in err.message


async def test_command_timeout_kills_the_process_group(tmp_path: Path) -> None:
    # The sleep is a grandchild: only killing the whole group stops it.
    uri = "command:sh -c 'sleep 30 & echo $! > pid; wait'"
    started = time.monotonic()
    err = await failure(make_call(uri, workdir=tmp_path, timeout_s=1.0))
    assert not err.non_retryable and "1s" in err.message
    assert time.monotonic() - started < 5  # nothing left holding the pipes open
    assert not alive(int((tmp_path / "pid").read_text()))


async def test_command_cancel_kills_the_process_group(tmp_path: Path) -> None:
    env = ActivityEnvironment()
    task = asyncio.create_task(run(make_call("command:sh -c 'sleep 30 & echo $! > pid; wait'", workdir=tmp_path), env))
    await wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip() != "")
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):  # nothing left holding the pipes open
            await task
    await wait_for(lambda: not alive(int((tmp_path / "pid").read_text())), timeout_s=2)


# scripted


SCRIPT = """\
default: generic reply
tasks:
  plan: [first plan, second plan, final plan]
  review: looks good
  7: numbered task
"""


async def test_scripted_indexes_by_turn_and_falls_back_to_default(tmp_path: Path) -> None:
    (tmp_path / "replies.yaml").write_text(SCRIPT)
    uri = "scripted:replies.yaml"  # relative to the workdir

    async def text(task_id: str, turn: int = 0) -> str:
        return (await run(make_call(uri, workdir=tmp_path, task_id=task_id, turn=turn))).text

    assert [await text("plan", turn) for turn in range(5)] == [
        "first plan",
        "second plan",
        "final plan",
        "final plan",
        "final plan",
    ]
    assert await text("review", 3) == "looks good"
    assert await text("7") == "numbered task"
    assert await text("unlisted") == "generic reply"


async def test_scripted_unlisted_task_without_default_names_the_task(tmp_path: Path) -> None:
    (tmp_path / "replies.yaml").write_text("tasks: {plan: ok}\n")
    err = await failure(make_call(f"scripted:{tmp_path / 'replies.yaml'}", task_id="deploy"))
    assert err.non_retryable and "'deploy'" in err.message


async def test_scripted_delay_heartbeats_while_waiting(tmp_path: Path) -> None:
    (tmp_path / "replies.yaml").write_text("delay_s: 0.6\ndefault: done\n")
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=0.3))
    beats: list[float] = []
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())
    reply = await run(make_call("scripted:replies.yaml", workdir=tmp_path), env)
    assert reply.text == "done" and len(beats) >= 4


# scheme dispatch


async def test_unknown_scheme_names_the_known_ones() -> None:
    err = await failure(make_call("telnet:somewhere"))
    assert err.non_retryable
    for scheme in ("agentapi", "anthropic", "command", "openai", "scripted"):
        assert scheme in err.message
