"""The MCP server attacked by the agent it serves, judged by what comes back and what it changed:
trees and `$ref`s that lead out of its roots (an absolute path, `../`, a symlink) are refused without
a byte of the file they name, a scalar a `$ref` points at is never quoted, and its execution tools
leave alone a run it did not start (a CLI run whose id looks like an execution's)."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import ROOT, write_spec
from tests.specs import SHED
from tests.trees import action, tree_file

SECRET = "sk-live-5ecret-value-0f-the-user"
PASSWD_LINE = "root:x:0:0"


def server(address: str, root: Path, queue: str = "mcp-roots") -> StdioServerParameters:
    """The server as an agent's client starts it: in `root`, with no other root."""
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "agentrun.client", "mcp", "--task-queue", queue], env=environ, cwd=str(root)
    )


def _text(result) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content) + json.dumps(result.structured_content or {})


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder the server is started in, beside files it must not read."""
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "secret.yaml").write_text(f"api_key: {SECRET}\nother: {{type: action}}\n")
    (tmp_path / "secret-tree.json").write_text((tree_file(root, action("A", "instruct: go"))).read_text())
    (root / "inside-secret.yaml").write_text(f"api_key: {SECRET}\n")
    (root / "link.yaml").symlink_to(tmp_path / "secret.yaml")
    (root / "fragments").symlink_to(tmp_path, target_is_directory=True)
    return root


def _tree_with_ref(root: Path, ref: str) -> Path:
    document = {"name": "t", "version": "1.0.0", "tree": {"type": "sequence", "name": "S", "children": [{"$ref": ref}]}}
    path = root / f"tree-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(document))
    return path


# (what the tree or the call names, which file's content must not come back)
ATTACKS = [
    ("$ref: /etc/passwd", "/etc/passwd", PASSWD_LINE),
    ("$ref: ../ to a YAML of secrets", "../secret.yaml#/api_key", SECRET),
    ("$ref: a symlink out of the root", "link.yaml#/api_key", SECRET),
    ("$ref: through a symlinked folder", "fragments/secret.yaml#/api_key", SECRET),
    ("$ref: a scalar of a file inside the root", "inside-secret.yaml#/api_key", SECRET),
]


@pytest.mark.parametrize(("case", "ref", "content"), ATTACKS, ids=[a[0] for a in ATTACKS])
async def test_a_ref_out_of_the_roots_or_at_a_secret_is_refused_without_its_content(
    address, project, case, ref, content
):
    tree = _tree_with_ref(project, ref)
    async with Client(server(address, project)) as session:
        result = await session.call_tool(
            "start_execution", {"tree_uri": str(tree), "trace_output": f"traces/{uuid.uuid4().hex[:8]}.json"}
        )
    said = _text(result)
    assert result.is_error, said
    assert content not in said
    assert "did you mean" not in said


async def test_a_near_miss_outside_the_root_gets_no_listing_of_that_folder(address, project):
    """'did you mean' would name the files of a folder the server must not look into."""
    tree = _tree_with_ref(project, "../secret.yml")
    async with Client(server(address, project)) as session:
        result = await session.call_tool(
            "start_execution", {"tree_uri": str(tree), "trace_output": f"traces/{uuid.uuid4().hex[:8]}.json"}
        )
    said = _text(result)
    assert result.is_error and "outside the folders this server reads" in said, said
    assert "secret.yaml" not in said and "did you mean" not in said


OUTSIDE = "outside the folders this server reads"


# (the tree file named, why it is refused): a name that is no tree file is refused before any root is
# looked at, so the roots are tested with tree files out of them, one reached through a symlinked folder.
@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("/etc/passwd", "is not a tree file"),
        ("../secret-tree.json", OUTSIDE),
        ("../secret.yaml", OUTSIDE),
        ("fragments/secret-tree.json", OUTSIDE),
    ],
)
async def test_a_tree_file_out_of_the_roots_is_refused(address, project, where, why):
    uri = where if where.startswith("/") else str(project / where)
    async with Client(server(address, project)) as session:
        result = await session.call_tool(
            "start_execution", {"tree_uri": uri, "trace_output": f"traces/{uuid.uuid4().hex[:8]}.json"}
        )
    said = _text(result)
    assert result.is_error and why in said, said
    assert PASSWD_LINE not in said and SECRET not in said


async def test_a_tree_under_a_root_the_client_declares_is_read(address, project, tmp_path):
    """The client's declared roots widen what the server reads: a tree outside its folder runs."""
    from mcp import types

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tree = tree_file(elsewhere, action("A", "instruct: go"))

    async def roots(context) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=elsewhere.as_uri())])  # pyright: ignore[reportArgumentType]

    address_ = f"traces/{uuid.uuid4().hex[:8]}.json"
    async with Client(server(address, project), list_roots_callback=roots) as session:
        started = await session.call_tool("start_execution", {"tree_uri": str(tree), "trace_output": address_})
        assert not started.is_error, _text(started)
    async with Client(server(address, project)) as session:  # a client without that root
        refused = await session.call_tool(
            "start_execution", {"tree_uri": str(tree), "trace_output": f"traces/{uuid.uuid4().hex[:8]}.json"}
        )
        assert refused.is_error and "outside the folders this server reads" in _text(refused)


TOOLS_ON_A_RUN = [
    ("reset_execution", {}),
    ("get_execution", {}),
    ("resume_execution", {}),
    ("next_step", {}),
    ("submit", {"status": "success"}),
    ("eval", {"result": True}),
    ("think", {"thought": "x"}),
    ("var_write", {"path": "x", "value": "1"}),
    ("var_read", {}),
    ("const_read", {}),
    ("read_trace", {}),
]


async def test_execution_tools_leave_alone_a_run_they_did_not_start(cli, client, address, project, tmp_path):
    """A CLI run whose id is what an execution's would be ('bt-' and the address): every tool
    answers that there is no execution there, and the run is neither reset nor read."""
    name = f"victim-{uuid.uuid4().hex[:6]}"
    spec = write_spec(tmp_path, SHED, "shed.yaml")
    started = cli(
        "start", str(spec), "--agent", "openai:worker", "--id", f"bt-{name}", "--task-queue", "nobody-polls", "--detach"
    )
    assert started.code == 0, started.err
    before = await client.get_workflow_handle(f"bt-{name}").describe()
    async with Client(server(address, project)) as session:
        for tool, args in TOOLS_ON_A_RUN:
            result = await session.call_tool(tool, {"trace_output": name, **args})
            assert result.is_error, (tool, _text(result))
            assert "no execution at" in _text(result), (tool, _text(result))
    after = await client.get_workflow_handle(f"bt-{name}").describe()
    assert (after.run_id, after.status) == (before.run_id, before.status)  # not terminated, not started again
    await client.get_workflow_handle(f"bt-{name}").terminate("test over")


async def test_over_http_a_foreign_host_is_refused(address, project):
    """Streamable HTTP listens on loopback, and the SDK's transport security refuses a rebound name."""
    import socket
    import subprocess

    import httpx

    from tests.conftest import until

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrun.client", "mcp", "--http", str(port), "--no-worker"],
        env=environ,
        cwd=str(project),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        await until(up, timeout_s=60)
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx.AsyncClient() as http:
            refused = await http.post(
                f"http://127.0.0.1:{port}/mcp",
                json=hello,
                headers={"Host": f"rebind.attacker.test:{port}", "Accept": "application/json, text/event-stream"},
            )
        assert refused.status_code == 421
    finally:
        proc.kill()
        proc.wait()
