"""`upgrade check`, `upgrade promote` and `upgrade move`: upgrading the workers under runs in flight
(docs/operations.md, "Upgrading")."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun.cli.args import EXIT_OK, command, on_temporal

if TYPE_CHECKING:
    from agentrun.client.engine import Engine

EXIT_BREAKS = 1  # a run would fail on this code


def add_commands(sub: Any) -> None:
    u = command(sub, "upgrade", "check open runs against this install's code; pin, promote and move builds", _usage)
    which = u.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = command(which, "check", "replay the open runs with the code installed here", on_temporal(_check))
    c.add_argument(
        "--query", metavar="QUERY", help="only the runs of this visibility query, e.g. 'AgentRunSpec = \"review\"'"
    )
    c.add_argument("--json", action="store_true", help="one JSON object per run on stdout")
    p = command(which, "promote", "make a build current: new runs go to its workers", on_temporal(_promote))
    p.add_argument(
        "build", metavar="BUILD", help="the build id its workers registered (`agentrun worker --versioning`)"
    )
    p.add_argument("--deployment", metavar="NAME", help="default: AGENTRUN_DEPLOYMENT, else agentrun")
    m = command(which, "move", "pin runs that replay on this install's code to its build", on_temporal(_move))
    m.add_argument("runs", nargs="+", metavar="RUN")
    m.add_argument("--to", required=True, metavar="BUILD", help="the build this install's workers run")
    m.add_argument("--deployment", metavar="NAME", help="default: AGENTRUN_DEPLOYMENT, else agentrun")


def _usage(args: argparse.Namespace, console: Console) -> int:
    return EXIT_OK


async def _check(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from rich.progress import Progress

    with Progress(console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task("replaying open runs", total=None)
        results = await engine.check_upgrade(
            args.query, lambda done, total: bar.update(task, completed=done, total=total)
        )
    broken = [r for r in results if not r.replays]
    for result in results:
        if args.json:
            print(json.dumps(result.as_json()))
        elif result.replays:
            console.print(f"ok      {result.run_id}: replays; safe to move to this build")
        else:
            where = f"event {result.event_id} ({result.event_type})" if result.event_id else "an event"
            step = f", step {result.step}" if result.step else ""
            console.print(f"BREAKS  {result.run_id}: departs at {where}{step}: {result.reason}")
    if not args.json:
        say = f"{len(results) - len(broken)} of {len(results)} open runs replay on agentrun's installed code"
        print(say + (f"; {len(broken)} would fail: keep them on their build" if broken else ""), file=sys.stderr)
    return EXIT_BREAKS if broken else EXIT_OK


async def _promote(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    await engine.promote(args.build, args.deployment)
    console.print(f"build {args.build} is current: new runs go to its workers; older runs stay on their builds")
    return EXIT_OK


async def _move(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    moved, kept = await engine.move_runs(args.runs, args.to, args.deployment)
    for result in moved:
        console.print(f"moved   {result.run_id} to build {args.to}")
    for result in kept:
        console.print(f"kept    {result.run_id} on its build: it departs at event {result.event_id} ({result.reason})")
    return EXIT_BREAKS if kept else EXIT_OK
