"""Behaviour-tree executions an agent drives: each is a driven run of the engine, addressed by the
`trace_output` the agent gives. What the MCP tools do, on a Temporal client, keeping nothing
between calls: every answer is an update to the run, every read a query of it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from agentrun import spelling
from agentrun.client import telemetry
from agentrun.client.launch import ensure_search_attributes, start_options
from agentrun.client.runs import NoSuchRun, RunHandle, describe, fetch_state
from agentrun.errors import ExecutionError
from agentrun.lang import ir
from agentrun.lang.blackboard import MISSING, lookup, var_path
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.models import contract
from agentrun.models.contract import EvalInput, RunInput, RunState, SubmitInput, ThinkInput, VarWriteInput
from agentrun.models.driven import Finished, NextStep, Recorded, Said, VarWritten

PREFIX = "bt-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._/:-]+")

R = TypeVar("R", Said, Recorded, VarWritten)


def execution_id(trace_output: str) -> str:
    """The run id of the execution at `trace_output`: the address itself where it is plain, with a
    short hash of it when characters had to be replaced, so two addresses never share a run."""
    plain = _UNSAFE.sub("-", trace_output.strip()).strip("-")[:180]
    if plain == trace_output:
        return PREFIX + plain
    return f"{PREFIX}{plain}-{hashlib.sha256(trace_output.encode()).hexdigest()[:8]}"


async def start_execution(client: Client, tree_uri: str, trace_output: str, task_queue: str) -> dict[str, Any]:
    plan = _tree(tree_uri)
    inp = RunInput(plan=plan, workdir=plan.spec_dir, default_agent="", driven=True, trace_output=trace_output)
    inp.search_attributes = await ensure_search_attributes(client)
    run_id = execution_id(trace_output)
    try:
        with telemetry.starting(plan, run_id):
            await client.start_workflow(
                contract.WORKFLOW,
                inp,
                id=run_id,
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                **start_options(inp),
            )
    except WorkflowAlreadyStartedError:
        raise ExecutionError(
            f"an execution already exists at {trace_output}; call resume_execution to continue it "
            "or reset_execution to start it over"
        ) from None
    return {
        "ok": True,
        "uri": trace_output,
        "tree_uri": tree_uri,
        "run_id": run_id,
        "status": "running",
        "phase": "idle",
        "var": plan.memory,
        "const": plan.constants,
    }


async def resume_execution(client: Client, trace_output: str) -> dict[str, Any]:
    state = await _state(client, trace_output)
    drive = state.drive or contract.Drive()
    return {
        "ok": True,
        "uri": trace_output,
        "run_id": state.run_id,
        "status": status_of(state),
        "phase": drive.phase,
        "protocol_accepted": drive.protocol_accepted,
    }


async def reset_execution(client: Client, trace_output: str) -> dict[str, Any]:
    """Start the execution over from its tree as first loaded: the blackboard seeded again, the
    progress and trace cleared. The run before is ended (terminated, if it was still running)."""
    run_id = execution_id(trace_output)
    desc = await _describe(client, trace_output)
    first = await _start_input(client, run_id)
    await client.start_workflow(
        contract.WORKFLOW,
        first,
        id=run_id,
        task_queue=desc.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
        **start_options(first),
    )
    return {"status": "reset"}


async def next_step(client: Client, trace_output: str) -> NextStep:
    handle, ended = await _handle(client, trace_output)
    if ended is None:
        try:
            return await _update(handle, contract.NEXT_STEP, None, NextStep)
        except ExecutionError:
            _, ended = await _handle(client, trace_output)  # it may have ended as the call reached it
            if ended is None:
                raise
    return Finished(status="done" if ended == WorkflowExecutionStatus.COMPLETED else "failure")


async def eval_step(client: Client, trace_output: str, result: bool, note: str = "") -> Said:
    return await _answer(client, trace_output, contract.EVAL, EvalInput(result=result, note=note), Said)


async def submit(client: Client, trace_output: str, status: str, note: str = "") -> Said:
    given = SubmitInput.model_validate({"status": status, "note": note})
    return await _answer(client, trace_output, contract.SUBMIT, given, Said)


async def think(client: Client, trace_output: str, thought: str) -> Recorded:
    return await _answer(client, trace_output, contract.THINK, ThinkInput(thought=thought), Recorded)


async def var_write(client: Client, trace_output: str, path: str, value: Any) -> VarWritten:
    given = VarWriteInput(path=path, value=value)
    return await _answer(client, trace_output, contract.VAR_WRITE, given, VarWritten)


async def var_read(client: Client, trace_output: str, path: str | None = None) -> Any:
    state = await _state(client, trace_output)
    return _read(state.memory, var_path(path) if path else None)


async def const_read(client: Client, trace_output: str, path: str | None = None) -> Any:
    state = await _state(client, trace_output)
    return _read(state.constants, path.removeprefix("$CONST.").removeprefix("$GLOBAL.") if path else None)


async def get_execution(client: Client, trace_output: str) -> dict[str, Any]:
    """The execution document: where it is, its blackboard and its whole trace."""
    state = await _state(client, trace_output)
    drive = state.drive or contract.Drive()
    return {
        "id": state.run_id,
        "uri": trace_output,
        "tree": state.spec,
        "status": status_of(state),
        "phase": drive.phase,
        "cursor": drive.cursor,
        "protocol_accepted": drive.protocol_accepted,
        "var": state.memory,
        "const": state.constants,
        "trace": [_entry(entry) for entry in state.trace],
        "created_at": state.started_at.isoformat() if state.started_at else None,
        "ended_at": state.ended_at.isoformat() if state.ended_at else None,
    }


async def read_trace(
    client: Client, trace_output: str, start: int | None = None, end: int | None = None
) -> dict[str, Any]:
    """Trace entries `start` up to, not including, `end` (counted from 0, as Python slices).
    The slice is under `trace` because an MCP tool's structured result is an object; `total` and
    `from` beside it let an agent page through a long trace."""
    state = await _state(client, trace_output)
    entries = [_entry(entry) for entry in state.trace]
    return {"uri": trace_output, "total": len(entries), "from": start or 0, "trace": entries[start:end]}


def _entry(entry: contract.TraceEntry) -> dict[str, Any]:
    """A trace entry as abtree writes it: `{ts, kind, cursor, name, submitted, outcome, note?}`."""
    return entry.model_dump(mode="json", exclude={"note"} if not entry.note else None)


def status_of(state: RunState) -> str:
    """running, complete or failed, as a behaviour tree's execution says it."""
    if state.status == "completed":
        return "complete"
    return "failed" if state.status in contract.TERMINAL else "running"


