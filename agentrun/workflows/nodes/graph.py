"""A state graph: named nodes run one at a time over the run's memory, the next chosen by the
first of the node's edges whose condition holds (or by a supervisor, or an approval's rejection).

Cycles are allowed; `max_steps` node runs bound them. However many that is, each Temporal
execution's history stays short: the run continues as new between two nodes when it grows long
(`workflows.continuing`), and goes on at the node it was about to run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import expressions, ir
from agentrun.lang.render import to_text
from agentrun.models.contract import MAX_OUTPUT_CHARS, ModelUsage
from agentrun.workflows import taint
from agentrun.workflows.budgets import overrun
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.graph_memory import RUN_PARAMS, visible, write

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Graph
# Runs recorded before this counted a node's budget over all its runs, and only before each prompt.
NODE_BUDGET_PER_RUN = "graph-node-budget-per-run"


async def execute(engine: Runtime, node: ir.Graph, scope: Scope) -> Any:
    memory = engine.state.memory
    for name in engine.inp.plan.params:
        if name not in RUN_PARAMS and name in engine.inp.params:
            engine.state.remember_default(name, engine.inp.params[name])
    current, runs = _resumed(engine, scope) or (node.start, 0)  # runs: node runs so far, in all executions
    value: Any = None
    while current is not None:
        if runs:
            _next_run_starts(engine, scope, current, runs)
        runs += 1
        if runs > node.max_steps:
            raise TaskFailed(str(scope.key), _cut(node, current))
        child, access = node.nodes[current], node.access.get(current, ir.Access())
        reads = visible(memory, access)
        inner = scope.in_round(runs).with_values(input=reads).derived([k for k in reads if k in engine.state.taint])
        budgeted = child.budget is not None and workflow.patched(NODE_BUDGET_PER_RUN)
        if budgeted:
            _fresh_budget(engine, child, inner)
        value = await engine.run(child, inner)
        if budgeted:
            _within_budget(engine, child, inner)
        write(engine, node, child, value, inner)
        current = next_node(engine, node, child, access, value, scope)
    final_output(engine, node)
    return value


def _fresh_budget(engine: Runtime, child: ir.Node, scope: Scope) -> None:
    """A node's budget caps each run of it, as in the state-graph reference: a new run starts with nothing spent
    (unless it is the run that was under way when the run continued as new)."""
    if not engine.journal.resuming(scope.path_of(engine.key_of(child, scope))):
        engine.state.reset_step_usage(child.id)


def _within_budget(engine: Runtime, child: ir.Node, scope: Scope) -> None:
    """After the node: what this run of it spent against its budget. Over it, the node fails and
    writes nothing (the engine already refuses a prompt past it within the run)."""
    assert child.budget is not None
    over = overrun(child.budget, engine.state.step_usage.get(child.id, ModelUsage()))
    if over:
        key = str(engine.key_of(child, scope))
        raise TaskFailed(key, f"budget exceeded in node {child.id}: {over}", retryable=False)


def _resumed(engine: Runtime, scope: Scope) -> tuple[str, int] | None:
    """The node a graph was about to run when the run continued as new, and its node runs then."""
    point = engine.journal.get(scope.path + "#graph")
    return (point["node"], point["runs"]) if point else None


def _next_run_starts(engine: Runtime, scope: Scope, current: str, runs: int) -> None:
    """What a run that continues as new needs to go on at `current`: memory holds the rest."""
    engine.journal.forget_under(f"{scope.path}@{runs}")
    engine.journal.mark(scope.path + "#graph", {"node": current, "runs": runs})


def final_output(engine: Runtime, graph: ir.Graph) -> None:
    """What the run's report gives as its output: the graph's declared outputs, else what the last
    node that wrote memory wrote (a supervisor's __done__ is no output)."""
    memory, keys = engine.state.memory, [k for k in graph.outputs if k in engine.state.memory]
    for name in reversed(engine.state.visited_nodes if not keys else []):
        access, child = graph.access.get(name), graph.nodes.get(name)
        if access is not None and not isinstance(child, ir.Supervisor):
            keys = [k for k in dict.fromkeys([*access.write_keys, access.write_key]) if k and k in memory]
        if keys:
            break
    if keys:
        shown = memory[keys[0]] if len(keys) == 1 else {k: memory[k] for k in keys}
        engine.state.give_output(to_text(shown)[:MAX_OUTPUT_CHARS])


def next_node(
    engine: Runtime, graph: ir.Graph, node: ir.Node, access: ir.Access, value: Any, scope: Scope
) -> str | None:
    """Where the run goes after `node`; None when the graph is done. TaskFailed when a node that
    does not end the graph has nowhere to go."""
    if isinstance(node, ir.Supervisor):  # its edges to the nodes it manages are its choices, not routes
        return None if value == ir.DONE else str(value)
    if isinstance(node, ir.Human) and node.approval and value == ir.REJECT:
        if access.on_reject:
            return access.on_reject
        raise TaskFailed(str(scope.key), f"rejected at approval '{node.id}', which names no rejection_node_id")
    for edge in graph.edges:
        if edge.source == node.id and holds(engine, graph, edge, scope):
            return edge.target
    if node.id in graph.end_nodes:
        return None
    outgoing = [e for e in graph.edges if e.source == node.id]
    why = "none of its edges' conditions holds" if outgoing else "it has no outgoing edge"
    raise TaskFailed(str(scope.key), f"no route out of node '{node.id}': {why}, and it is not an end node")


def holds(engine: Runtime, graph: ir.Graph, edge: ir.Edge, scope: Scope) -> bool:
    """Whether an edge's condition holds over memory; under strict taint a condition reading a
    key that came from outside is false, with a warning naming the key."""
    if edge.when is None:
        return True
    if graph.strict_taint:
        tainted = [k for k in memory_reads(edge.when) if k in engine.state.taint]
        if tainted:
            source = taint.origin(tainted[0], engine.state)
            engine.warn(
                scope,
                f"edge {edge.source} → {edge.target}: condition '{edge.when}' reads tainted key {tainted[0]} ({source}); taken as false",
            )
            return False
    values = {**engine.values(scope), "memory": engine.state.memory}
    taken, warning = expressions.condition(edge.when, values)
    if warning:
        engine.warn(scope, warning)
    return taken


def memory_reads(condition: str) -> list[str]:
    """The memory keys a condition reads (`memory.score` reads score)."""
    return [str(p[1]) for p in expressions.references(condition) if len(p) > 1 and p[0] == "memory"]


def _cut(graph: ir.Graph, current: str) -> str:
    return (
        f"stopped after {graph.max_steps} node runs (max_iterations) before running '{current}' again; "
        "raise max_iterations or give the cycle a condition that ends it"
    )


HANDLER = Handler(KIND, execute)
