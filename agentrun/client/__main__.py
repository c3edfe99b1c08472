"""The command line: start, fork, diff, watch, status, list, cancel, report, validate, inspect,
dry-run, and the commands people answer runs with: pending, answer, approve, reject, budget."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from rich.console import Console

from agentrun.client import diff, elements, fork, humans, interrupts, listing, logs, no_worker, outputs, report
from agentrun.client.runs import NoSuchRun, NoWorker, UsageError, describe, fetch_state
from agentrun.client.start import local_worker, prepare, say_warnings, start, watch
from agentrun.contract import TASK_QUEUE, dollars, open_gates, unsettled_refusals
from agentrun.lang import ir
from agentrun.lang.check import check
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.worker import telemetry
from agentrun.worker.blobs import BadBlobSetting, BlobUnreadable
from agentrun.worker.connection import Unreachable, connect
from agentrun.worker.paths import BadMapping

EXIT_OK, EXIT_USAGE, EXIT_UNREACHABLE = 0, 2, 3  # 1, a failed run, comes from `watch`


def positive(text: str) -> int:
    """A whole number above 0, for limits: argparse says why it refused anything else."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0")
    return value


def parser(prog: str = "python -m client") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run durable multi-agent workflows.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("start", help="start a run of a spec and follow it")
    _spec_and_inputs(s)
    s.add_argument("--workdir", help="where agents and checks run (default: the spec's folder)")
    s.add_argument("--id", help="the run id (default: spec name + random suffix)")
    s.add_argument("--detach", action="store_true", help="start and return at once")
    s.add_argument("--resume-from", metavar="TASK", help="skip every task before TASK")
    s.add_argument("--max-iterations", type=positive, metavar="N", help="loop limit for tasks that set none")
    s.add_argument("--lenient", action="store_true", help="accept replies without a completion status")
    s.add_argument("--task-queue", default=TASK_QUEUE, help="the task queue workers poll")
    s.add_argument(
        "--no-human",
        action="store_true",
        help="no person can answer this run: refuse a spec whose goals need human supervision",
    )
    fork.add_arguments(sub.add_parser("fork", help="run a run's plan again from a step, reusing the steps before it"))
    diff.add_arguments(sub.add_parser("diff", help="the steps whose output, status or cost differ between two runs"))
    w = sub.add_parser("watch", help="follow a run to its end")
    w.add_argument("run_id")
    w.add_argument("--worker", action="store_true", help="run a worker in this process while following")
    c = sub.add_parser("cancel", help="cancel a run")
    c.add_argument("run_id")
    c.add_argument("--rollback", action="store_true", help="run its compensations as it is cancelled")
    st = sub.add_parser("status", help="a run's state")
    st.add_argument("run_id")
    st.add_argument("--json", action="store_true")
    elements.add_arguments(st, positive)
    listing.add_arguments(sub.add_parser("list", help="recent runs, newest first"))
    r = sub.add_parser("report", help="a run's execution report")
    r.add_argument("run_id")
    r.add_argument("--format", choices=["md", "json"], default="md")
    r.add_argument("--outputs", action="store_true", help="add each step's output in full")
    elements.add_arguments(r, positive)
    logs.add_arguments(sub.add_parser("logs", help="what each agent was asked and answered, in order"))
    sub.add_parser("validate", help="check a spec without running it").add_argument("spec")
    i = sub.add_parser("inspect", help="explain a spec: its steps, execution graph and agents")
    i.add_argument("spec")
    i.add_argument(
        "--format",
        choices=["text", "mermaid"],
        default="text",
        help="mermaid: a state graph as a Mermaid flowchart, and nothing else",
    )
    d = sub.add_parser("dry-run", help="show the agent calls a run would make, calling none")
    _spec_and_inputs(d)
    _human_commands(sub)
    m = sub.add_parser("mcp", help="serve behaviour-tree executions to an agent over MCP (stdio)")
    m.add_argument("--http", type=positive, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead")
    m.add_argument("--task-queue", default=TASK_QUEUE, help="the task queue the executions run on")
    m.add_argument("--no-worker", action="store_true", help="do not run a worker in this process")
    return p


def _human_commands(sub) -> None:
    sub.add_parser("pending", help="open questions across runs").add_argument("--json", action="store_true")
    a = sub.add_parser("answer", help="answer a run's question")
    a.add_argument("run_id")
    a.add_argument("--gate", required=True, metavar="ID")
    a.add_argument("value")
    a.add_argument("--comment", metavar="TEXT")
    _delivery(a)
    for name, text in (("approve", "approve what a run waits on"), ("reject", "reject what a run waits on")):
        v = sub.add_parser(name, help=text)
        v.add_argument("run_id")
        v.add_argument("--gate", metavar="ID", help="which gate (default: the run's one open gate)")
        v.add_argument("--comment", metavar="TEXT")
        _delivery(v)
    b = sub.add_parser("budget", help="raise the budget a run paused on")
    b.add_argument("run_id")
    b.add_argument("--gate", metavar="ID", help="budget (the run's) or budget:STEP (default: the one paused)")
    b.add_argument("--tokens", type=positive, metavar="N", help="the new token limit")
    b.add_argument("--usd", type=float, metavar="X", help="the new limit in US dollars")
    b.add_argument("--iterations", type=positive, metavar="N", help="the new limit on prompts sent")
    b.add_argument("--comment", metavar="TEXT")
    _delivery(b)


def _delivery(command: argparse.ArgumentParser) -> None:
    """How an answer reaches a run no worker holds right now: wait for one, or queue it."""
    how = command.add_mutually_exclusive_group()
    how.add_argument(
        "--wait",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for a worker to take it (default 60); exit code 3 if none did",
    )
    how.add_argument(
        "--no-wait",
        action="store_true",
        help="queue it in the run's history and return; the run checks it when a worker takes it",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds")
    return value


def _spec_and_inputs(command: argparse.ArgumentParser) -> None:
    """The arguments `start` and `dry-run` share: the spec, its params and its agents."""
    command.add_argument("spec")
    command.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a param (YAML scalar), or KEY=@FILE to read it from a file",
    )
    command.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="URI|ID=URI",
        help="the default agent URI, or the URI of one agent id",
    )