# ---------------------------------------------------------------------------------- helpers


TREE_SUFFIXES = (".yaml", ".yml", ".json")


def _tree(tree_uri: str) -> ir.Plan:
    path = tree_uri.removeprefix("file://")
    if not path.lower().endswith(TREE_SUFFIXES):  # another language's spec may read other files as it loads
        raise ExecutionError(f"{tree_uri} is not a tree file: a behaviour tree is a .yaml, .yml or .json file")
    try:
        plan = load(path)
    except SpecError as exc:
        raise ExecutionError(str(exc)) from None
    if not plan.traits.tree:
        raise ExecutionError(
            f"{tree_uri} is a {plan.dialect} spec, not a behaviour tree; run it with `{spelling.client()} start`"
        )
    return plan.model_copy(update={"spec_dir": str(Path(plan.spec_dir).resolve())})


async def _answer(client: Client, trace_output: str, name: str, arg: Any, reply: type[R]) -> R:
    handle, ended = await _handle(client, trace_output)
    if ended is not None:
        status = "complete" if ended == WorkflowExecutionStatus.COMPLETED else "failed"
        raise ExecutionError(f"the execution has ended ({status}); call reset_execution to run it again")
    return await _update(handle, name, arg, reply)


async def _handle(client: Client, trace_output: str) -> tuple[RunHandle, WorkflowExecutionStatus | None]:
    """The execution's run, and how it ended if it has."""
    desc = await _describe(client, trace_output)
    ended = None if desc.status == WorkflowExecutionStatus.RUNNING else desc.status
    return client.get_workflow_handle(desc.id), ended


