"""Checks on a compiled Plan that do not depend on its language."""

from __future__ import annotations

from agentrun.ids import AgentId, NodeId
from agentrun.lang import ir
from agentrun.lang.criteria_syntax import python_syntax
from agentrun.lang.errors import Problem, SpecError

# workflows.gates opens gates of these ids when a budget pauses the run: a spec's gate may not take them.
BUDGET_GATE = "budget"
COMPENSATION_KINDS = frozenset({"task", "provider"})


def check(plan: ir.Plan) -> None:
    """Raise SpecError if the Plan cannot run here."""
    problems = []
    for node in plan.walk():
        if node.kind in ir.NOT_RUNNABLE_YET:
            problems.append(
                Problem(
                    plan.source,
                    node.line,
                    1,
                    f"'{node.label}' is a {node.kind} node, which this engine does not run yet",
                    "use tasks, sequences and parallels",
                )
            )
        comp = node.compensation
        if comp is not None and comp.kind not in COMPENSATION_KINDS:
            problems.append(
                Problem(
                    plan.source,
                    comp.line,
                    1,
                    f"the compensation of '{node.label}' is a {comp.kind} node",
                    "a compensation is one agent task or one provider call",
                )
            )
    problems += _duplicate_leaves(plan) + _bad_gate_ids(plan) + _per_element(plan) + python_syntax(plan)
    if problems:
        raise SpecError(problems)


def _duplicate_leaves(plan: ir.Plan) -> list[Problem]:
    """Leaves (questions to people included) are recorded by id, so two of one id would mix up."""
    problems, seen = [], {}
    for node in plan.leaves():
        if node.id in seen:
            other = seen[node.id]
            hint = f"the other one is at line {other.line}; rename one"
            if isinstance(node, ir.Human) or isinstance(other, ir.Human):
                hint += ", or give the gate its own id:"
            problems.append(Problem(plan.source, node.line, 1, f"two tasks are both named '{node.id}'", hint))
        seen.setdefault(node.id, node)
    return problems


def _bad_gate_ids(plan: ir.Plan) -> list[Problem]:
    """Gate ids the budget pauses take. Two gates of one id are refused earlier, by each dialect
    (a task tree's gate ids, a pipeline's step ids), where the error can point at the `id:`."""
    return [
        Problem(
            plan.source,
            gate.line,
            1,
            f"gate id '{gate.id}' is kept for paused budgets",
            "give the gate another id: (a pipeline step: rename the step)",
        )
        for gate in sorted(plan.gates(), key=lambda g: g.line)
        if gate.id == BUDGET_GATE or gate.id.startswith(BUDGET_GATE + ":")
    ]


def _per_element(plan: ir.Plan) -> list[Problem]:
    """What a map's body may not do per element. A long list runs its elements in child workflows,
    which people do not answer and whose results come back summed up: a question there would
    reach no one, and an undo or a sub-agent per element would grow the run's state with the list."""
    problems = []
    for node in plan.walk():
        if not isinstance(node, ir.Map):
            continue
        for inner in ir.walk(node.body):
            refusal = _not_per_element(inner)
            if refusal:
                why, hint = refusal
                text = f"'{inner.label}' in the body of map '{node.label}' {why}"
                problems.append(Problem(plan.source, inner.line or node.line, 1, text, hint))
    return problems


_ON_THE_MAP = "put it on the map step itself, which asks or undoes once for all its elements"


def _not_per_element(node: ir.NodeBase) -> tuple[str, str] | None:
    if isinstance(node, ir.Human):
        return "asks a person", _ON_THE_MAP
    if node.gate is not None:
        return "has an approval gate", _ON_THE_MAP
    if node.compensation is not None:
        return "has a compensation", _ON_THE_MAP
    if isinstance(node, ir.Task) and node.spawn:
        return "may start sub-agents", "let a step outside the map start sub-agents"
    return None


def agent_ids(plan: ir.Plan) -> set[AgentId]:
    """Every agent a run may talk to: its tasks', fallbacks' (in walk) and compensations', and
    those of the subgraphs it runs."""
    nodes = plan.walk_all()
    tasks = [n for n in nodes if isinstance(n, ir.Task)]
    tasks += [n.compensation for n in nodes if isinstance(n.compensation, ir.Task)]
    return {AgentId(task.agent) for task in tasks}


def resolve_task(plan: ir.Plan, name: str) -> NodeId:
    """The id of the task `name` refers to: an exact id, or a unique last path segment."""
    leaves = [NodeId(leaf.id) for leaf in plan.leaves()]
    if name in leaves:
        return NodeId(name)
    matches = [i for i in leaves if i.rsplit(".", 1)[-1] == name]
    if len(matches) == 1:
        return matches[0]
    hint = ("it is ambiguous: " + ", ".join(matches)) if matches else ("tasks: " + ", ".join(leaves))
    raise SpecError([Problem(plan.source, 0, 0, f"no single task named '{name}'", hint)])
