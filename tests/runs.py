"""Running a spec through the real AgentRun workflow from a test, as `client start` would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from client.runs import fetch_state
from spec import params as spec_params
from spec.load import load
from tests.conftest import TEST_QUEUE, run_id
from workflows.inputs import RunInput
from workflows.state import RunState


async def run_spec(client: Client, spec: Path, agent: str, *, params: dict[str, Any] | None = None,
                   workdir: Path | None = None, **options: Any) -> RunState:
    plan = load(str(spec), given_params=(params or {}).keys())
    inp = RunInput(plan=plan, params=spec_params.bind(plan, params or {}), workdir=str(workdir or spec.parent),
                   default_agent=agent, heartbeat_s=5, **options)
    handle = await client.start_workflow("AgentRun", inp, id=run_id(plan.name), task_queue=TEST_QUEUE)
    try:
        await handle.result()
    except WorkflowFailureError:
        pass
    return await fetch_state(client, handle.id)
