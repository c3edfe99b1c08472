"""`client start`: start an AgentRun from what `prepare` checked, run a worker if none is there, follow it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from agentrun import startup
from agentrun.client import endpoints, retries, telemetry
from agentrun.client.follow import follow
from agentrun.client.humans import Prompter
from agentrun.client.no_worker import hint
from agentrun.client.runs import RunHandle, UsageError, pollers
from agentrun.explain import outputs, report
from agentrun.explain.tails import STALL_S
from agentrun.models import contract
from agentrun.models.contract import RunInput
from agentrun.models.names import own_queue, run_queue
from agentrun.worker.connection import web_url
from agentrun.worker.embedded import state_dir


async def start(
    client: Client, args: argparse.Namespace, inp: RunInput, console: Console, prompter: Prompter | None = None
) -> int:
    run_id = args.id = args.id or new_run_id(inp.plan.name)  # Ctrl-C names it
    inp.search_attributes, serving = await asyncio.gather(
        ensure_search_attributes(client), pollers(client, args.task_queue)
    )
    if not serving and not args.detach:  # a queue of its own, which only this process's worker polls
        args.task_queue = run_queue(args.task_queue, run_id)
    if serving or args.detach:
        return await _started(client, args, inp, console, prompter, serving)
    # This process's worker runs the run, with this environment: a model it cannot reach is said now.
    await endpoints.check(endpoints.uris(inp))
    # The worker is up before the run starts, so the server hands it the run's first workflow task
    # in its reply to the start (eager start) rather than through the queue.
    args.ran_worker = True
    async with local_worker(client, args.task_queue, needed=True, run_id=run_id) as log:
        return await _started(client, args, inp, console, prompter, serving, log)


async def _started(
    client: Client,
    args: argparse.Namespace,
    inp: RunInput,
    console: Console,
    prompter: Prompter | None,
    serving: list[str],
    log: Path | None = None,
) -> int:
    """Start the run on args.task_queue, say which worker runs it, and follow it unless detached;
    `log`: the log of this process's worker, when it runs the run."""
    run_id = args.id
    with telemetry.starting(inp.plan, run_id):
        handle = await start_run(client, inp, run_id, args.task_queue, eager=log is not None)
    console.print(f"run {run_id} started", markup=False, highlight=False)
    link = web_url(client, run_id)
    if link:
        console.print(f"Temporal Web: {link}", markup=False, highlight=False)
    if args.detach and not serving:
        console.print(hint(run_id, args.task_queue), markup=False)
        return 0
    console.print(_worker_line(client, run_id, args.task_queue, serving), markup=False, highlight=False)
    if args.detach:
        return 0
    return await watch(client, handle.id, console, prompter, log, stall_s=getattr(args, "stall", None))


def new_run_id(spec: str) -> str:
    """A run's id when none is given: the spec's name and a random suffix."""
    return f"{spec}-{uuid.uuid4().hex[:8]}"


def _worker_line(client: Client, run_id: str, task_queue: str, serving: list[str]) -> str:
    """Which worker runs the run: those polling the shared queue, or this process on the run's own."""
    if serving:
        return f"worker: {', '.join(sorted(set(serving)))} (polling task queue '{task_queue}')"
    return worker_note(client, run_id, task_queue)


def worker_note(client: Client, run_id: str, task_queue: str) -> str:
    """What `watch RUN --worker` says of the worker it runs: on the run's own queue it runs that run
    alone; on a shared queue it takes any run there while it polls."""
    if own_queue(task_queue, run_id):
        return f"worker: this process, {client.identity} (the run's own task queue '{task_queue}')"
    return (
        f"worker: this process, {client.identity}, polling the shared task queue '{task_queue}': "
        "while it runs it takes any run started there, not only this one"
    )


