"""Command-line inputs that name nothing in the spec: a `-p` param it neither declares nor reads, an
`--agent ID=URI` for an agent id none of its steps use. Each is most likely a typo that would
otherwise fall back to a default unnoticed, so it is warned about with the nearest name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentrun.explain.agents import _PER_AGENT
from agentrun.lang import ir
from agentrun.lang.check import agent_ids
from agentrun.lang.errors import Problem, did_you_mean
from agentrun.lang.render import TemplateSyntaxError, names_used
from agentrun.models.texts.checkpoint_text import SUPERVISOR


def warnings(plan: ir.Plan, given: Iterable[str], agent_flags: list[str]) -> list[Problem]:
    return unknown_params(plan, given) + unknown_agents(plan, agent_flags)


def unknown_params(plan: ir.Plan, given: Iterable[str]) -> list[Problem]:
    """A `-p` name the spec declares no param for and no template reads (a task tree may read
    a param it does not declare, as task trees do)."""
    read = names_read(plan)
    unknown = [name for name in given if name not in plan.params and name not in read]
    declared = ", ".join(sorted(plan.params)) or "none"
    return [
        Problem(
            f"-p {name}",
            0,
            0,
            f"the spec has no param '{name}'; the value is not used",
            did_you_mean(name, plan.params) or f"its params: {declared}",
            "warning",
        )
        for name in unknown
    ]


def unknown_agents(plan: ir.Plan, flags: list[str]) -> list[Problem]:
    """An `--agent ID=URI` whose id no step talks to ("default" sets the default agent)."""
    used = agent_ids(plan) | judges(plan)
    problems = []
    for flag in flags:
        match = _PER_AGENT.match(flag)
        if not match or ":" in match.group(1):
            continue  # a default URI, not ID=URI
        agent = match.group(1)
        if agent != "default" and agent not in used:
            problems.append(
                Problem(
                    f"--agent {flag}",
                    0,
                    0,
                    f"no step of the spec talks to agent '{agent}'; this URI is not used",
                    did_you_mean(agent, used) or f"its agents: {', '.join(sorted(used)) or 'none'}",
                    "warning",
                )
            )
    return problems


def judges(plan: ir.Plan) -> set[str]:
    """The supervisor agent id, when a goal of the spec is supervised: --agent supervisor=URI names
    the agent that judges it (else its own agent does)."""
    supervised = any(isinstance(n, ir.Task) and n.supervision != "none" for n in plan.walk_all())
    return {SUPERVISOR} if supervised else set()


def names_read(plan: ir.Plan) -> set[str]:
    """Every top-level name the plan's templates read."""
    names: set[str] = set()
    for text in _strings(plan.root.model_dump()):
        if "{" in text:
            try:
                names |= names_used(text)
            except (TemplateSyntaxError, RecursionError):
                continue  # `check` reports a template that does not parse
    return names


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
