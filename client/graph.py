"""A Plan's execution graph as text, drawn in the seed's ASCII style.

The drawing is built from blocks (`client.blocks`), chained on their anchor rows and fanned out
between junctions. A step that holds several agents (parallel, conditional, loop, map) labels them with
letters after the step's number (2a, 2b, 2c), so the graph and the step listings agree.
"""

from __future__ import annotations

import re
import string

from rich.cells import cell_len

from client.blocks import Block, chain, fan, rows
from spec import ir
from workflows.budgets import limits_text

WIDTH = 100  # past this a chain goes on in a new row, so figures stay whole in a terminal


def draw(plan: ir.Plan, width: int = WIDTH) -> str:
    """The execution graph: pipeline steps as figures, any other plan as a chain of its tasks."""
    drawer = _Drawer(plan.agents, scopes(plan))
    steps = top_steps(plan)
    blocks = [drawer.block(node, str(i + 1), follows=i < len(steps) - 1) for i, node in enumerate(steps)]
    return "\n".join(rows(blocks, width)) if blocks else "(no steps)"


def top_steps(plan: ir.Plan) -> list[ir.NodeBase]:
    """What the graph numbers 1, 2, 3: a pipeline's steps in execution order, else the plan's tasks."""
    if plan.dialect == "pipeline" and isinstance(plan.root, ir.Sequence):
        return list(plan.root.children)
    return list(plan.leaves())


def sub_tag(tag: str, index: int) -> str:
    """The label of a step's index-th agent: 2 -> 2a, 2b; one level deeper 2a -> 2a1, 2a2."""
    if tag[-1].isdigit():
        return tag + (string.ascii_lowercase[index] if index < 26 else f"_{index + 1}")
    return f"{tag}{index + 1}"


def bare(text: str) -> str:
    """A condition or reference without its {{ }}: what a reader needs in a figure."""
    return re.sub(r"\{\{\s*(.*?)\s*\}\}", r"\1", text).strip()


def switch_branches(node: ir.Switch) -> list[tuple[ir.NodeBase | None, str]]:
    """Every branch of a conditional with the condition that takes it, a chain of conditionals
    in their `false` branches (hot / warm / cold) read as one choice."""
    branches: list[tuple[ir.NodeBase | None, str]] = []
    current = node
    while True:
        for case in current.cases:
            branches.append((case.node, ("else if " if branches else "") + bare(case.when)))
        if not isinstance(current.default, ir.Switch):
            branches.append((current.default, "else"))
            return branches
        current = current.default


def agent_name(node: ir.NodeBase, agents: dict[str, ir.AgentInfo]) -> str:
    """A pipeline agent's declared name, else the node's title or id."""
    agent = agents.get(getattr(node, "agent", ""))
    return (agent.name if agent else "") or node.label


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def undo_who(comp: ir.NodeBase, agents: dict[str, ir.AgentInfo]) -> str:
    """Who runs a compensation: a provider call, or an agent by its declared name and id."""
    if isinstance(comp, ir.Provider):
        return f"provider {comp.call.provider}.{comp.call.method}"
    agent = agents.get(getattr(comp, "agent", ""))
    name = agent.name if agent else ""
    return f"{name} ({comp.agent})" if name else comp.agent


def marks(node: ir.NodeBase, agents: dict[str, ir.AgentInfo]) -> list[str]:
    """What guards, undoes and limits a node, in a few words each."""
    found = []
    if node.gate is not None:
        found.append("needs approval" if node.gate.approval else f"asks a person first: {node.gate.id}")
    if node.compensation is not None:
        found.append("undo: " + undo_who(node.compensation, agents))
    if node.budget is not None:
        found.append("budget " + limits_text(node.budget))
    return found


def scopes(plan: ir.Plan) -> dict[str, list[ir.Sequence]]:
    """Task groups (a task and its subtasks) with a gate or budget, by the id of the first task they
    run: the listing and the graph show only tasks, so a group's marks go on its first one."""
    found: dict[str, list[ir.Sequence]] = {}
    for node in plan.walk():
        if isinstance(node, ir.Sequence) and (node.gate or node.budget):
            first = next((n for n in _under(node) if isinstance(n, (ir.Task, ir.Provider, ir.Human))), None)
            if first is not None:
                found.setdefault(first.id, []).append(node)
    return found


def _under(node: ir.NodeBase) -> list[ir.NodeBase]:
    return [node] + [n for child in ir.children_of(node) for n in _under(child)]


def is_empty(node: ir.NodeBase | None) -> bool:
    """A branch that runs nothing: no `false:` given, or a `true:` left out."""
    return node is None or (isinstance(node, ir.Sequence) and not node.children)


