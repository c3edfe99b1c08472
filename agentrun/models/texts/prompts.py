"""The first prompt of each protocol, as pure text: inspect and dry-run show it without loading
Temporal or the run contract, and the engine's protocols send the same text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrun.lang import ir
from agentrun.lang.render import UndefinedNames
from agentrun.models.texts import checkpoint_text, plain_text, status_text, tree_text

FirstPrompt = Callable[[ir.Task, dict[str, Any], UndefinedNames], str]


def _status(node: ir.Task, values: dict[str, Any], undefined: UndefinedNames) -> str:
    return status_text.prompt(node, values, None, undefined)


def _tree(node: ir.Task, values: dict[str, Any], undefined: UndefinedNames) -> str:
    return tree_text.step_prompt(node, values, values.get(tree_text.CONSTANTS, {}))


# Keyed as registry.PROTOCOLS is (tests/test_node_kinds.py keeps the two in step).
FIRST_PROMPTS: dict[str, FirstPrompt] = {
    "status": _status,
    "plain": plain_text.prompt,
    "checkpoint": checkpoint_text.first_prompt,
    "evaluate": _tree,
    "instruct": _tree,
}


def first_prompt(node: ir.Task, values: dict[str, Any], undefined: UndefinedNames = "error") -> str:
    """The first prompt `node` sends, from its templates and these template values."""
    return FIRST_PROMPTS[node.protocol](node, values, undefined)
