"""Upgrades under runs in flight: `upgrade check` names the open runs the installed code would
break, and with Worker Deployment Versioning a run stays on the build it started on.

The old build is a deliberately different registration of the AgentRun workflow, here in the tests:
for a spec named `legacy…` it waited on a timer before its first step, which today's code never does.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentrun.client.engine import Engine
from agentrun.lang.load import load
from agentrun.models.contract import RunInput, RunState
from agentrun.worker import build
from agentrun.workflows.agent_run import AgentRun
from agentrun.workflows.batch_run import AgentRunBatch
from tests.conftest import ROOT, SHELL_AGENT, Result, _cli_env, dev_server, run_id, start_worker, write_spec
from tests.runs import answer, open_gate, sh


@workflow.defn(name="AgentRun")
class OldAgentRun(AgentRun):
    @workflow.run
    async def run(self, inp: RunInput) -> RunState:
        if inp.plan.name.startswith("legacy"):
            await workflow.sleep(timedelta(milliseconds=1))  # what the old build did first
        return await super().run(inp)


OLD_BUILD = [OldAgentRun, AgentRunBatch]
GATED = (
    f"subtasks:\n  a:\n    instructions: {sh('echo a')}\n  b:\n    approval: true\n    instructions: {sh('echo b')}\n"
)


def old_worker(monkeypatch: pytest.MonkeyPatch, client: Client, queue: str, **options):
    """A worker of the old build: the engine's worker with the old registration of AgentRun."""
    with monkeypatch.context() as patch:
        patch.setattr(build, "WORKFLOWS", OLD_BUILD)
        return build.build_worker(client, queue, **options)


async def at_gate(client: Client, folder: Path, name: str, queue: str) -> WorkflowHandle:
    """A run of spec `name` started on `queue` and waiting at its gate `b`."""
    (folder / name).mkdir()
    plan = load(str(write_spec(folder / name, GATED.replace("subtasks:", f"name: {name}\nsubtasks:"))), given_params=())
    inp = RunInput(plan=plan, workdir=str(folder / name), default_agent=SHELL_AGENT, heartbeat_s=5)
    handle = await client.start_workflow("AgentRun", inp, id=run_id(name), task_queue=queue)
    await open_gate(handle, "b")
    return handle


async def test_check_names_the_runs_the_installed_code_would_break(client, cli, monkeypatch, tmp_path):
    queue = run_id("old-build")
    async with old_worker(monkeypatch, client, queue):
        legacy = await at_gate(client, tmp_path, "legacy", queue)
        current = await at_gate(client, tmp_path, "current", queue)
    try:
        checked = cli("upgrade", "check", "--query", f'TaskQueue = "{queue}"')
        results = await Engine(client).check_upgrade(f'TaskQueue = "{queue}"')
    finally:
        for handle in (legacy, current):
            await handle.terminate("test over")
    assert checked.code == 1, checked
    lines = checked.out.splitlines()
    # The old build's timer is where the history departs; the step is the one its task went on to.
    assert f"BREAKS  {legacy.id}: departs at event 5 (TIMER_STARTED), step a: " in checked.out, checked.out
    assert f"ok      {current.id}: replays; safe to move to this build" in lines
    assert "1 of 2 open runs replay" in checked.err
    by_run = {r.run_id: r for r in results}
    assert by_run[current.id].replays and not by_run[legacy.id].replays
    assert (by_run[legacy.id].event_id, by_run[legacy.id].step) == (5, "a")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def versioned(blob_folder):
    """A server of this module's own: its task queue's deployment, once promoted, stays so."""
    environment = await dev_server()
    yield environment
    await environment.shutdown()


