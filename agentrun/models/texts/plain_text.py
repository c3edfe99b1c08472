"""What a plain step says to its agent: its templates, then the input and feedback it did not place."""

from __future__ import annotations

from typing import Any

from agentrun.lang import ir
from agentrun.lang.render import UndefinedNames, names_used, render, to_text


def prompt(task: ir.Task, values: dict[str, Any], undefined: UndefinedNames = "error") -> str:
    """The agent's prompt template, then the input and feedback it did not place itself."""
    parts = [render(task.system, values, undefined)] if task.system else []
    parts.append(render(task.prompt, values, undefined))
    used = names_used(task.prompt) | (names_used(task.system) if task.system else frozenset[str]())
    for name, heading in (("input", "Input:"), ("feedback", "Feedback on your previous output:")):
        placed = name in used or (name == "input" and "item" in used)
        if values.get(name) is not None and not placed:
            parts.append(f"{heading}\n{to_text(values[name])}")
    return "\n\n".join(p.strip() for p in parts if p.strip())
