"""A behaviour tree as `inspect` draws it: each node's type and name, its retries and the engine's
keys on it, each action's steps, and the blackboard it starts with."""

from __future__ import annotations

import json
from typing import Any

from client.views.words import first_line
from spec import ir
from workflows.contract import limits_text

STEP_CHARS = 90


def blackboard(plan: ir.Plan) -> list[str]:
    lines = [f"  $VAR.{name} = {_json(value)}" for name, value in plan.memory.items()]
    lines += [f"  $CONST.{name} = {_json(value)} (read-only)" for name, value in plan.constants.items()]
    return lines or ["  (empty)"]


def tree(plan: ir.Plan) -> list[str]:
    return _draw(plan.root, "  ", "  ")


def _draw(node: ir.Node, lead: str, pad: str) -> list[str]:
    """`lead` starts the node's own line; `pad` starts the lines under it."""
    lines = [lead + _head(node)] + [f"{pad}   {note}" for note in _notes(node)]
    if _is_action(node):
        assert isinstance(node, ir.Sequence)
        return lines + [f"{pad}   {i}. {_step(step)}" for i, step in enumerate(node.children, 1)]
    children = getattr(node, "children", [])
    for i, child in enumerate(children):
        last = i == len(children) - 1
        lines += _draw(child, pad + ("└─ " if last else "├─ "), pad + ("   " if last else "│  "))
    return lines


def _head(node: ir.Node) -> str:
    kind = "action" if _is_action(node) else node.kind
    retries = node.retry.attempts - 1
    return f"{kind} {node.label}" + (f" (retries {retries})" if retries else "")


def _notes(node: ir.Node) -> list[str]:
    notes = []
    if node.gate is not None:
        notes.append(f"approval: gate {node.gate.id} asks {json.dumps(node.gate.prompt, ensure_ascii=False)}")
    if node.budget is not None:
        notes.append(f"budget: {limits_text(node.budget)}")
    if isinstance(node.compensation, ir.Task):
        notes.append(f"compensate: {first_line(node.compensation.prompt)[:STEP_CHARS]}")
    return notes


def _step(task: ir.Node) -> str:
    text = first_line(task.prompt) if isinstance(task, ir.Task) else task.label
    kind = task.protocol if isinstance(task, ir.Task) else task.kind
    return f"{kind}: {text[:STEP_CHARS]}" + ("…" if len(text) > STEP_CHARS else "")


def _is_action(node: ir.Node) -> bool:
    children = getattr(node, "children", None)
    return bool(children) and all(isinstance(c, ir.Task) and c.tree_step is not None for c in children)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