def cli_on(address: str, tmp_path: Path, *args: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrun.client", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_cli_env(address, tmp_path),
        cwd=ROOT,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def pages(address: str, *paths: str) -> list[str]:
    """The page server's pages at `paths`, as a browser that presented its token gets them."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    environ = {**_cli_env(address, Path(".")), "AGENTRUN_UI_TOKEN": "upgrade-page-token"}
    args = [sys.executable, "-u", "-m", "agentrun.client", "ui", "--port", str(port)]
    proc = subprocess.Popen(args, env=environ, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("inbox at"), "the page did not start"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=True, timeout=60) as browser:
            browser.get("/?token=upgrade-page-token").raise_for_status()
            return [browser.get(path).text for path in paths]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


async def identities(handle: WorkflowHandle) -> set[str]:
    """The workers that took the run's workflow tasks."""
    history = await handle.fetch_history()
    started = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    return {e.workflow_task_started_event_attributes.identity for e in history.events if e.event_type == started}


async def test_a_run_stays_on_the_build_it_started_on(versioned, monkeypatch, tmp_path):
    from agentrun.worker.versioning import Versioning, promote

    client, queue = versioned.client, "versioned"
    address = client.service_client.config.target_host
    a, b = Versioning("agentrun", "A"), Versioning("agentrun", "B")
    async with old_worker(monkeypatch, client, queue, versioning=a, identity="worker-A"):
        await promote(client, "A", patience_s=30)
        old = await at_gate(client, tmp_path, "legacy-old", queue)
        steady = await at_gate(client, tmp_path, "steady", queue)
    async with build.build_worker(client, queue, versioning=b, identity="worker-B"):
        await promote(client, "B", patience_s=30)
        # Only the run that replays on build B's code moves to it.
        moved, kept = await Engine(client).move_runs([old.id, steady.id], "B")
        assert ([r.run_id for r in moved], [r.run_id for r in kept]) == ([steady.id], [old.id])
        await answer(steady, "b", "approve")
        assert (await steady.result())["status"] == "completed"
        answered = asyncio.create_task(answer(old, "b", "approve"))  # waits for a worker of build A
        new = await at_gate(client, tmp_path, "legacy-new", queue)
        await answer(new, "b", "approve")
        assert (await new.result())["status"] == "completed"
        assert not answered.done()
        listed = cli_on(address, tmp_path, "list", "--json")
    async with old_worker(monkeypatch, client, queue, versioning=a, identity="worker-A"):
        await answered
        assert (await old.result())["status"] == "completed"
        status = cli_on(address, tmp_path, "status", old.id)
        listing, run_page = await asyncio.to_thread(pages, address, "/runs", f"/runs/{old.id}")
    assert await identities(old) == {"worker-A"}  # build B never took build A's run
    assert await identities(new) == {"worker-B"}  # and took the new one once promoted
    assert await identities(steady) == {"worker-A", "worker-B"}  # moved, it went on on build B
    assert "build: agentrun:A" in status.out, status
    assert '<small class="build" title="worker build">agentrun:A</small>' in listing
    assert "Worker build: agentrun:A (the run stays on it)" in run_page
    builds = {row["run_id"]: row.get("build") for row in json.loads(listed.out)}
    assert builds[old.id] == "agentrun:A" and builds[new.id] == "agentrun:B", listed


async def test_a_versioned_worker_names_its_build_and_promote_makes_one_current(versioned, tmp_path):
    from agentrun import __version__
    from agentrun.worker.versioning import current_build

    client = versioned.client
    address = client.service_client.config.target_host
    flags = ("--task-queue", "cli-versioned", "--versioning", "--deployment", "cli")
    worker = start_worker(address, *flags, "--build-suffix", "one")
    try:
        said = [worker.stdout.readline().decode() for _ in range(2)]
        # The deployment's first versioned worker makes its build current, or nothing takes new runs.
        assert any(f"build {__version__}+one is current" in line for line in said), said
        refused = cli_on(address, tmp_path, "upgrade", "promote", "0.0.0+never", "--deployment", "cli")
        promoted = cli_on(address, tmp_path, "upgrade", "promote", f"{__version__}+one", "--deployment", "cli")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert refused.code == 2 and "Temporal does not know build '0.0.0+never'" in refused.err, refused
    assert promoted.code == 0, promoted
    assert await current_build(client, "cli") == f"{__version__}+one"
