"""What a run is given, read and checked from `start` and `dry-run` arguments before Temporal is
involved: the spec, its params and its agents. Nothing here loads Temporal's client."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
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


Spec = str | os.PathLike[str] | ir.Plan  # a path, a spec's text (YAML, or an Agentfile), or a loaded plan


def load_run(args: argparse.Namespace, agents_required: bool = True) -> Loaded:
    """The spec, its inputs and its agents from `start`/`dry-run` arguments. Raises SpecError.
    Without `agents_required` (a dry run), agents nothing configures have the URI "" ."""
    return load_spec(args.spec, cli_params(args.param), args.agent, agents_required, say=_stderr, ask=True)


def load_spec(
    spec: Spec,
    given: list[tuple[str, Any]],
    agent_flags: list[str],
    agents_required: bool = True,
    say: Callable[[str], None] | None = None,
    ask: bool = False,
) -> Loaded:
    """The plan, its bound params and its agents. `given`: params as (name, value); `agent_flags`:
    `URI` (the default agent) or `ID=URI`; `say` hears the warnings; `ask`: prompt at a terminal for
    required params not given. Raises SpecError."""
    values = dict(given)
    plan = spec if isinstance(spec, ir.Plan) else load_source(spec, values)
    check(plan)
    for warning in mistakes.warnings(plan, values, agent_flags):
        (say or _ignore)(str(warning))
    bound = params.bind(plan, ask_missing(plan, values) if ask else values)
    requires = {name: a.requires for name, a in plan.agents.items() if a.requires}
    declared = {name: a.uri for name, a in plan.agents.items() if a.uri}
    resolved = agents.resolve(agent_flags, plan.spec_dir, agent_ids(plan), agents_required, requires, declared)
    for warning in undeclared_servers(plan, agents.mcp_servers(plan.spec_dir, plan.mcp_servers)):
        (say or _ignore)(warning)
    return Loaded(plan, bound, *resolved)


def load_source(spec: str | os.PathLike[str], given: dict[str, Any]) -> ir.Plan:
    """A spec from a path, or from its text when `spec` is a str with more than one line (its
    relative references and agents read from the current folder)."""
    if isinstance(spec, str) and "\n" in spec:
        return load(os.path.join(os.getcwd(), INLINE_NAME), given_params=given, text=spec)
    return load(os.fspath(spec), given_params=given)


INLINE_NAME = "<spec>.yaml"  # what problems in a spec given as text name as its file


def prepare(args: argparse.Namespace) -> RunInput:
    """Everything a run needs, from `start`'s arguments, checked before Temporal is involved.
    Raises SpecError."""
    return prepare_input(
        load_run(args),
        workdir=args.workdir,
        resume_from=args.resume_from,
        max_iterations=args.max_iterations,
        lenient=args.lenient,
        no_human=getattr(args, "no_human", False),
        workdir_flag="--workdir",
    )


def prepare_input(
    loaded: Loaded,
    workdir: str | os.PathLike[str] | None = None,
    resume_from: str | None = None,
    max_iterations: int | None = None,
    lenient: bool = False,
    no_human: bool = False,
    workdir_flag: str = "workdir",
) -> RunInput:
    """The run's input from a loaded spec. Raises SpecError or UsageError."""
    from agentrun.models.contract import DEFAULT_HEARTBEAT_S, RunInput  # the spec commands (dry-run) need only load_run

    plan, values, default, per_agent = loaded
    if no_human:
        refuse_human_supervision(plan)
    folder = os.path.abspath(workdir or plan.spec_dir)
    if not os.path.isdir(folder):
        raise SpecError(
            [
                Problem(
                    workdir_flag,
                    0,
                    0,
                    f"work directory '{folder}' does not exist",
                    f"create it first, or leave {workdir_flag} out to use the spec's folder",
                )
            ]
        )
    resume = resolve_task(plan, resume_from) if resume_from else None
    return RunInput(
        plan=plan,
        params=values,
        workdir=folder,
        default_agent=default,
        agents=per_agent,
        prices=agents.prices(plan.spec_dir),
        mcp_servers=agents.mcp_servers(plan.spec_dir, plan.mcp_servers),
        host_bindings=agents.host_tools(plan.spec_dir),
        steering_files=steering_files(plan, folder),
        resume_from=resume,
        max_iterations=max_iterations,
        lenient=lenient,
        heartbeat_s=float(os.environ.get("AGENTRUN_HEARTBEAT_S", DEFAULT_HEARTBEAT_S)),
        history_limit=_history_limit(),
    )


def steering_files(plan: ir.Plan, workdir: str) -> list[str]:
    """The files a run of `plan` was made from that lie in `workdir` (the spec, what it includes, its
    policy, the agentrun.yaml that applies), as paths from it: the files an agent must not change
    to steer the next start of the same spec."""
    root = os.path.realpath(workdir)
    config = agents.config_path(plan.spec_dir)
    found = [*plan.files, *([os.path.realpath(config)] if config is not None else [])]
    inside = [os.path.relpath(path, root) for path in found if path.startswith(root.rstrip(os.sep) + os.sep)]
    return list(dict.fromkeys(inside))


def undeclared_servers(plan: ir.Plan, servers: dict[str, Any]) -> list[str]:
    """A warning for each MCP server a step is granted that no one declared: it offers nothing."""
    named = {g.server: n.id for n in plan.walk() if isinstance(n, ir.Task) and n.grant for g in n.grant.mcp}
    return [
        f"warning: step '{step}' is granted the tools of MCP server '{server}', which is declared nowhere: "
        f"it is offered none (declare it under mcp_servers: in {agents.CONFIG_NAME})"
        for server, step in sorted(named.items())
        if server not in servers
    ]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def _ignore(text: str) -> None:
    del text


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