async def _describe(client: Client, trace_output: str) -> WorkflowExecutionDescription:
    """The execution's run, if this server's kind started it: a run started otherwise (a CLI run
    whose id happens to look the same) is no execution of ours, and answered as none at all."""
    try:
        desc = await describe(client, execution_id(trace_output))
    except NoSuchRun:
        desc = None
    if desc is None or not await started_by_mcp(desc):
        raise ExecutionError(f"no execution at {trace_output}; call start_execution first")
    return desc


async def started_by_mcp(desc: WorkflowExecutionDescription) -> bool:
    if desc.typed_search_attributes.get(contract.STARTED_BY) == contract.BY_MCP:
        return True
    return await desc.memo_value(contract.STARTED_BY_MEMO, None) == contract.BY_MCP


async def _update(handle: RunHandle, name: str, arg: Any, reply: Any) -> Any:
    """The update's reply, read as `reply` (a model, or NextStep's union of them)."""
    try:
        if arg is None:
            return await handle.execute_update(name, result_type=reply)
        return await handle.execute_update(name, arg, result_type=reply)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise ExecutionError(getattr(cause, "message", None) or str(cause)) from None
    except RPCError as exc:
        raise ExecutionError(f"the execution's run could not take the call: {exc.message}") from None


async def _state(client: Client, trace_output: str) -> RunState:
    desc = await _describe(client, trace_output)
    try:
        return await fetch_state(client, desc.id, desc)
    except NoSuchRun:
        raise ExecutionError(f"no execution at {trace_output}; call start_execution first") from None


async def _start_input(client: Client, run_id: str) -> RunInput:
    """The input the execution was first started with, read from its history."""
    try:
        async for event in client.get_workflow_handle(run_id).fetch_history_events():
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            (inp,) = await client.data_converter.decode(payloads, [RunInput])
            return inp
    except RPCError:
        pass
    raise ExecutionError(f"no execution at {run_id.removeprefix(PREFIX)}; call start_execution first")


def _read(values: dict[str, Any], path: str | None) -> Any:
    if not path:
        return values
    value = lookup(values, path)
    return {"path": path, "value": None if value is MISSING else value}


class Executions:
    """The driven runs of one Temporal namespace, as the MCP server's tools reach them: each method
    is the module's function of the same job on this engine's client."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def start(self, tree_uri: str, trace_output: str, task_queue: str) -> dict[str, Any]:
        return await start_execution(self._client, tree_uri, trace_output, task_queue)

    async def resume(self, trace_output: str) -> dict[str, Any]:
        return await resume_execution(self._client, trace_output)

    async def reset(self, trace_output: str) -> dict[str, Any]:
        return await reset_execution(self._client, trace_output)

    async def get(self, trace_output: str) -> dict[str, Any]:
        return await get_execution(self._client, trace_output)

    async def read_trace(self, trace_output: str, start: int | None = None, end: int | None = None) -> dict[str, Any]:
        return await read_trace(self._client, trace_output, start, end)

    async def next_step(self, trace_output: str) -> NextStep:
        return await next_step(self._client, trace_output)

    async def eval_step(self, trace_output: str, result: bool, note: str = "") -> Said:
        return await eval_step(self._client, trace_output, result, note)

    async def submit(self, trace_output: str, status: str, note: str = "") -> Said:
        return await submit(self._client, trace_output, status, note)

    async def think(self, trace_output: str, thought: str) -> Recorded:
        return await think(self._client, trace_output, thought)

    async def var_read(self, trace_output: str, path: str | None = None) -> Any:
        return await var_read(self._client, trace_output, path)

    async def var_write(self, trace_output: str, path: str, value: Any) -> VarWritten:
        return await var_write(self._client, trace_output, path, value)

    async def const_read(self, trace_output: str, path: str | None = None) -> Any:
        return await const_read(self._client, trace_output, path)
