"""Taint marks: data that came from a tool, a provider or the web, and everything derived from it.

A leaf's output is tainted when the leaf itself reaches outside (a provider call, an agent with
tools) or when it reads a tainted value: a step it references, a memory key, or its input.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from temporalio import workflow

from agentrun.lang import expressions, ir
from agentrun.lang.render import TemplateSyntaxError, names_used, untrusted
from agentrun.models.contract import RunState, TaintMark
from agentrun.workflows.scope import Scope

# Runs recorded before this fenced untrusted text with fixed markers, which the text itself could
# hold: a tool result writing the end marker closed the fence early.
FENCE_TAGS = "fence-tags"


def fence(text: str) -> str:
    """`text` fenced as untrusted data, its markers carrying a tag drawn for this fence from the
    workflow's seeded random (deterministic on replay), after the text exists: the text cannot
    hold it, so no end marker inside it closes the fence."""
    if not workflow.patched(FENCE_TAGS):
        return untrusted(text)
    rng = workflow.random()
    tag = f"{rng.getrandbits(64):016x}"
    while tag in text:  # one chance in 2**64 a position; drawn again rather than trusted
        tag = f"{rng.getrandbits(64):016x}"
    return untrusted(text, tag)


def source_of(node: ir.NodeBase) -> str | None:
    if isinstance(node, ir.Provider):
        return "web" if node.call.provider == "http" else f"provider:{node.call.provider}"
    if isinstance(node, ir.Task) and node.tools:
        return "tool:" + ",".join(node.tools)
    return None


def _tools_called(key: str, state: RunState) -> str | None:
    """`tool:<names>` when the leaf's agent called tools: what they gave it came from outside."""
    used = [use.tool for use in state.tool_calls.get(key, [])]
    return "tool:" + ",".join(dict.fromkeys(used)) if used else None


def reads(node: ir.NodeBase, state: RunState, scope: Scope) -> list[str]:
    """The step ids, memory keys and run keys a leaf reads through its templates and input."""
    found = list(scope.derived_from)
    if isinstance(node, ir.Task) and node.input == ir.ALL_PRIOR:
        found += list(state.steps)
    for template in _templates(node):
        steps, names = _read_by(template)
        found += [*steps, *(name for name in names if name in state.memory)]
    return list(dict.fromkeys(found))


@lru_cache(maxsize=1024)
def _read_by(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The step ids and the top-level names a template reads, parsed once per template text."""
    try:
        steps = tuple(
            str(path[1])
            for path, _ in expressions.template_references(template)
            if len(path) > 1 and path[0] == "steps"
        )
        names = tuple(sorted(names_used(template)))
    except (expressions.ExpressionError, TemplateSyntaxError):  # the leaf itself reports a bad template
        return (), ()
    return steps, names


def mark_leaf(node: ir.NodeBase, key: str, state: RunState, scope: Scope) -> None:
    """Mark the output of the leaf run as `key` when it reached outside or read marked data."""
    derived = [read for read in reads(node, state, scope) if read in state.taint] if state.taint else []
    source = source_of(node) or _tools_called(key, state)
    if source or derived:
        state.mark(key, TaintMark(source=source or "derived", derived_from=derived))


def mark_composite(key: str, ran: list[str], state: RunState) -> None:
    """Mark a node's output when any node it ran (its run keys in `ran`) produced marked data."""
    derived = [child for child in dict.fromkeys(ran) if child in state.taint]
    if derived:
        state.mark(key, TaintMark(source="derived", derived_from=derived))


def copy_to(name: str, key: str, state: RunState) -> None:
    """A value stored under another name (store_as) carries its mark along."""
    if key in state.taint:
        state.mark(name, TaintMark(source="derived", derived_from=[key]))


def origin(key: str, state: RunState) -> str:
    """Where a marked value came from in the end: the source its marks were derived from."""
    mark, seen = state.taint.get(key), {key}
    while mark is not None and mark.source == "derived" and mark.derived_from:
        first = mark.derived_from[0]
        if first in seen:
            break
        seen.add(first)
        mark = state.taint.get(first)
    return mark.source if mark is not None else "derived"


def _templates(node: ir.NodeBase) -> list[str]:
    if isinstance(node, ir.Task):
        return [t for t in (node.prompt, node.system, node.input if node.input != ir.ALL_PRIOR else None) if t]
    if isinstance(node, ir.Provider):
        return [v for v in strings(node.call.params)]
    return []


def strings(value: Any) -> list[str]:
    """Every string inside a value of dicts and lists (a provider call's templated params)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []
