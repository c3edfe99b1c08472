"""A behaviour tree's nodes in the tree's own words, for `inspect`, `dry-run` and the graph.

A tree compiles to sequences, selectors, parallels and tasks, whose own views speak of agents and
outputs; here each node is its type and name (an action is the sequence of its steps), a step is
its kind and text, and the graph is the tree drawn as an outline. `view_of` picks this view for
every node of a behaviour tree's plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.explain.blocks import Block
from agentrun.explain.views.base import Entry, Scope, View
from agentrun.explain.views.words import duration, first_line, marks, preview, sub_tag
from agentrun.lang import ir
from agentrun.models.texts.prompts import first_prompt

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer

KINDS = frozenset({"sequence", "selector", "parallel", "task"})
PROMPT_LINES = 40  # a step's prompt is shown whole, its values included, up to this
_DOES = {
    "sequence": "children in order, until one fails",
    "selector": "children in order, until one succeeds",
    "parallel": "children at once, all must succeed",
    "action": "steps in order",
}


class TreeView(View[Any]):
    # The outline writes each node's marks (gate, undo, budget) on its own line.
    boxed = True

    def describe(self, node: ir.Node, at: Entry, gets: str, inspect: Describer) -> list[str]:
        if isinstance(node, ir.Task):
            return [at.head + step_text(node)]
        return [at.head + headline(node) + ":"] + inspect.substeps(at, _children(node), gets)

    def dry_run(self, node: ir.Node, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        if not isinstance(node, ir.Task):
            return [at.head + headline(node)] + dry.substeps(at, _children(node), scope)
        uri = dry.uris.get(node.agent, dry.default_uri) or "(not configured: pass --agent ID=URI)"
        prompt = first_prompt(node, dry.values(scope))
        lines = [at.head + f"{node.label}, asked of {node.agent} via {uri}"]
        lines += preview(at.indent, prompt, PROMPT_LINES)
        return lines + [at.indent + "expected answer: " + answer(node, dry.plan.running)]

    def draw(self, node: ir.Node, tag: str, follows: bool, drawer: Drawer) -> Block:
        return Block(tuple(outline(node, tag, drawer.agents)))

    def who(self, node: ir.Node, agents: dict[str, ir.AgentInfo]) -> str:
        return f"{tree_kind(node)} {node.label}"


def tree_kind(node: ir.NodeBase) -> str:
    """The node's type as the tree file writes it: an action is a sequence of steps."""
    if isinstance(node, ir.Task):
        return node.protocol
    if isinstance(node, ir.Sequence) and node.children and all(_is_step(c) for c in node.children):
        return "action"
    return node.kind


def headline(node: ir.NodeBase) -> str:
    """`parallel Checks (retries 2) — children at once, all must succeed`."""
    kind = tree_kind(node)
    retries = f" (retries {node.retry.attempts - 1})" if node.retry.attempts > 1 else ""
    return f"{kind} {node.title}{retries} — {_DOES[kind]}"


def step_text(node: ir.Task) -> str:
    """`evaluate: <the first line of its text>`, with … when there is more."""
    more = " …" if len(node.prompt.strip().splitlines()) > 1 else ""
    return f"{node.protocol}: {first_line(node.prompt)}{more}"


def answer(node: ir.Task, running: ir.Running) -> str:
    if node.protocol == "evaluate":
        return "a JSON verdict {result: true | false}; false fails the action"
    again = (
        f"running is asked again after {duration(running.wait_s)}, the wait doubling up to "
        f"{duration(running.max_wait_s)}, {running.max_asks} asks at most"
    )
    return f"a JSON status {{status: success | failure | running, var: {{…}}}}; {again}"


def outline(node: ir.Node, tag: str, agents: dict[str, ir.AgentInfo]) -> list[str]:
    """The tree from `node` down, one line per node, its steps on its action's line."""
    lines = [f"{tag}. {_line(node, agents)}"]
    children = [] if tree_kind(node) == "action" else _children(node)
    for i, child in enumerate(children):
        last = i == len(children) - 1
        below = outline(child, sub_tag(tag, i), agents)
        lines.append(("└── " if last else "├── ") + below[0])
        lines += [("    " if last else "│   ") + line for line in below[1:]]
    return lines


def _line(node: ir.Node, agents: dict[str, ir.AgentInfo]) -> str:
    kind = tree_kind(node)
    retries = [f"retries {node.retry.attempts - 1}"] if node.retry.attempts > 1 else []
    noted = "; ".join(retries + marks(node, agents))
    text = f"{kind} {node.title}" + (f" ({noted})" if noted else "")
    if kind == "action":
        text += ": " + " → ".join(step.protocol for step in _children(node) if isinstance(step, ir.Task))
    return text


def _children(node: ir.NodeBase) -> list[ir.Node]:
    return list(getattr(node, "children", []))


def _is_step(node: ir.NodeBase) -> bool:
    return isinstance(node, ir.Task) and node.tree_step is not None
