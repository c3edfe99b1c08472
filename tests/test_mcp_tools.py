"""MCP servers as tool sources: the activities against the fake MCP server written with the SDK
(tests/fakes/mcp_server.py), over stdio and streamable HTTP, judged by what the server did (its count
file, its process, the environment it saw) and what the model would read back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentrun.activities.mcp import connections
from agentrun.activities.mcp.calls import call_mcp_tool, list_mcp_tools
from agentrun.lang.mcp_servers import McpServer, tool_name
from agentrun.models.mcp import McpCallInput, McpListInput
from agentrun.models.tools import McpPolicy, ToolPolicy, ToolResult
from tests.conftest import ROOT

CANARY = "canary-secret-5d1f0e2a9b"


def fake(server_id: str = "fake", count_file: Path | None = None, **more) -> McpServer:
    env = {"PYTHONPATH": str(ROOT)}
    if count_file is not None:
        env["FAKE_MCP_COUNT_FILE"] = str(count_file)
        more.setdefault("allow_write", [str(count_file.parent)])  # outside its cwd: opened to it
    return McpServer(
        id=server_id, command=sys.executable, args=["-m", "tests.fakes.mcp_server"], env=env, cwd=str(ROOT), **more
    )


async def call(server: McpServer, tool: str, policy: ToolPolicy | None = None, **arguments) -> ToolResult:
    arg = McpCallInput(
        server=server,
        tool=tool,
        call_id=f"call-{tool}",
        name=tool_name(server.id, tool),
        arguments=arguments,
        policy=policy or ToolPolicy(),
    )
    return await ActivityEnvironment().run(call_mcp_tool, arg)


@pytest.fixture
async def closing():
    yield
    await connections.close_all()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_stdio_server_lists_its_tools_and_is_kept_alive_across_calls(tmp_path, closing):
    counted = tmp_path / "count.txt"
    server = fake(count_file=counted, denied_tools=["crash"])
    listed = await ActivityEnvironment().run(list_mcp_tools, McpListInput(server=server))
    names = {t.name for t in listed.tools}
    assert {"echo", "add", "count", "environment", "pid", "slow"} <= names
    assert "crash" not in names  # the declaration denies it: never offered
    echo = next(t for t in listed.tools if t.name == "echo")
    assert echo.parameters["required"] == ["text"] and echo.description == "Say the text back."

    first, second = await call(server, "count", note="a"), await call(server, "count", note="b")
    assert (first.ok, first.content, second.content) == (True, "1", "2")
    assert first.taint_source == "mcp:fake:count"
    pids = {line.split()[0] for line in lines(counted)}
    assert len(lines(counted)) == 2 and len(pids) == 1  # one process served both calls
    assert connections.connection(server).starts == 1


async def test_a_tool_error_and_a_timeout_are_answers_for_the_model(tmp_path, closing):
    server = fake(timeout_s=1)
    failed = await call(server, "fail", reason="no such table")
    assert not failed.ok and not failed.refused and "no such table" in failed.content
    started = time.monotonic()
    slow = await call(server, "slow", seconds=5)
    assert not slow.ok and "timed out after 1s" in slow.content
    assert time.monotonic() - started < 4
    assert (await call(server, "echo", text="still here")).content == "still here"


async def test_the_server_environment_has_only_what_its_declaration_names(tmp_path, closing, monkeypatch):
    monkeypatch.setenv("AGENTRUN_CANARY_API_KEY", CANARY)
    monkeypatch.setenv("SERVICE_TOKEN", "passed-on-by-name")
    monkeypatch.setenv("REGION", "eu-west-9")
    server = fake()
    env = {**server.env, "SERVICE_TOKEN": "${SERVICE_TOKEN}", "AREA": "${REGION}", "MODE": "test"}
    seen = await call(server.model_copy(update={"env": env}), "environment")
    assert seen.ok
    assert CANARY not in seen.content and "AGENTRUN_CANARY_API_KEY" not in seen.content
    assert '"AREA": "eu-west-9"' in seen.content and '"MODE": "test"' in seen.content
    assert "REGION" not in seen.content  # only what the declaration names, under its name
    # A key the declaration hands on reaches the server, and is redacted from what comes back.
    assert '"SERVICE_TOKEN": "[redacted SERVICE_TOKEN]"' in seen.content


async def test_a_server_that_died_is_started_anew_for_the_next_call(tmp_path, closing):
    counted = tmp_path / "count.txt"
    # Outside the sandbox: the test kills it by the pid it says, which in its own PID namespace is not the host's.
    server = fake(count_file=counted, sandbox=False)
    pid = int((await call(server, "pid")).content)
    os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.2)
    # The attempt that finds the server gone fails so that Temporal tries the call again...
    with pytest.raises(ApplicationError, match="went away") as gone:
        await call(server, "count", note="after the kill")
    assert not gone.value.non_retryable
    assert lines(counted) == []  # ...having done nothing
    again = await call(server, "count", note="after the kill")
    assert again.ok and again.content == "1"
    assert int((await call(server, "pid")).content) != pid
    assert connections.connection(server).starts == 2


async def test_the_mcp_policy_refuses_tools_outside_allowed_tools(tmp_path, closing):
    counted = tmp_path / "count.txt"
    server = fake(count_file=counted)
    policy = ToolPolicy(mcp=McpPolicy(default_deny=True, allowed_tools=["fake:echo", "other:*"]))
    refused = await call(server, "count", policy, note="must not run")
    assert refused.refused and not refused.ok and "allowed_tools" in refused.content
    assert lines(counted) == []
    assert (await call(server, "echo", policy, text="allowed")).content == "allowed"
    open_policy = ToolPolicy(mcp=McpPolicy(default_deny=False, allowed_tools=["fake:echo"]))
    assert (await call(server, "count", open_policy, note="ran")).ok  # no default_deny: allowed
    assert len(lines(counted)) == 1


async def test_a_policy_without_an_mcp_table_runs_the_call_and_warns_the_operator_once(tmp_path, closing, caplog):
    # As the real system: no [mcp] table allows every MCP tool, and says so where the operator looks.
    counted = tmp_path / "count.txt"
    server = fake("unguarded", count_file=counted)
    with caplog.at_level("WARNING"):
        first = await call(server, "count", ToolPolicy(), note="a")
        second = await call(server, "count", ToolPolicy(), note="b")
    assert first.ok and second.ok and len(lines(counted)) == 2
    said = [r.getMessage() for r in caplog.records if "[mcp]" in r.getMessage()]
    assert len(said) == 1 and "'unguarded'" in said[0] and "no [mcp] table" in said[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_streamable_http_server(tmp_path, closing):
    port = free_port()
    counted = tmp_path / "count.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.mcp_server", "--http", str(port)],
        cwd=ROOT,
        env={**os.environ, "FAKE_MCP_COUNT_FILE": str(counted)},
        stderr=subprocess.DEVNULL,
    )
    try:
        server = McpServer(id="remote", url=f"http://127.0.0.1:{port}/mcp")
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.05)
        listed = await ActivityEnvironment().run(list_mcp_tools, McpListInput(server=server))
        assert "count" in {t.name for t in listed.tools}
        assert (await call(server, "count", note="over http")).content == "1"
        assert lines(counted)[0].endswith("over http")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# A run: a cycgraph graph whose agents use the fake server's tools, asked through the fake
# OpenAI-compatible server, which answers with tool calls in the real wire format.

GRAPH = """
name: mcp-run
description: Count twice, then say so
inputs:
  topic: {schema: {type: string}, required: true}