def main(argv: list[str] | None = None) -> int:
    return run(parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed command; the exit code."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        if args.command == "validate":
            return validate(args.spec, console)
        if args.command in ("inspect", "dry-run"):
            from agentrun.client import explain  # its prompt rendering is not needed by the other commands

            return (
                explain.inspect_command(args.spec, console, args.format)
                if args.command == "inspect"
                else explain.dry_run_command(args, console)
            )
        if args.command == "start":
            inp = prepare(args)
            say_warnings(inp.plan)
            return interrupts.run(_with_client(lambda c: start(c, args, inp, console, _prompter(console))), args)
        if args.command == "fork":
            return interrupts.run(_with_client(lambda c: fork.fork_command(c, args, console, _prompter(console))), args)
        return interrupts.run(_with_client(lambda c: COMMANDS[args.command](c, args, console)), args)
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, NoSuchRun, BadMapping, BadBlobSetting, telemetry.TelemetryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (Unreachable, NoWorker, BlobUnreadable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        print(interrupts.farewell(args), file=sys.stderr)
        return interrupts.EXIT_INTERRUPTED


def _prompter(console: Console) -> humans.Prompter | None:
    """Open questions are asked inline only of a person at a terminal."""
    return humans.terminal_prompter(console) if sys.stdin.isatty() else None


async def _with_client(action) -> int:
    async with telemetry.running("agentrun-client", serves=False):
        client = await connect()
        return await action(client)


def validate(path: str, console: Console) -> int:
    plan = load(path)
    check(plan)
    leaves = plan.leaves()
    console.print(f"{path}: valid {plan.dialect} spec '{plan.name}' with {len(leaves)} task(s)", markup=False)
    for leaf in leaves:
        console.print(f"  {leaf.id} ({leaf.kind})", markup=False)
    for key in ("requires_workdir", "requirements"):
        if getattr(plan, key) is not None:
            console.print(f"  {key}: {getattr(plan, key)}", markup=False)
    for warning in [*plan.warnings, *unknown_rules(plan)]:
        console.print(warning, markup=False)
    return EXIT_OK


def unknown_rules(plan: ir.Plan) -> list[str]:
    """Validation rules of no known form: only an agent with a model can judge them at run time."""
    from agentrun.lang.rules import parse_rule  # only `validate` needs it: the other commands start without it

    seen, warnings = set(), []
    for leaf in plan.leaves():
        if not isinstance(leaf, ir.Task):
            continue
        for rule in leaf.rules:
            if (leaf.agent, rule) not in seen and parse_rule(rule) is None:
                seen.add((leaf.agent, rule))
                warnings.append(
                    f"{plan.source}:{leaf.line}: warning: rule of agent '{leaf.agent}' has no known "
                    f"form: {rule!r}\n  hint: an openai: or anthropic: agent judges it with its model; "
                    "with other agents it is not checked. Known forms: 'Must include X field', "
                    "'Must identify exactly N items', 'Each item must have a, b fields', "
                    "'X must be between A and B'"
                )
    return warnings


async def _status(client, args, console: Console) -> int:
    paged = elements.wanted(args)
    state = await fetch_state(client, args.run_id)
    if paged:
        page = await elements.page(client, state, args)
        if args.json:
            print(page.to_json())
        else:
            for line in elements.lines(page):
                console.print(line, markup=False)
        return EXIT_OK
    if args.json:
        print(json.dumps(_status_json(state), indent=2))
        return EXIT_OK
    waiting = f" for {state.waiting_for}" if state.status == "waiting" and state.waiting_for else ""
    console.print(
        f"{state.run_id}: {state.status}{waiting}" + (f" (running {state.current_task})" if state.current_task else ""),
        markup=False,
    )
    for line in report.forked(state):
        console.print(f"  {line.removeprefix('- ')}", markup=False)
    for t in state.tasks.values():
        reused = f" reused from {t.reused_from}" if t.reused_from else ""
        console.print(
            f"  {t.id:<30} {t.status:<10} attempts={t.attempts} iterations={t.iterations} {t.duration_s:.1f}s{reused}",
            markup=False,
        )
    for m in state.maps.values():
        done = m.total - m.counts.get("pending", 0)
        console.print(
            f"  {m.row}: {done} of {m.total} elements done in {m.batches_done} of {m.batches} batches"
            f" ({', '.join(f'{n} {s}' for s, n in sorted(m.counts.items()))}); each one: --elements {m.key}",
            markup=False,
        )
    for gate in open_gates(state):
        since = f" (since {gate.opened_at:%Y-%m-%d %H:%M:%S} UTC)" if gate.opened_at else ""
        console.print(f"  {humans.gate_line(state.run_id, gate)}{since}", markup=False)
    for refusal in unsettled_refusals(state):
        console.print(f"  ! {refusal.message}", markup=False)
    for note in no_worker.notes(state):
        console.print(f"  ! {note}", markup=False)
    if state.total_tokens_used or state.total_cost_usd:
        console.print(f"  used {state.total_tokens_used} tokens, {dollars(state.total_cost_usd)}", markup=False)
    return EXIT_OK


def _status_json(state) -> dict:
    data = state.model_dump(mode="json", exclude={"outputs", "final_output", "step_log"})
    data["tasks"] = report.tasks_json(state)
    return data


async def _cancel(client, args, console: Console) -> int:
    handle = await humans.running_handle(client, args.run_id)  # clear errors for unknown and ended runs
    if args.rollback:
        # Refused (nothing was cancelled) rather than a plain cancel the person did not ask for.
        queued = await humans.request_rollback(handle)
        console.print(
            f"rollback requested for {args.run_id}: {queued} compensation(s) queued, run as it is cancelled",
            markup=False,
        )
    await handle.cancel()
    console.print(f"cancellation requested for {args.run_id}", markup=False)
    return EXIT_OK


async def _report(client, args, console: Console) -> int:
    paged = elements.wanted(args)
    state = await fetch_state(client, args.run_id)
    if paged:
        page = await elements.page(client, state, args)
        print(page.to_json() if args.format == "json" else report.elements_markdown(page))
        return EXIT_OK
    if args.format == "json":
        print(report.to_json(state))
    else:
        print(report.to_markdown(state) + outputs.section(state, every=args.outputs))
    return EXIT_OK


async def _mcp(client, args, console: Console) -> int:
    from agentrun.client.mcp_server import serve  # the MCP SDK loads only for this command

    await serve(client, args.task_queue, args.http, worker=not args.no_worker)
    return EXIT_OK


async def _watch(client, args, console: Console) -> int:
    args.task_queue = (await describe(client, args.run_id)).task_queue
    args.ran_worker = args.worker
    async with local_worker(client, args.task_queue, needed=args.worker, run_id=args.run_id) as log:
        return await watch(client, args.run_id, console, _prompter(console), log)


COMMANDS = {
    "status": _status,
    "list": listing.list_command,
    "cancel": _cancel,
    "report": _report,
    "watch": _watch,
    "pending": humans.pending_command,
    "answer": humans.answer_command,
    "approve": humans.answer_command,
    "reject": humans.answer_command,
    "budget": humans.budget_command,
    "mcp": _mcp,
    "logs": logs.logs_command,
    "diff": diff.diff_command,
}

EXIT_BROKEN_PIPE = 141  # as a program killed by SIGPIPE: `status --json | head` read what it wanted


def exit_with(code_of: Callable[[], int]) -> None:
    """Run the CLI and leave without finalizing: the SDK's native threads can still be calling into
    Python while the interpreter finalizes, which aborts the process now and then."""
    try:
        code = code_of()
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    try:
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


if __name__ == "__main__":
    exit_with(main)
