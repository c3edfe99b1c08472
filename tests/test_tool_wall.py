"""The OS boundary around what an agent runs (tools.wall), attacked from inside: commands that get
past bash's text checks (paths built with chr(47), globs, variables, a sibling folder under /tmp)
and a stdio MCP server, judged by side effects: what reached a canary server, what is on disk
outside the work directory, which planted text came back to the model.

Each row fails without the boundary (checked on the code before it: the command connects, reads,
writes, makes an agentrun.yaml; the MCP server reads its parent's environment; `allow_write`,
`allow_read`, `allow_network`, `sandbox` and bash's `allow_domains` were keys the policy refused or
ignored; a worker without layers ran bash anyway). The attacks run behind each layer this machine
has, alone and together: Landlock alone cannot keep one file of the work directory read-only, so
the protected-file rows need bubblewrap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrun.activities.tools import wall
from agentrun.models import tool_policy
from agentrun.models.tools import ToolPolicy, ToolResult
from tests.conftest import ROOT, start_worker
from tests.fakes.web import FakeWeb
from tests.tool_calls import OneToolCall, call, make_input, start_tool_worker

PLANTED = "planted-outside-7c2e91"
CREDENTIAL = "sk-wall-credential-3f8a"


def python(code: str) -> str:
    """A python3 -c command whose text holds no slash: `/` is written chr(47), so the text checks
    see no path and only the OS stands in the way."""
    return 'python3 -c "' + code.replace("/", "'+chr(47)+'") + '"'


def reads(path: Path) -> str:
    return python(f"print(open('{path}').read())")


def connects(port: int) -> str:
    return python(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')")


def fetches(port: int) -> str:
    return python(f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/x', timeout=3).read())")


@dataclass
class Place:
    wd: Path
    sibling: Path  # another run's folder under the same temporary folder
    canary: FakeWeb
    temporal_port: int
    state: Path  # the engine's state folder
    home_file: Path  # a file planted in the home folder
    system_file: Path  # where a write outside would land


@pytest.fixture
def place(tmp_path, address) -> Iterator[Place]:
    wd, sibling = tmp_path / "work", tmp_path / "elsewhere"
    wd.mkdir()
    sibling.mkdir()
    (wd / "credentials.toml").write_text(f'api_key = "{CREDENTIAL}"\n')
    (wd / "policy.toml").write_text("default_deny = true\n")
    (wd / ".env.local").write_text(f"KEY={CREDENTIAL}\n")
    state = Path(os.environ.get("AGENTRUN_STATE_DIR") or Path.home() / ".local/state/agentrun")
    state.mkdir(parents=True, exist_ok=True)
    home_file = Path.home() / f"agentrun-wall-{uuid.uuid4().hex[:8]}.txt"
    home_file.write_text(PLANTED)
    (state / "wall-canary.txt").write_text(PLANTED)
    (sibling / "secret.txt").write_text(PLANTED)
    with FakeWeb() as canary:
        canary.page("/x", "canary page")
        try:
            yield Place(
                wd,
                sibling,
                canary,
                int(address.rsplit(":", 1)[1]),
                state,
                home_file,
                Path("/var") / f"agentrun-wall-{uuid.uuid4().hex[:8]}",
            )
        finally:
            home_file.unlink(missing_ok=True)
            (state / "wall-canary.txt").unlink(missing_ok=True)


@dataclass
class Attack:
    name: str
    command: Callable[[Place], str]
    check: Callable[[Place, ToolResult], None]
    policy: str = ""  # a policy.toml's text
    # Landlock alone cannot make one file of a writable folder read-only or empty: bubblewrap's binds do.
    needs_bwrap: bool = False


def _nothing_planted(p: Place, r: ToolResult) -> None:
    assert PLANTED not in r.content and CREDENTIAL not in r.content, r.content


def _no_canary_hit(p: Place, r: ToolResult) -> None:
    assert p.canary.count == 0 and "canary page" not in r.content, r.content


ATTACKS = [
    Attack(
        "connect to the Temporal server's port",
        lambda p: connects(p.temporal_port),
        lambda p, r: _stdout_lacks(r, "connected"),
    ),
    Attack("fetch from a loopback canary server", lambda p: fetches(p.canary.port), _no_canary_hit),
    Attack("read the engine's state folder", lambda p: reads(p.state / "wall-canary.txt"), _nothing_planted),
    Attack("read a file in the home folder", lambda p: reads(p.home_file), _nothing_planted),
    Attack(
        "list the home folder",
        lambda p: python(f"import os; print(os.listdir('{p.home_file.parent}'))"),
        lambda p, r: _stdout_lacks(r, p.home_file.name),
    ),
    # The text checks let /tmp through (a command's scratch files): a sibling under it is reachable by name.
    Attack("read another run's folder", lambda p: f"cat {p.sibling}/secret.txt", _nothing_planted),
    Attack(
        "write a file under /var",
        lambda p: python(f"open('{p.system_file}', 'w').write('x')"),
        lambda p, r: _absent(p.system_file),
    ),
    Attack(
        "write into a sibling folder under the same temporary folder",
        lambda p: f"echo x > {p.sibling}/f",
        lambda p, r: _absent(p.sibling / "f"),
    ),
    Attack("read credentials.toml through a glob", lambda p: "cat cred*.toml", _nothing_planted, needs_bwrap=True),
    Attack("read .env.local through a glob", lambda p: "cat .e*", _nothing_planted, needs_bwrap=True),
    Attack(
        "overwrite policy.toml named through a variable",
        lambda p: "p=policy; echo 'default_deny = false' > $p.toml",
        lambda p, r: _unchanged(p.wd / "policy.toml", "default_deny = true\n"),
        needs_bwrap=True,
    ),
    Attack(
        "make an agentrun.yaml the next run would read, named through a variable",
        lambda p: "n=agentrun; echo 'mcp_servers: {}' > $n.yaml; ls",
        lambda p, r: _gone(p.wd / "agentrun.yaml", r),
    ),
    Attack(
        "remove policy.toml named through a variable",
        lambda p: "p=policy; rm -f $p.toml",
        lambda p, r: _unchanged(p.wd / "policy.toml", "default_deny = true\n"),
        needs_bwrap=True,
    ),
]


def _stdout_lacks(r: ToolResult, text: str) -> None:
    assert r.ok, r.content
    assert text not in json.loads(r.content)["stdout"], r.content


def _gone(path: Path, r: ToolResult) -> None:
    assert not path.exists() and f"removed {path.name}" in r.content, r.content


def _absent(path: Path) -> None:
    try:
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)


def _unchanged(path: Path, text: str) -> None:
    assert path.exists() and path.read_text() == text


FOUND = wall.layers()
# Each layer this machine has, alone and together (a worker uses both).
LAYERS = {
    name: layers
    for name, layers in (
        ("bwrap+landlock", FOUND),
        ("bwrap", wall.Layers(FOUND.bwrap, 0)),
        ("landlock", wall.Layers("", FOUND.landlock)),
    )
    if (layers.bwrap or "bwrap" not in name) and (layers.landlock or "landlock" not in name)
}
CASES = [(a, name) for a in ATTACKS for name in LAYERS if a.needs_bwrap <= bool(LAYERS[name].bwrap)]


@pytest.mark.parametrize(("attack", "layers"), CASES, ids=[f"{a.name} [{name}]" for a, name in CASES])
async def test_a_command_cannot_reach_past_the_boundary(place, attack, layers, monkeypatch):
    monkeypatch.setattr(wall, "layers", lambda: LAYERS[layers])
    policy = tool_policy.parse(attack.policy) if attack.policy else ToolPolicy()
    result = await call(place.wd, "bash", policy, command=attack.command(place))
    assert not result.refused, result.content  # past the text checks: the OS is what stops it
    attack.check(place, result)
    assert (place.sibling / "secret.txt").read_text() == PLANTED


async def test_the_work_directory_is_the_writable_place(place):
    (place.wd / "sub").mkdir()
    os.symlink("../policy.toml", place.wd / "sub" / "agent.toml")  # the user's own: left alone
    result = await call(place.wd, "bash", command="echo made > made.txt; cat made.txt; ls -a")
    assert (place.wd / "sub" / "agent.toml").is_symlink()
    assert result.ok and "made" in json.loads(result.content)["stdout"]
    assert (place.wd / "made.txt").read_text() == "made\n"
    listed = json.loads(result.content)["stdout"].split()
    assert "credentials.toml" in listed  # there, but empty: masked, not hidden by name


@dataclass
class Grant:
    name: str
    policy: str
    command: Callable[[Place], str]
    check: Callable[[Place, ToolResult], None]


def _wrote_and_read(p: Place, r: ToolResult) -> None:
    assert (p.sibling / "f").read_text() == "granted\n" and PLANTED in r.content, r.content


def _read_only(p: Place, r: ToolResult) -> None:
    assert PLANTED in r.content and not (p.sibling / "f").exists(), r.content


def _refused_by_proxy(p: Place, r: ToolResult) -> None:
    assert p.canary.count == 0 and "403" in r.content and "connected" not in json.loads(r.content)["stdout"], r.content


def _reached(p: Place, r: ToolResult) -> None:
    assert p.canary.count == 1 and "canary page" in r.content, r.content


GRANTS = [
    Grant(
        "allow_write opens a folder",
        '[bash]\nallow_write = ["$WORKSPACE/../elsewhere"]\n',
        lambda p: f"echo granted > {p.sibling}/f; cat {p.sibling}/secret.txt",
        _wrote_and_read,
    ),
    Grant(
        "allow_read opens a folder read-only",
        '[bash]\nallow_read = ["$WORKSPACE/../elsewhere"]\n',
        lambda p: f"cat {p.sibling}/secret.txt; echo x > {p.sibling}/f",
        _read_only,
    ),
    Grant(
        "allow_domains lets a listed host through the worker's proxy",
        '[bash]\nallow_domains = ["127.0.0.1"]\n[web_fetch]\nallow_private = true\n',
        lambda p: fetches(p.canary.port),
        _reached,
    ),
    Grant(
        "allow_domains opens a CONNECT tunnel to a listed host",
        '[bash]\nallow_domains = ["127.0.0.1"]\n[web_fetch]\nallow_private = true\n',
        lambda p: python(
            "import http.client as h, os, urllib.parse as u; x = u.urlsplit(os.environ['HTTPS_PROXY']); "
            f"c = h.HTTPConnection(x.hostname, x.port); c.set_tunnel('127.0.0.1', {p.canary.port}); "
            "c.request('GET', '/x'); print(c.getresponse().read())"
        ),
        _reached,
    ),
    Grant(
        "allow_domains keeps every other host out",
        '[bash]\nallow_domains = ["example.com"]\n[web_fetch]\nallow_private = true\n',
        lambda p: (
            fetches(p.canary.port)
            + "; "
            + python(
                f"import socket; socket.create_connection(('127.0.0.1', {p.canary.port}), timeout=3); print('connected')"
            )
        ),
        _refused_by_proxy,
    ),
    Grant(
        "allow_domains still refuses a private address",
        '[bash]\nallow_domains = ["127.0.0.1"]\n',
        lambda p: fetches(p.canary.port),
        _refused_by_proxy,
    ),
    Grant(
        "allow_network keeps the host's network",
        "[bash]\nallow_network = true\n",
        lambda p: fetches(p.canary.port),
        _reached,
    ),
]


@pytest.mark.parametrize("grant", GRANTS, ids=[g.name for g in GRANTS])
async def test_a_policy_grant_opens_the_boundary(place, grant):
    result = await call(place.wd, "bash", tool_policy.parse(grant.policy), command=grant.command(place))
    assert result.ok, result.content
    grant.check(place, result)


async def test_without_layers_bash_is_refused_unless_the_policy_turns_the_sandbox_off(client, address, tmp_path):
    """A worker that can make no boundary (a test drops the layers) refuses bash, and says why and
    how to turn it off; with `sandbox = "off"` the command runs as before."""
    wd = tmp_path / "work"
    wd.mkdir()
    queue = f"wall-{uuid.uuid4().hex[:8]}"
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "AGENTRUN_SANDBOX_LAYERS": "none",
    }
    worker = start_tool_worker(address, queue, env)
    try:

        async def run(policy: ToolPolicy) -> ToolResult:
            return await client.execute_workflow(
                OneToolCall.run,
                make_input(wd, "bash", policy, command="echo ran > ran.txt"),
                id=f"{queue}-{uuid.uuid4().hex[:6]}",
                task_queue=queue,
            )

        refused = await run(ToolPolicy())
        assert refused.refused and 'sandbox = "off"' in refused.content, refused.content
        assert not (wd / "ran.txt").exists()
        ran = await run(tool_policy.parse('sandbox = "off"\n'))
        assert ran.ok, ran.content
        assert (wd / "ran.txt").read_text() == "ran\n"
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize("layers", ["none", "landlock"])
def test_a_worker_says_at_start_which_layers_it_has(address, layers):
    worker = start_worker(address, "--task-queue", f"wall-{uuid.uuid4().hex[:8]}", env={wall.LAYERS_ENV: layers})
    try:
        assert worker.stdout is not None
        said = worker.stdout.readline().decode()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert said.startswith("sandbox layers for bash and stdio MCP servers: ")
    if layers == "none":
        assert 'bash is refused unless the policy says sandbox = "off"' in said, said
    else:
        assert "bubblewrap" not in said and ("Landlock ABI" in said or wall.landlock_abi() == 0), said


# A process that calls the fake MCP server's tools as a worker does, with a planted variable in its
# own environment; prints what each call gave back.
MCP_CALLS = """
import asyncio, json, sys
from temporalio.testing import ActivityEnvironment
from agentrun.activities.mcp import connections
from agentrun.activities.mcp.calls import call_mcp_tool
from agentrun.lang.mcp_servers import McpServer
from agentrun.models.mcp import McpCallInput

