"""A subgraph: one of the plan's graphs run as a Temporal child workflow, the same AgentRun type
with a plan made of the subgraph, so Temporal Web shows it as a run of its own under its parent.

Its id comes from the parent's run id, the node's run key and which run of the node this is
(`<run>--<node>-<visit>`, `.N` added for the node's Nth attempt), so a worker that replays the
parent finds the child it started, which goes on from its own history: no finished child step
runs again. Its memory starts as `input_mapping` says; `output_mapping` brings its results back.

Compensation: a child that fails undoes its own work before it ends (its own saga), and the node
fails, so the parent undoes what it did before. A child that completes hands back what its
compensation stack would run; those undos join the parent's stack, named `subgraph:<node>:<action>`
as state graphs name them, and run if the parent fails later. What the child spent counts as the
parent's (run usage, its models, the budgets of the nodes around it), whether it completed or
failed; the child's run budget is what is left of the parent's, and while the child runs it holds
that: no other prompt or subgraph of the parent starts until it ends, so two subgraphs side by
side cannot each spend what was left.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError, ChildWorkflowError

from agentrun.lang import ir
from agentrun.lang.render import to_text
from agentrun.models.contract import WORKFLOW, RunState, SubgraphRun, TaintMark, TaskState
from agentrun.workflows.budgets import SUBGRAPH_HOLDS
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes import leaf
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.graph_memory import RUN_PARAMS
from agentrun.workflows.saga import compensations
from agentrun.workflows.scope import RunKey

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Subflow


async def execute(engine: Runtime, node: ir.Subflow, scope: Scope) -> dict[str, Any]:
    key = str(scope.key)
    graph = engine.inp.plan.subgraphs.get(node.graph)
    if graph is None:
        raise TaskFailed(key, f"the plan has no subgraph '{node.graph}'")
    row = engine.state.add_row_if_new(TaskState(id=key, title=node.label, kind="subgraph", agent=f"graph {node.graph}"))
    child_id = f"{engine.state.run_id}--{key}-{engine.state.node_runs.get(key, 1)}"
    child_id += f".{row.retries + 1}" if row.retries else ""
    record = SubgraphRun(graph=node.graph, run_id=child_id)
    engine.state.add_subgraph_run(key, record)
    async with leaf.Row(engine, key) as task:
        task.run_by(f"graph {node.graph}")
        async with _holding(engine):
            result = await _child(engine, node, graph, key, record, lambda child: _count(engine, scope, task, child))
            _count(engine, scope, task, result)
        _adopt_undos(engine, node, graph, result)
        outputs = _outputs(engine, node, result, child_id)
    engine.state.finish(key, "completed", workflow.now(), output=to_text(outputs))
    return outputs


@contextlib.asynccontextmanager
async def _holding(engine: Runtime) -> AsyncIterator[None]:
    """Under a run budget, hold what is left of it for the child until its spending is counted."""
    reservations = engine.conversation.reservations
    if engine.state.budget is None or engine.conversation.rolling_back or not workflow.patched(SUBGRAPH_HOLDS):
        yield
        return
    await reservations.hold_all()
    try:
        yield
    finally:
        reservations.release_all()


async def _child(
    engine: Runtime,
    node: ir.Subflow,
    graph: ir.Graph,
    key: str,
    record: SubgraphRun,
    spent: Callable[[RunState], None],
) -> RunState:
    """Run the child to its end; TaskFailed, with its reason, when it does not complete, after
    `spent` has counted what the failed child spent (its failure carries its state)."""
    try:
        result = await workflow.execute_child_workflow(
            WORKFLOW,
            _child_input(engine, node, graph),
            id=record.run_id,
            result_type=RunState,
            static_summary=f"subgraph {node.graph} of {key}",
        )
    except ChildWorkflowError as exc:
        cause = exc.cause
        details = cause.details if isinstance(cause, ApplicationError) else ()
        ended = details[0] if details and isinstance(details[0], dict) else {}
        if ended and workflow.patched(SUBGRAPH_HOLDS):
            with contextlib.suppress(ValidationError):  # a child that ended before its run began
                spent(RunState.model_validate(ended))
        record.end(
            str(ended.get("status") or "failed"),
            cause.message if isinstance(cause, ApplicationError) else str(cause or exc),
        )
        raise TaskFailed(
            key, f"subgraph '{node.graph}' (run {record.run_id}) ended {record.status}: {record.error}"
        ) from None
    except asyncio.CancelledError:
        record.end("cancelled")
        raise
    record.end(result.status)
    return result


def _child_input(engine: Runtime, node: ir.Subflow, graph: ir.Graph) -> Any:
    """The child's run: the subgraph as its plan, the mapped memory, the parent's goal and
    constraints, agents and settings, and what is left of the parent's run budget."""
    plan, memory = engine.inp.plan, engine.state.memory
    seeded = {child: copy.deepcopy(memory[parent]) for parent, child in node.input_mapping.items() if parent in memory}
    root = graph.model_copy(update={"max_steps": node.max_steps}) if node.max_steps else graph
    child_plan = plan.model_copy(
        update={
            "name": f"{plan.name}/{node.graph}",
            "description": graph.title or plan.description,
            "root": root,
            "params": {k: p for k, p in plan.params.items() if k in RUN_PARAMS},
            "memory": seeded,
            "budget": _left(engine),
        }
    )
    return engine.inp.model_copy(
        update={
            "plan": child_plan,
            "params": {k: v for k, v in engine.inp.params.items() if k in RUN_PARAMS},
            "resume_from": None,
            "carried": None,
            "parent_run": engine.state.run_id,
        }
    )


def _left(engine: Runtime) -> ir.Budget | None:
    budget, state = engine.state.budget, engine.state
    if budget is None:
        return None
    return budget.model_copy(
        update={
            "tokens": max(budget.tokens - state.total_tokens_used, 0) if budget.tokens is not None else None,
            "usd": max(budget.usd - state.total_cost_usd, 0.0) if budget.usd is not None else None,
            "iterations": max(budget.iterations - state.iteration_count, 0) if budget.iterations is not None else None,
        }
    )


def _count(engine: Runtime, scope: Scope, task: TaskState, child: RunState) -> None:
    """What the child spent, counted on the parent: its run, its models, the node and its budgets."""
    engine.state.add_child_spent(task, child, scope.budgets)


def _adopt_undos(engine: Runtime, node: ir.Subflow, graph: ir.Graph, child: RunState) -> None:
    """The child's compensation stack, bottom first, onto the parent's."""
    undos = compensations(ir.walk(graph))
    for entry, (comp_id, elements, output) in zip(child.compensation_stack, child.compensation_undos):
        action = f"subgraph:{node.id}:{entry.action_id}"
        engine.saga.adopt(action, undos[comp_id], RunKey(comp_id, tuple(elements)), output)


def _outputs(engine: Runtime, node: ir.Subflow, child: RunState, child_id: str) -> dict[str, Any]:
    """The child's memory keys that output_mapping brings back, under their parent names, each
    carrying the child's taint mark."""
    found = {}
    for child_key, parent_key in node.output_mapping.items():
        if child_key not in child.memory:
            continue
        found[parent_key] = child.memory[child_key]
        mark = child.taint.get(child_key)
        if mark is not None:
            engine.state.mark(parent_key, TaintMark(source=mark.source, derived_from=[f"{child_id}:{child_key}"]))
    return found


HANDLER = Handler(KIND, execute, work=True)