nodes:
  - {id: first, type: agent, agent_id: counter, read_keys: [topic], write_keys: [first], tools: &tools [
      {type: mcp, server_id: fake, tool_names: [count, echo]}, {type: mcp, server_id: ghost}]}
  - {id: second, type: agent, agent_id: counter, read_keys: [topic], write_keys: [second], tools: *tools}
edges:
  - {source: first, target: second}
start_node: first
end_nodes: [second]
"""


def graph(folder: Path) -> Path:
    path = folder / "graph.yaml"
    path.write_text(GRAPH)
    return path


def offered(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools") or []]


def tool_answers(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


async def start_graph(client, spec: Path, servers: dict[str, McpServer], policy: dict | None = None):
    """A run of the graph on the in-process worker, its agents on the fake OpenAI server, the
    policy (policy.toml's tables) as a spec would name it."""
    from agentrun.lang import params
    from agentrun.lang.load import load
    from agentrun.models.contract import RunInput
    from tests.conftest import TEST_QUEUE, run_id

    plan = load(str(spec), given_params={"topic"})
    if policy is not None:
        plan = plan.model_copy(update={"tool_policy": policy})
    inp = RunInput(
        plan=plan,
        params=params.bind(plan, {"topic": "T"}),
        workdir=str(spec.parent),
        default_agent="openai:counter",
        heartbeat_s=5,
        mcp_servers=servers,
    )
    return await client.start_workflow("AgentRun", inp, id=run_id("mcp"), task_queue=TEST_QUEUE)


async def activities_named(handle, name: str) -> int:
    count = 0
    async for event in handle.fetch_history_events():
        attrs = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and attrs.activity_type.name == name:
            count += 1
    return count


@pytest.mark.usefixtures("worker")
async def test_a_run_whose_agent_uses_an_mcp_tool(client, llm, tmp_path, closing):
    from tests.fakes.openai_server import ToolUse
    from tests.runs import finish

    counted = tmp_path / "count.txt"
    llm.reply = [
        ToolUse("mcp_fake_count", {"note": "one"}),
        ToolUse("mcp_fake_count", {"note": "two"}),
        "counted twice",
        ToolUse("mcp_fake_echo", {"text": "hello"}),
        "echoed",
    ]
    handle = await start_graph(client, graph(tmp_path), {"fake": fake(count_file=counted)})
    state = await finish(client, handle)
    assert state.status == "completed", state.error
    assert [line.split(" ", 1)[1] for line in lines(counted)] == ["one", "two"]
    # Offered exactly the granted tools of the declared server (ghost is declared nowhere).
    assert [sorted(offered(r)) for r in llm.requests] == [["mcp_fake_count", "mcp_fake_echo"]] * 5
    assert [tool_answers(r) for r in llm.requests] == [[], ["1"], ["1", "2"], [], ["hello"]]
    # Two steps used the server; its tools were listed once in the run, each call its own activity.
    assert await activities_named(handle, "list_mcp_tools") == 1
    assert await activities_named(handle, "call_mcp_tool") == 3


@pytest.mark.usefixtures("worker")
async def test_a_tool_outside_allowed_tools_is_refused_and_the_step_goes_on(client, llm, tmp_path, closing):
    from tests.fakes.openai_server import ToolUse
    from tests.runs import finish

    counted = tmp_path / "count.txt"
    llm.reply = [ToolUse("mcp_fake_count", {"note": "must not run"}), "refused, fine", "done"]
    policy = {"mcp": {"default_deny": True, "allowed_tools": ["fake:echo"]}}
    handle = await start_graph(client, graph(tmp_path), {"fake": fake(count_file=counted)}, policy)
    state = await finish(client, handle)
    assert state.status == "completed", state.error
    assert lines(counted) == []  # the server never ran it
    answer = tool_answers(llm.requests[1])
    assert len(answer) == 1 and "not in [mcp] allowed_tools" in answer[0]


@pytest.mark.usefixtures("worker")
async def test_a_server_that_crashes_mid_run_is_started_again_and_the_run_goes_on(client, llm, tmp_path, closing):
    from tests.fakes.openai_server import ToolUse
    from tests.runs import finish

    counted = tmp_path / "count.txt"
    spec = tmp_path / "graph.yaml"
    spec.write_text(GRAPH.replace("tool_names: [count, echo]", "tool_names: [count, crash]"))
    llm.reply = [ToolUse("mcp_fake_crash", {}), ToolUse("mcp_fake_count", {"note": "after"}), "done", "done"]
    handle = await start_graph(client, spec, {"fake": fake(count_file=counted)})
    state = await finish(client, handle)
    assert state.status == "completed", state.error
    crashed, counted_answer = tool_answers(llm.requests[2])
    assert "went away" in crashed  # each attempt crashed it; the model is told, the step goes on
    assert counted_answer == "1" and len(lines(counted)) == 1  # a server started anew answered
    assert await activities_named(handle, "call_mcp_tool") == 2


# A real third-party server: @modelcontextprotocol/server-filesystem from npm, installed once into
# the tests' cache folder (as tests/compat installs cycgraph; .ci/run installs it beforehand).

FILESYSTEM_VERSION = "2026.8.31"


@pytest.fixture(scope="session")
def filesystem_server() -> Path:
    """The server's entry point, installed with npm into the cache folder once."""
    import json
    import shutil

    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the filesystem MCP server runs under Node")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "agentrun-tests" / "mcp-filesystem"
    package = folder / "node_modules" / "@modelcontextprotocol" / "server-filesystem"
    manifest = package / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != FILESYSTEM_VERSION:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder)]
            + [f"@modelcontextprotocol/server-filesystem@{FILESYSTEM_VERSION}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return package / "dist" / "index.js"


@pytest.mark.usefixtures("worker")
async def test_a_real_filesystem_server_writes_and_reads_for_the_agent(
    client, llm, tmp_path, filesystem_server, closing
):
    from tests.fakes.openai_server import ToolUse
    from tests.runs import finish

    shared = tmp_path / "shared"
    shared.mkdir()
    (tmp_path / "outside.txt").write_text("not yours")
    spec = tmp_path / "graph.yaml"
    spec.write_text(GRAPH.replace("server_id: fake, tool_names: [count, echo]", "server_id: files"))
    note = str(shared / "note.txt")
    llm.reply = [
        ToolUse("mcp_files_write_file", {"path": note, "content": "NOTE-1"}),
        ToolUse("mcp_files_read_text_file", {"path": note}),
        ToolUse("mcp_files_read_text_file", {"path": str(tmp_path / "outside.txt")}),
        "done",
        "done",
    ]
    modules = next(p for p in filesystem_server.parents if p.name == "node_modules")
    # Behind the boundary, the declaration opens what the server runs from and the folder it serves.
    server = McpServer(
        id="files",
        command="node",
        args=[str(filesystem_server), str(shared)],
        allow_read=[str(modules)],
        allow_write=[str(shared)],
    )
    handle = await start_graph(client, spec, {"files": server})
    state = await finish(client, handle)
    assert state.status == "completed", state.error
    assert (shared / "note.txt").read_text() == "NOTE-1"
    wrote, read, outside = tool_answers(llm.requests[3])
    assert "NOTE-1" in read
    assert "not yours" not in outside and "denied" in outside.lower()  # the server keeps to its folder
    assert "mcp_files_write_file" in offered(llm.requests[0])


# Declared once: in agentrun.yaml for every spec beside it, or by an Agentfile's agent.toml.


def test_agentrun_yaml_declares_servers_and_a_grant_of_an_undeclared_one_is_said(cli, tmp_path):
    spec = graph(tmp_path)
    (tmp_path / "agentrun.yaml").write_text(
        "agents: {default: 'openai:counter'}\n"
        "mcp_servers:\n  fake: {command: python, args: [-m, tests.fakes.mcp_server], env: [FAKE_MCP_COUNT_FILE]}\n"
    )
    result = cli("dry-run", str(spec), "-p", "topic=T")
    assert result.code == 0, result.err
    assert "MCP server 'ghost', which is declared nowhere" in result.err
    assert "'fake'" not in result.err

    (tmp_path / "agentrun.yaml").write_text("mcp_servers:\n  fake: {command: python, url: 'http://127.0.0.1:1/mcp'}\n")
    from agentrun.explain.agents import mcp_servers
    from agentrun.lang.errors import SpecError

    with pytest.raises(SpecError) as bad:
        mcp_servers(str(tmp_path))
    assert str(bad.value.problems[0]).startswith(f"{tmp_path / 'agentrun.yaml'}:2:3: error: MCP server 'fake'")
    assert "give either `command` (stdio) or `url`" in str(bad.value.problems[0])


AGENTFILE = """NAME tally
GOAL tally "Count the topic once with the count tool"
RUN main USING tally
"""


def checkpoint_agent(messages) -> object:
    """An Agentfile goal's agent: a plan to COMMIT; at EXECUTE one call of the MCP tool, then the work."""
    from tests.fakes.openai_server import ToolUse

    if "Phase COMMIT" in str(messages[-1].get("content")):
        keys = ("interpretation", "approach")
        return json.dumps(
            {**dict.fromkeys(keys, "x"), "scope_in": [], "scope_out": [], "predictions": [], "assumptions": []}
            | {"confidence": 0.9}
        )
    if not any(m["role"] == "tool" for m in messages):
        return ToolUse("mcp_fake_count", {"note": "from the agentfile"})
    post = {"output": "TALLIED", "tools_used": ["mcp_fake_count"], "commitment_met": "yes", "scope_changed": False}
    return json.dumps(post | {"concerns": [], "deviations": [], "unexpected_results": []})


@pytest.mark.usefixtures("worker")
async def test_an_agentfile_reaches_the_servers_its_agent_toml_declares(client, llm, tmp_path, closing):
    from tests.runs import run_spec

    counted = tmp_path / "count.txt"
    spec = tmp_path / "Agentfile"
    spec.write_text(AGENTFILE)
    (tmp_path / "agent.toml").write_text(
        f'[mcp.servers.fake]\ncommand = "{sys.executable}"\nargs = ["{ROOT / "tests" / "fakes" / "mcp_server.py"}"]\n'
        f'env = {{FAKE_MCP_COUNT_FILE = "{counted}"}}\ndenied_tools = ["crash"]\nallow_write = ["{tmp_path}"]\n'
    )
    llm.reply = checkpoint_agent
    state = await run_spec(client, spec, "openai:default")
    assert state.status == "completed", state.errors
    assert lines(counted)[0].endswith("from the agentfile")
    offered_now = offered(llm.requests[1])
    assert "mcp_fake_count" in offered_now and "mcp_fake_crash" not in offered_now


PIPELINE = """
workflow:
  name: tally
  mcp_servers:
    fake:
      command: {python}
      args: [{server}]
      env: {{FAKE_MCP_COUNT_FILE: {counted}}}
      allow_write: [{folder}]
  agents:
    counter:
      prompt: Count once.
      tools: [Read, mcp__fake__count]
  steps:
    - id: count
      agent: counter
"""


@pytest.mark.usefixtures("worker")
async def test_a_pipeline_declares_a_server_and_grants_a_tool_by_claude_codes_name(client, llm, tmp_path, closing):
    from tests.fakes.openai_server import ToolUse
    from tests.runs import run_spec

    counted = tmp_path / "count.txt"
    spec = tmp_path / "pipeline.yaml"
    server = ROOT / "tests" / "fakes" / "mcp_server.py"
    spec.write_text(PIPELINE.format(python=sys.executable, server=server, counted=counted, folder=tmp_path))
    llm.reply = [ToolUse("mcp_fake_count", {"note": "from the pipeline"}), "counted"]
    state = await run_spec(client, spec, "openai:counter")
    assert state.status == "completed", state.errors
    assert lines(counted)[0].endswith("from the pipeline")
    assert sorted(offered(llm.requests[0])) == ["mcp_fake_count", "read"]
