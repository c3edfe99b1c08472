"""The names a template may read besides a spec's own params and stored values, declared once.

The dialects check references against these, the engine fills them in (`workflows.scope`), and
`dry-run` shows them. Each name says where it has a value: `core` names everywhere; `data` names
in languages that pass step outputs along (pipelines); the others only in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Where = Literal["core", "data", "map", "loop", "compensation", "retry"]


@dataclass(frozen=True)
class Builtin:
    name: str
    where: Where
    about: str


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin("workdir", "core", "the run's work directory"),
        Builtin("run_id", "core", "the run's id"),
        Builtin("agent_type", "core", "the default agent's kind: claude, openai, command, …"),
        Builtin("skip_permissions", "core", "false; cyberian's flag, kept for its templates"),
        Builtin("iteration", "core", "the round of the loop around the prompt, 1 outside a loop"),
        Builtin("human", "core", "people's answers by gate id: human.GATE"),
        Builtin("inputs", "data", "the run's params as one mapping: inputs.NAME"),
        Builtin("steps", "data", "earlier steps' values: steps.ID.output, steps.ID.outputs.KEY"),
        Builtin("input", "data", "the value the step is given"),
        Builtin("item", "map", "the element of the list a map's agent works on"),
        Builtin("index", "map", "the element's position in the list, from 0"),
        Builtin("feedback", "loop", "what the loop's check said of the previous round"),
        Builtin("output", "compensation", "the output of the step being undone"),
        Builtin("error", "retry", "why the previous attempt failed its success check"),
    )
}


def names(*where: Where) -> frozenset[str]:
    """The built-in names that have a value in any of these places."""
    return frozenset(b.name for b in BUILTINS.values() if b.where in where)


def shadowing(key: str) -> str | None:
    """Why a memory key (store_as) may not take this name, or None."""
    builtin = BUILTINS.get(key)
    return f"'{key}' is a built-in name ({builtin.about})" if builtin else None


def template_values(
    *,
    workdir: str,
    run_id: str,
    agent_type: str,
    params: dict[str, Any],
    memory: dict[str, Any],
    steps: dict[str, Any],
    human: dict[str, Any],
) -> dict[str, Any]:
    """What every template of a run sees before a node adds its own values (input, item, …):
    the core built-ins, the params bare and as `inputs`, stored memory keys, steps and answers.
    The engine and `dry-run` both build template values here."""
    core = {"agent_type": agent_type, "skip_permissions": False, "workdir": workdir, "run_id": run_id, "iteration": 1}
    return {**core, **params, "inputs": params, **memory, "steps": steps, "human": human}
