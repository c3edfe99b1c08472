"""The commands people answer and steer runs with: pending, answer, approve, reject, budget, say."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun.cli.args import command, delivery, on_temporal, positive, seconds

if TYPE_CHECKING:
    from agentrun.client.engine import Engine


def add_commands(sub: Any) -> None:
    command(sub, "pending", "open questions across runs", on_temporal(_pending)).add_argument(
        "--json", action="store_true"
    )
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


async def _pending(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.client import humans

    return await humans.pending_command(engine.temporal, args, console)


async def _answer(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.client import humans

    return await humans.answer_command(engine.temporal, args, console)


async def _say(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.client import humans

    return await humans.say_command(engine.temporal, args, console)


async def _budget(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.client import humans

    return await humans.budget_command(engine.temporal, args, console)