async def main():
    found = {}
    for more in json.loads(sys.argv[2]):
        sandbox = more.get("sandbox", True)
        server = McpServer(id="fake", command=sys.executable, args=["-m", "tests.fakes.mcp_server"],
                           env={"PYTHONPATH": sys.argv[1]}, cwd=sys.argv[1], **more)
        for tool in ("parent_environment", "environment"):
            arg = McpCallInput(server=server, tool=tool, call_id="c", name="mcp_fake_" + tool)
            try:
                found[f"{tool} {sandbox}"] = (await ActivityEnvironment().run(call_mcp_tool, arg)).content
            except Exception as exc:
                found[f"{tool} {sandbox}"] = "failed: " + str(exc)
        await connections.close_all()
    print(json.dumps(found))

asyncio.run(main())
"""


def _mcp_calls(layers: str, declarations: list[dict[str, bool]]) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "WALL_CANARY": PLANTED,  # not a secret's name: only the boundary keeps it in
        "AGENTRUN_SANDBOX_LAYERS": layers,
    }
    done = subprocess.run(
        [sys.executable, "-c", MCP_CALLS, str(ROOT), json.dumps(declarations)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_stdio_mcp_server_cannot_read_the_workers_environment():
    found = _mcp_calls("bwrap,landlock", [{}])
    parent, own = found["parent_environment True"], found["environment True"]
    assert "PATH=" in parent or "unreadable" in parent, parent  # it did read a parent: its own sandbox's
    assert PLANTED not in parent and PLANTED not in own
    assert "PYTHONPATH" in own  # what its declaration gives it


def test_without_layers_a_stdio_mcp_server_starts_only_when_its_declaration_says_so():
    found = _mcp_calls("none", [{}, {"sandbox": False}])
    assert "was not started" in found["environment True"] and "sandbox: false" in found["environment True"]
    assert "PYTHONPATH" in found["environment False"]  # `sandbox: false`: it runs, unconfined