class _Drawer:
    def __init__(self, agents: dict[str, ir.AgentInfo], groups: dict[str, list[ir.Sequence]]):
        self.agents, self.groups = agents, groups

    def block(self, node: ir.NodeBase | None, tag: str, follows: bool) -> Block:
        if is_empty(node):
            return Block(("nothing runs",))
        shape = self._shape(node, tag, follows)
        notes = [f"{group.label}: " + "; ".join(marks(group, self.agents)) for group in self.groups.get(node.id, [])]
        if node.kind not in _BOXED and marks(node, self.agents):
            notes.append("; ".join(marks(node, self.agents)))  # a figure has no box to write them in
        return chain([Block((f"({note})",)) for note in notes] + [shape])

    def _shape(self, node: ir.NodeBase, tag: str, follows: bool) -> Block:
        if isinstance(node, ir.Parallel):
            kids = [(self.block(c, sub_tag(tag, i), follows), "") for i, c in enumerate(node.children)]
            return fan(kids, closed=follows)
        if isinstance(node, ir.Selector):
            kids = [
                (self.block(c, sub_tag(tag, i), follows), "(first try)" if i == 0 else "(if the above fails)")
                for i, c in enumerate(node.children)
            ]
            return fan(kids, closed=follows)
        if isinstance(node, ir.Switch):
            kids = [
                (self.block(n, sub_tag(tag, i), follows), f"({cond})")
                for i, (n, cond) in enumerate(switch_branches(node))
            ]
            return fan(kids, closed=follows)
        if isinstance(node, ir.Loop):
            return self._loop(node, tag, follows)
        if isinstance(node, ir.Map):
            return self._map(node, tag, follows)
        if isinstance(node, ir.Sequence):
            return chain([self.block(c, sub_tag(tag, i), True) for i, c in enumerate(node.children)])
        return self._leaf(node, tag, follows)

    def box(self, node: ir.NodeBase, tag: str, suffix: str = "") -> str:
        if node.kind in _BOXED and marks(node, self.agents):
            suffix += " (" + "; ".join(marks(node, self.agents)) + ")"
        human = "human: " if isinstance(node, ir.Human) else ""
        return f"[{tag}. {human}{agent_name(node, self.agents)}{suffix}]"

    def _leaf(self, node: ir.NodeBase, tag: str, follows: bool) -> Block:
        box = self.box(node, tag)
        if node.fallback is None:
            return Block((box,))
        # The seed's pipeline-with-fallback figure: the backup hangs under the agent it stands in
        # for, and rejoins the line to the next step when there is one.
        backup = " \\--failure--> " + self.box(node.fallback, tag + "'")
        if not follows:
            return Block((box, backup))
        edge = max(cell_len(box), cell_len(backup)) + 3
        return Block(
            (
                box + " " + "-" * (edge - cell_len(box) - 1) + "+",
                backup + " " + "-" * (edge - cell_len(backup) - 1) + "/",
            ),
            right="wire",
        )

    def _loop(self, node: ir.Loop, tag: str, follows: bool) -> Block:
        body = self.box(node.body, sub_tag(tag, 0))
        if node.validator is not None:
            judge = self.box(node.validator, sub_tag(tag, 1))
        else:
            judge = f"(until {bare(node.until)})" if node.until else "(until it passes)"
        head = f"{body} --> {judge} --PASS" + ("" if follows else "--> done")
        back = cell_len(body) // 2  # the column of ^, under the producing agent
        fail = cell_len(body) + 5 + cell_len(judge) // 2  # the column of |, under the checker
        span = fail - back - 1
        label = " feedback " if span >= 12 else ""
        dashes = span - len(label)
        fail_at = max(fail - 2, back + 2)
        lines = (
            head,
            " " * back + "^" + " " * span + "|",
            " " * back + "|" + " " * (fail_at - back - 1) + "FAIL",
            " " * back + "\\" + "-" * (dashes // 2) + label + "-" * (dashes - dashes // 2) + "/",
            " " * back + f"(max {node.max_iterations} iterations)",
        )
        return Block(lines, right="wire" if follows else "end")

    def _map(self, node: ir.Map, tag: str, follows: bool) -> Block:
        reduce = node.reduce
        head = "+--> " + self.box(node.body, sub_tag(tag, 0) if reduce else tag, " × N")
        right = "end"
        if reduce is not None or follows:
            head, right = head + " --+", "wire"
        if reduce is not None:
            head, right = head + "--> " + self.box(reduce, sub_tag(tag, 1)), "box"
        return Block((head, f"     (each of {bare(node.over)})"), left="joint", right=right)


# Nodes drawn as one box, whose marks go inside it.
_BOXED = frozenset({"task", "provider", "human"})
