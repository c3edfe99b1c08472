"""Shared fixtures: one real Temporal dev server for the session, an in-process worker, CLI runners."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from client.embedded import temporal_binary
from worker.build import build_worker
from workflows import search

ROOT = Path(__file__).resolve().parent.parent
SHELL_AGENT = f"command:{sys.executable} {ROOT / 'examples' / 'agents' / 'shell_agent.py'}"
HISTORIES = ROOT / "tests" / "histories"
TEST_QUEUE = "agentrun"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def env():
    environment = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=list(search.ALL),
        dev_server_log_level="error",
    )
    yield environment
    await environment.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def client(env) -> Client:
    return env.client


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def worker(client):
    """An in-process worker polling the default queue, so CLI runs started by tests are served."""
    async with build_worker(client, TEST_QUEUE):
        yield


@pytest.fixture
def address(env) -> str:
    return env.client.service_client.config.target_host


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(address, tmp_path):
    """Run `python -m client ...` as a user would, against the session's server."""

    def run(*args: str, timeout: float = 120, extra_env: dict | None = None) -> Result:
        environ = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTRUN_STATE_DIR": str(tmp_path / "state"),
                   "AGENTRUN_HEARTBEAT_S": "5", **(extra_env or {})}
        environ.pop("TEMPORAL_PROFILE", None)
        proc = subprocess.run([sys.executable, "-m", "client", *args], capture_output=True, text=True,
                              timeout=timeout, env=environ, cwd=ROOT)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


def run_id(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def write_spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path
