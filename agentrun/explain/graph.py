"""A Plan's execution graph as text, drawn in the seed's ASCII style.

Each step is a figure of blocks (`client.blocks`) that its kind's view draws (`client.views`); the
steps are chained left to right and wrapped into rows. A step that holds several agents (parallel,
conditional, loop, map) labels them with letters after the step's number (2a, 2b, 2c), so the
graph and the step listings agree.
"""

from __future__ import annotations

from agentrun.explain.blocks import Block, chain, rows
from agentrun.explain.views import view_of
from agentrun.explain.views.words import marks
from agentrun.lang import ir

WIDTH = 100  # past this a chain goes on in a new row, so figures stay whole in a terminal


def draw(plan: ir.Plan, width: int = WIDTH) -> str:
    """The execution graph: numbered steps as figures, any other plan as a chain of its tasks."""
    drawer = Drawer(plan.agents, scopes(plan), plan.traits)
    steps = top_steps(plan)
    blocks = [drawer.block(node, str(i + 1), follows=i < len(steps) - 1) for i, node in enumerate(steps)]
    return "\n".join(rows(blocks, width)) if blocks else "(no steps)"


def top_steps(plan: ir.Plan) -> list[ir.Node]:
    """What the graph numbers 1, 2, 3: the numbered steps of a language that numbers them (or draft
    goals) in execution order, a behaviour tree's top node (the whole tree under it), else the
    plan's tasks."""
    if plan.traits.tree:
        return [plan.root]
    if plan.traits.numbered_steps and isinstance(plan.root, ir.Sequence):
        return list(plan.root.children)
    if isinstance(plan.root, ir.Graph):
        return [plan.root]
    return list(plan.leaves())


def scopes(plan: ir.Plan) -> dict[str, list[ir.Sequence]]:
    """Task groups (a task and its subtasks) with a gate or budget, by the id of the first task they
    run: the listing and the graph show only tasks, so a group's marks go on its first one. A
    behaviour tree's listing shows every node, each with its own marks."""
    found: dict[str, list[ir.Sequence]] = {}
    if plan.traits.tree:
        return found
    for node in plan.walk():
        if isinstance(node, ir.Sequence) and (node.gate or node.budget):
            first = next((n for n in ir.walk(node) if isinstance(n, (ir.Task, ir.Provider, ir.Human))), None)
            if first is not None:
                found.setdefault(first.id, []).append(node)
    return found


def is_empty(node: ir.NodeBase | None) -> bool:
    """A branch that runs nothing: no `false:` given, or a `true:` left out."""
    return node is None or (isinstance(node, ir.Sequence) and not node.children)


class Drawer:
    """The walk of the graph: each step's figure from its kind's view, with the notes every kind has."""

    def __init__(self, agents: dict[str, ir.AgentInfo], groups: dict[str, list[ir.Sequence]], traits: ir.Traits):
        self.agents, self.groups, self.traits = agents, groups, traits

    def block(self, node: ir.Node | None, tag: str, follows: bool) -> Block:
        """The figure of a step numbered `tag`; `follows` when a later step joins on after it."""
        if node is None or is_empty(node):
            return Block(("nothing runs",))
        view = view_of(node, self.traits)
        shape = view.draw(node, tag, follows, self)
        notes = [f"{group.label}: " + "; ".join(marks(group, self.agents)) for group in self.groups.get(node.id, [])]
        if not view.boxed and marks(node, self.agents):
            notes.append("; ".join(marks(node, self.agents)))  # a figure has no box to write them in
        return chain([Block((f"({note})",)) for note in notes] + [shape])

    def box(self, node: ir.Node, tag: str, suffix: str = "") -> str:
        """One box standing for a node, numbered `tag`, with its marks when its kind is drawn boxed."""
        view = view_of(node, self.traits)
        if view.boxed and marks(node, self.agents):
            suffix += " (" + "; ".join(marks(node, self.agents)) + ")"
        return f"[{tag}. {view.box_text(node, self.agents)}{suffix}]"