async def watch(
    client: Client,
    run_id: str,
    console: Console,
    prompter: Prompter | None = None,
    log: Path | None = None,
    stall_s: float | None = None,
) -> int:
    """Follow a run to its end and print its report; exit code 0 only for a completed run. An agent
    that writes nothing for `stall_s` seconds (default tails.STALL_S) is said to."""
    final = await follow(client, run_id, console, prompter=prompter, log=log, stall_s=stall_s or STALL_S)
    console.print()
    lost = await retries.lost_workers(client, run_id)
    text = report.to_markdown(final, lost) + outputs.section(final, every=False)
    console.print(text, markup=False, highlight=False)
    return 0 if final.status == "completed" else 1


async def start_run(client: Client, inp: RunInput, run_id: str, task_queue: str, eager: bool = False) -> RunHandle:
    """Start the AgentRun workflow of `inp` as `run_id` on `task_queue`; UsageError if the id is taken."""
    try:
        return await client.start_workflow(
            "AgentRun",
            inp,
            id=run_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            request_eager_start=eager,
            **start_options(inp),
        )
    except WorkflowAlreadyStartedError:
        raise UsageError(f"a run with id '{run_id}' already exists; pick another --id") from None


def start_options(inp: RunInput) -> dict[str, Any]:
    """What every run starts with besides its input: its search attributes, its memo (the params it
    was given, which Temporal Web shows in the run's details, and a fork's parent), and the summary
    Temporal Web lists it with."""
    attrs = None
    parent = inp.fork.parent if inp.fork else None
    if inp.search_attributes:
        pairs = [SearchAttributePair(contract.SPEC, inp.plan.name), SearchAttributePair(contract.STATUS, "pending")]
        pairs += [SearchAttributePair(contract.PARENT, parent)] if parent else []
        pairs += [SearchAttributePair(contract.STARTED_BY, contract.BY_MCP)] if inp.driven else []
        attrs = TypedSearchAttributes(pairs)
    memo: dict[str, Any] = {contract.PARAMS_MEMO: _memo_params(inp.params)}
    memo |= {contract.PARENT_MEMO: parent} if parent else {}
    if inp.driven:  # only the MCP server starts driven runs, and its tools act on these alone
        memo[contract.STARTED_BY_MEMO] = contract.BY_MCP
    return {"search_attributes": attrs, "memo": memo, "static_summary": _summary(inp)}


MEMO_PARAMS_CHARS = 4096  # a memo travels with every listing of the run: large params stay in the input


def _memo_params(params: dict[str, Any]) -> Any:
    text = json.dumps(params, default=str)
    if len(text) <= MEMO_PARAMS_CHARS:
        return params
    return f"{len(text)} characters of params: the run's input holds them (params)"


def _summary(inp: RunInput) -> str:
    plan, count = inp.plan, len(inp.plan.leaves())
    forked = f", forked from {inp.fork.parent} at {inp.fork.at}" if inp.fork else ""
    return f"{plan.name} ({plan.dialect}, {count} task{'' if count == 1 else 's'}{forked})"


@contextlib.asynccontextmanager
async def local_worker(client: Client, task_queue: str, needed: bool, run_id: str = "worker"):
    """A worker in this process while the block runs, if `needed`; its log goes to a file of the
    run's (yielded, else None), so retried failures do not fill the terminal with tracebacks."""
    if not needed:
        yield None
        return
    with startup.loading():
        from agentrun.activities.agents.agentapi import release_all
        from agentrun.activities.mcp.calls import close_connections
        from agentrun.worker import terminal_log
        from agentrun.worker.build import build_worker

    log = state_dir() / "logs" / f"{run_id}.log"
    terminal_log.to_file(log)
    async with build_worker(client, task_queue):
        yield log
    await release_all()
    await close_connections()


async def ensure_search_attributes(client: Client) -> bool:
    """Register the engine's search attributes if the server allows it; False if they are unavailable."""
    wanted = {key.name for key in contract.SEARCH_ATTRIBUTES}
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        missing = wanted - set(listed.custom_attributes)
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=client.namespace,
                    search_attributes={name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in missing},
                )
            )
        return True
    except RPCError:
        return False
