"""What a run is given, read and checked from `start` and `dry-run` arguments before Temporal is
involved: the spec, its params and its agents. Nothing here loads Temporal's client."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.prompt import Prompt

from agentrun.errors import UsageError
from agentrun.explain import agents, mistakes
from agentrun.lang import ir, params
from agentrun.lang.check import agent_ids, check, resolve_task
from agentrun.lang.errors import Problem, SpecError
from agentrun.lang.load import load

if TYPE_CHECKING:
    from agentrun.models.contract import RunInput


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
    from agentrun.models.contract import RunInput  # the spec commands (dry-run) need only load_run

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
