"""`client start`: check the spec, start an AgentRun, run a worker if none is there, follow it."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any, NamedTuple

from rich.console import Console
from rich.prompt import Prompt
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from agentrun import contract
from agentrun.client import agents, mistakes, outputs, report, telemetry
from agentrun.client.follow import follow
from agentrun.client.humans import Prompter
from agentrun.client.no_worker import hint
from agentrun.client.runs import UsageError, worker_polling
from agentrun.contract import RunInput
from agentrun.lang import ir, params
from agentrun.lang.check import agent_ids, check, resolve_task
from agentrun.lang.errors import Problem, SpecError
from agentrun.lang.load import load
from agentrun.worker.connection import web_url
from agentrun.worker.embedded import state_dir


class Loaded(NamedTuple):
    plan: ir.Plan
    params: dict[str, Any]
    default_agent: str
    agents: dict[str, str]


def load_run(args: argparse.Namespace, agents_required: bool = True) -> Loaded:
    """The spec, its inputs and its agents from `start`/`dry-run` arguments. Raises SpecError.
    Without `agents_required` (a dry run), agents nothing configures have the URI "" ."""
    given = dict(cli_params(args.param))
    plan = load(args.spec, given_params=given)
    check(plan)
    for warning in mistakes.warnings(plan, given, args.agent):
        print(warning, file=sys.stderr)
    values = params.bind(plan, ask_missing(plan, given))
    requires = {name: a.requires for name, a in plan.agents.items() if a.requires}
    declared = {name: a.uri for name, a in plan.agents.items() if a.uri}
    resolved = agents.resolve(args.agent, plan.spec_dir, agent_ids(plan), agents_required, requires, declared)
    return Loaded(plan, values, *resolved)


def prepare(args: argparse.Namespace) -> RunInput:
    """Everything a run needs, checked before Temporal is involved. Raises SpecError."""
    plan, values, default, per_agent = load_run(args)
    if getattr(args, "no_human", False):
        refuse_human_supervision(plan)
    workdir = os.path.abspath(args.workdir or plan.spec_dir)
    if not os.path.isdir(workdir):
        raise SpecError(
            [
                Problem(
                    "--workdir",
                    0,
                    0,
                    f"work directory '{workdir}' does not exist",
                    "create it first, or leave --workdir out to use the spec's folder",
                )
            ]
        )
    resume = resolve_task(plan, args.resume_from) if args.resume_from else None
    return RunInput(
        plan=plan,
        params=values,
        workdir=workdir,
        default_agent=default,
        agents=per_agent,
        prices=agents.prices(plan.spec_dir),
        resume_from=resume,
        max_iterations=args.max_iterations,
        lenient=args.lenient,
        heartbeat_s=float(os.environ.get("AGENTRUN_HEARTBEAT_S", "30")),
        history_limit=_history_limit(),
    )


def _history_limit() -> int | None:
    """AGENTRUN_HISTORY_LIMIT: events one execution's history may reach before the run continues as new."""
    text = os.environ.get("AGENTRUN_HISTORY_LIMIT", "")
    if not text:
        return None
    if not text.isdigit() or not 100 <= int(text) <= 40_000:
        raise UsageError(f"AGENTRUN_HISTORY_LIMIT={text}: give a number of events from 100 to 40000")
    return int(text)


def refuse_human_supervision(plan: ir.Plan) -> None:
    """With no person to answer, a goal supervised by a human could only fail at its gate: refuse
    the run before it starts. Raises UsageError."""
    steps = [n.id for n in plan.walk() if isinstance(n, ir.Task) and n.supervision == "human"]
    if steps:
        raise UsageError(
            f"workflow requires human supervision for steps [{', '.join(steps)}] but no human connection is available"
        )


def say_warnings(plan: ir.Plan) -> None:
    """What the spec's language warns of (a key it ignores, a name that renders empty), before a
    run starts; on stderr, so a command's output stays its own."""
    for warning in plan.warnings:
        print(warning, file=sys.stderr)


def ask_missing(plan: ir.Plan, given: dict[str, Any]) -> dict[str, Any]:
    """On a terminal, ask for required inputs not given with -p; elsewhere `bind` names them all."""
    missing = [p for name, p in plan.params.items() if p.required and name not in given]
    if not missing or not sys.stdin.isatty():
        return given
    answers = dict(given)
    for param in missing:
        about = f" ({param.description})" if param.description else ""
        answers[param.name] = Prompt.ask(f"{param.name}{about} [{param.type}]")
    return answers


def cli_params(items: list[str]) -> list[tuple[str, Any]]:
    out = []
    for item in items:
        try:
            out.append(params.parse_cli_param(item))
        except (ValueError, OSError) as exc:
            raise SpecError([Problem("-p", 0, 0, str(exc), "write -p KEY=VALUE or -p KEY=@FILE")]) from None
    return out


async def start(
    client: Client, args: argparse.Namespace, inp: RunInput, console: Console, prompter: Prompter | None = None
) -> int:
    inp.search_attributes = await ensure_search_attributes(client)
    run_id = args.id = args.id or f"{inp.plan.name}-{uuid.uuid4().hex[:8]}"  # Ctrl-C names it
    with telemetry.starting(inp.plan, run_id):
        handle = await _start(client, inp, run_id, args.task_queue)
    console.print(f"run {run_id} started", markup=False, highlight=False)
    link = web_url(client, run_id)
    if link:
        console.print(f"Temporal Web: {link}", markup=False, highlight=False)
    polling = await worker_polling(client, args.task_queue)
    if args.detach:
        if not polling:
            console.print(hint(run_id, args.task_queue), markup=False)
        return 0
    args.ran_worker = not polling
    async with local_worker(client, args.task_queue, needed=not polling, run_id=run_id) as log:
        return await watch(client, handle.id, console, prompter, log)


async def watch(
    client: Client, run_id: str, console: Console, prompter: Prompter | None = None, log: Path | None = None
) -> int:
    """Follow a run to its end and print its report; exit code 0 only for a completed run."""
    final = await follow(client, run_id, console, prompter=prompter, log=log)
    console.print()
    console.print(report.to_markdown(final) + outputs.section(final, every=False), markup=False, highlight=False)
    return 0 if final.status == "completed" else 1


async def _start(client: Client, inp: RunInput, run_id: str, task_queue: str) -> WorkflowHandle:
    try:
        return await client.start_workflow(
            "AgentRun",
            inp,
            id=run_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            **start_options(inp),
        )
    except WorkflowAlreadyStartedError:
        raise UsageError(f"a run with id '{run_id}' already exists; pick another --id") from None


def start_options(inp: RunInput) -> dict[str, Any]:
    """What every run starts with besides its input: its search attributes, a fork's parent in its
    memo, and the summary Temporal Web lists it with."""
    attrs = None
    parent = inp.fork.parent if inp.fork else None
    if inp.search_attributes:
        pairs = [SearchAttributePair(contract.SPEC, inp.plan.name), SearchAttributePair(contract.STATUS, "pending")]
        pairs += [SearchAttributePair(contract.PARENT, parent)] if parent else []
        attrs = TypedSearchAttributes(pairs)
    memo = {contract.PARENT_MEMO: parent} if parent else None
    return {"search_attributes": attrs, "memo": memo, "static_summary": _summary(inp)}


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
    from agentrun.activities.agents.agentapi import release_all
    from agentrun.worker import terminal_log
    from agentrun.worker.build import build_worker

    log = state_dir() / "logs" / f"{run_id}.log"
    terminal_log.to_file(log)
    async with build_worker(client, task_queue):
        yield log
    await release_all()


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
