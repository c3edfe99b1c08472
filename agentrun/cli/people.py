"""The commands people answer and steer runs with: pending, answer, approve, reject, budget, say."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun import spelling
from agentrun.cli.args import EXIT_OK, command, delivery, on_temporal, positive, seconds, when, whole

if TYPE_CHECKING:
    from agentrun.client.engine import Engine


def add_commands(sub: Any) -> None:
    p = command(sub, "pending", "open questions across runs", on_temporal(_pending))
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--limit",
        type=positive,
        default=PENDING_LIMIT,
        metavar="N",
        help=f"of at most N waiting runs, the latest started (default {PENDING_LIMIT})",
    )
    p.add_argument("--all", action="store_true", help="every waiting run (about a second a thousand)")
    a = command(sub, "answer", "answer a run's question", on_temporal(_answer))
    a.add_argument("run_id")
    a.add_argument("--gate", required=True, metavar="ID")
    a.add_argument("value")
    a.add_argument("--comment", metavar="TEXT")
    delivery(a)
    for name, text in (("approve", "approve what a run waits on"), ("reject", "reject what a run waits on")):
        v = command(sub, name, text, on_temporal(_answer))
        v.add_argument("run_id")
        v.add_argument("--gate", metavar="ID", help="which gate (default: the run's one open gate)")
        v.add_argument("--comment", metavar="TEXT")
        v.add_argument(
            "--digest", default="", metavar="SHA256", help="a tool call's gate: only if it asks about these arguments"
        )
        if name == "approve":
            v.add_argument(
                "--pattern", action="store_true", help="a tool call's gate: and every later call its ask pattern takes"
            )
        delivery(v)
    b = command(sub, "budget", "raise the budget a run paused on", on_temporal(_budget))
    b.add_argument("run_id")
    b.add_argument("--gate", metavar="ID", help="budget (the run's) or budget:STEP (default: the one paused)")
    b.add_argument("--tokens", type=positive, metavar="N", help="the new token limit")
    b.add_argument("--usd", type=float, metavar="X", help="the new limit in US dollars")
    b.add_argument("--iterations", type=positive, metavar="N", help="the new limit on prompts sent")
    b.add_argument("--comment", metavar="TEXT")
    delivery(b)
    s = command(sub, "say", "send a note to a running run's agents", on_temporal(_say))
    s.add_argument("run_id")
    s.add_argument("text")
    s.add_argument("--step", metavar="ID", help="the step whose next prompt carries it (default: the next prompt)")
    s.add_argument("--as", dest="by", metavar="NAME", help="who says it (default: your user name)")
    s.add_argument(
        "--wait", type=seconds, default=60.0, metavar="SECONDS", help="how long to wait for a worker (default 60)"
    )


PENDING_LIMIT = 200  # waiting runs `pending` lists unless told: a person reads a page, not ten thousand
WARNINGS_SHOWN = 20  # lines of warnings `pending` prints before it counts the rest


async def _pending(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    import json

    from rich.table import Table

    from agentrun.explain.waiting import NO_WORKER

    found = await engine.pending(None if args.all else args.limit)
    warnings = [f"warning: run {run.run_id}: {NO_WORKER}; {run.fix}" for run in found.unanswered]
    warnings += [f"warning: run {run_id}: {message}" for run_id, message in found.refused]
    for line in warnings[:WARNINGS_SHOWN]:
        print(line, file=sys.stderr)
    if len(warnings) > WARNINGS_SHOWN:  # thousands of runs on a stopped worker: a few lines say it
        more = len(warnings) - WARNINGS_SHOWN
        print(
            f"warning: and {more} more like these (`{spelling.client()} pending --json` lists every question)",
            file=sys.stderr,
        )
    if found.more:
        print(
            f"{found.more} more runs wait: these are the latest started; `{spelling.client()} pending --all` lists every one",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps([q.model_dump(mode="json") for q in found.questions], indent=2))
        return EXIT_OK
    if not found.questions:
        console.print("no run is waiting for anyone", markup=False)
        return EXIT_OK
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("RUN", "GATE", "KIND"):
        table.add_column(name, no_wrap=True)
    table.add_column("PROMPT", overflow="fold")
    for name in ("CHOICES", "WAITING SINCE", "TIMEOUT AT"):
        table.add_column(name, no_wrap=True)
    for q in found.questions:
        waited, timeout = when(q.waiting_since), when(q.timeout_at) or "-"
        table.add_row(q.run_id, q.gate or "?", q.kind or "?", q.prompt, "/".join(q.choices), waited, timeout)
    whole(console).print(table)  # a terminal folds long prompts to its width
    console.print(
        f"answer with: {spelling.client()} answer RUN --gate GATE VALUE (or approve / reject RUN --gate GATE)",
        markup=False,
    )
    return EXIT_OK


async def _answer(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    """`answer`, `approve` and `reject`: the value is the command's own for the last two."""
    from agentrun.lang.ir import APPROVE, APPROVE_PATTERN, REJECT

    value = {"approve": APPROVE, "reject": REJECT}.get(args.command) or args.value
    value = APPROVE_PATTERN if getattr(args, "pattern", False) else value
    run, comment, digest = engine.run(args.run_id), args.comment or "", getattr(args, "digest", "")
    if args.no_wait:
        given = await run.queue_answer(value, args.gate, comment, _who(args), digest)
        _queued(console, f"answer '{value}' to gate {given.gate}")
        return EXIT_OK
    answered = await run.answer(value, args.gate, comment, _who(args), args.wait, digest)
    console.print(f"gate {answered.gate} answered: {answered.value}", markup=False, highlight=False)
    return EXIT_OK


async def _budget(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.lang.amounts import limits_text
    from agentrun.lang.ir import Budget

    run = engine.run(args.run_id)
    limits = {"tokens": args.tokens, "usd": args.usd, "iterations": args.iterations}
    if args.no_wait:
        given = await run.queue_budget(args.gate, **limits, comment=args.comment or "", by=_who(args))
        said = limits_text(Budget(tokens=given.tokens, usd=given.usd, iterations=given.iterations))
        _queued(console, f"raise of budget {given.gate} to {said}")
        return EXIT_OK
    raised = await run.raise_budget(args.gate, **limits, comment=args.comment or "", by=_who(args), wait_s=args.wait)
    console.print(f"budget {raised.gate} raised to {limits_text(raised.budget)}", markup=False, highlight=False)
    return EXIT_OK


async def _say(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    """`say`: a note for the next prompt of a step (or of any step), through the run's `say` update."""
    note = await engine.run(args.run_id).say(args.text, args.step or "", _who(args), args.wait)
    where = f"step {note.step}'s next prompt" if note.step else "the next prompt"
    console.print(f"note {note.n} from {note.by or 'you'} is for {where}", markup=False, highlight=False)
    return EXIT_OK


def _who(args: argparse.Namespace) -> str:
    from agentrun.caller import user

    return user() if args.by is None else args.by


def _queued(console: Console, what: str) -> None:
    console.print(
        f"{what} queued: the run checks it when a worker takes it; a refusal shows in `{spelling.client()} pending`",
        markup=False,
        highlight=False,
    )
