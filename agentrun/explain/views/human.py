"""A person answers: the question, the choices, how long the run waits and what a rejection does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from jinja2 import TemplateError

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.explain.views.words import agent_name, duration, first_line, kept, preview, stored
from agentrun.lang import ir
from agentrun.lang.render import render

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class HumanView(LeafView[ir.Human]):
    def describe(self, node: ir.Human, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return [at.head + _named(node) + "human: " + question(node) + stored(node)]

    def dry_run(self, node: ir.Human, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        more = at.indent
        lines = [at.head + _named(node) + f"asks a person (gate {node.id}; no agent)"]
        try:
            lines += preview(more, render(node.prompt, dry.values(scope), dry.plan.undefined))
        except (TemplateError, TypeError) as exc:
            dry.problem(f"{at.tag}: cannot fill in its question: {exc}")
            lines.append(f"{more}cannot fill in its question: {exc}")
        answer = f"one of {', '.join(node.choices)}" if node.choices else "any text"
        lines.append(f"{more}expected answer: {answer}" + (f", {kept(node)}" if node.step else ""))
        return lines + ([f"{more}{waits(node)}"] if node.timeout_s else [])

    def box_text(self, node: ir.Human, agents: Agents) -> str:
        return "human: " + agent_name(node, agents)

    def details(self, node: ir.Human, who: Callable[[ir.Node], str]) -> list[str]:
        return []  # its timeout is part of the question


def _named(node: ir.Human) -> str:
    # A numbered step's id is already in the line's head; a gate elsewhere is named here.
    return "" if node.step else f"{node.label}: "


def question(gate: ir.Human, asked: str | None = None) -> str:
    """What a person is asked (`asked`: the question filled in, as a dry run shows it), and what
    happens without an answer or on a rejection."""
    text = first_line(gate.prompt if asked is None else asked)
    if gate.choices and not gate.approval:
        text += f" [{', '.join(gate.choices)}]"
    if gate.timeout_s:
        text += "; " + waits(gate)
    if gate.approval:
        text += f"; on reject: {_ON_REJECT[gate.on_reject]}"
    return text


def waits(gate: ir.Human) -> str:
    then = _ON_TIMEOUT.get(gate.on_timeout) or f"takes '{gate.on_timeout}'"
    return f"waits at most {duration(gate.timeout_s or 0)}, then {then}"


_ON_TIMEOUT = {"fail": "the run fails", "continue": "goes on without an answer"}
_ON_REJECT = {"fail": "the run fails", "skip": "skipped, the run goes on", "continue": "the run goes on"}
