"""Checks on a compiled Plan that do not depend on its language."""

from __future__ import annotations

from spec import ir
from spec.errors import Problem, SpecError


def check(plan: ir.Plan) -> None:
    """Raise SpecError if the Plan cannot run here."""
    problems = []
    seen: dict[str, int] = {}
    for node in plan.walk():
        if node.kind not in ir.RUNNABLE_KINDS:
            problems.append(Problem(plan.source, node.line, 1, f"'{node.label}' is a {node.kind} node, "
                                    "which this engine does not run yet", "use tasks, sequences and parallels"))
        if isinstance(node, (ir.Task, ir.Provider)):
            if node.id in seen:
                problems.append(Problem(plan.source, node.line, 1, f"two tasks are both named '{node.id}'",
                                        f"the other one is at line {seen[node.id]}; rename one"))
            seen[node.id] = node.line
    if problems:
        raise SpecError(problems)


def resolve_task(plan: ir.Plan, name: str) -> str:
    """The id of the task `name` refers to: an exact id, or a unique last path segment."""
    leaves = [leaf.id for leaf in plan.leaves()]
    if name in leaves:
        return name
    matches = [i for i in leaves if i.rsplit(".", 1)[-1] == name]
    if len(matches) == 1:
        return matches[0]
    hint = ("it is ambiguous: " + ", ".join(matches)) if matches else ("tasks: " + ", ".join(leaves))
    raise SpecError([Problem(plan.source, 0, 0, f"no single task named '{name}'", hint)])
