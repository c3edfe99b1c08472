"""The commands that read a spec and talk to no server: validate, inspect, dry-run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun.cli.args import EXIT_OK, command, spec_and_inputs

if TYPE_CHECKING:
    from agentrun.lang import ir


def add_commands(sub: Any) -> None:
    command(sub, "validate", "check a spec without running it", _validate).add_argument("spec")
    i = command(sub, "inspect", "explain a spec: its steps, execution graph and agents", _inspect)
    i.add_argument("spec")
    i.add_argument(
        "--format",
        choices=["text", "mermaid"],
        default="text",
        help="mermaid: the plan as a Mermaid flowchart (as the run page draws it), and nothing else",
    )
    spec_and_inputs(command(sub, "dry-run", "show the agent calls a run would make, calling none", _dry_run))


def _validate(args: argparse.Namespace, console: Console) -> int:
    from agentrun.lang import ir
    from agentrun.lang.check import check
    from agentrun.lang.load import load

    plan = load(args.spec)
    check(plan)
    leaves = plan.leaves()
    # A supervisor is asked too (which node runs next), so it is listed with the tasks it manages.
    chooser = [n for n in plan.walk() if isinstance(n, ir.Supervisor)]
    also = f" and {len(chooser)} supervisor(s)" if chooser else ""
    console.print(
        f"{args.spec}: valid {plan.dialect} spec '{plan.name}' with {len(leaves)} task(s){also}", markup=False
    )
    for node in [*chooser, *leaves]:
        console.print(f"  {node.id} ({node.kind})", markup=False)
    for key in ("requires_workdir", "requirements"):
        if getattr(plan, key) is not None:
            console.print(f"  {key}: {getattr(plan, key)}", markup=False)
    for warning in [*plan.warnings, *unknown_rules(plan)]:
        console.print(warning, markup=False)
    return EXIT_OK


def unknown_rules(plan: ir.Plan) -> list[str]:
    """Validation rules of no known form: only an agent with a model can judge them at run time."""
    from agentrun.lang import ir
    from agentrun.lang.rules import parse_rule  # only `validate` needs it

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


def _inspect(args: argparse.Namespace, console: Console) -> int:
    from agentrun.explain import describe as explain

    return explain.inspect_command(args.spec, console, args.format)


def _dry_run(args: argparse.Namespace, console: Console) -> int:
    from agentrun.explain import describe as explain

    return explain.dry_run_command(args, console)
