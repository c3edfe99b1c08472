"""AgentRun: the one generic workflow. It interprets the Plan it is given, deterministically."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from spec import ir
    from workflows import search
    from workflows.inputs import RunInput
    from workflows.interpreter import Interpreter
    from workflows.leaves import Leaves, TaskFailed
    from workflows.state import RunState, TaskState


@workflow.defn(name="AgentRun")
class AgentRun:
    @workflow.init
    def __init__(self, inp: RunInput) -> None:
        plan = inp.plan
        self.inp = inp
        self.run_state = RunState(run_id=workflow.info().workflow_id, spec=plan.name, dialect=plan.dialect,
                              tasks={n.id: _task_state(n) for n in plan.leaves()})

    @workflow.run
    async def run(self, inp: RunInput) -> RunState:
        self.run_state.status, self.run_state.started_at = "running", workflow.now()
        self._publish()
        interpreter = Interpreter(Leaves(inp, self.run_state), self.run_state, _skipped(inp))
        try:
            await asyncio.wait_for(interpreter.run(inp.plan.root), timeout=inp.plan.timeout_s)
        except TaskFailed as exc:
            if f"{exc.task_id}: {exc.message}" not in self.run_state.errors:
                self.run_state.errors.append(f"{exc.task_id}: {exc.message}")
            self._end("failed")
            raise ApplicationError(f"task {exc.task_id} failed: {exc.message}", self.run_state,
                                   type="RunFailed", non_retryable=True) from None
        except asyncio.TimeoutError:
            self.run_state.errors.append(f"the run's timeout ({inp.plan.timeout_s:g}s) was reached; "
                                         "running agents were cancelled")
            self._end("timeout")
            raise ApplicationError("the run timed out; partial results are in its report", self.run_state,
                                   type="RunTimedOut", non_retryable=True) from None
        except asyncio.CancelledError:
            self._end("cancelled")
            raise
        self._end("completed")
        return self.run_state

    @workflow.query(name="state")
    def query_state(self) -> RunState:
        return self.run_state

    def _end(self, status: str) -> None:
        self.run_state.status, self.run_state.ended_at, self.run_state.current_task = status, workflow.now(), None
        for task in self.run_state.tasks.values():
            if task.status == "running":
                task.status = "cancelled"
        workflow.set_current_details(f"Run **{status}**")
        workflow.upsert_memo({"state": self.run_state})
        self._publish()

    def _publish(self) -> None:
        if self.inp.search_attributes:
            workflow.upsert_search_attributes([search.SPEC.value_set(self.inp.plan.name),
                                               search.STATUS.value_set(self.run_state.status)])


def _task_state(node: ir.Task | ir.Provider) -> TaskState:
    agent = node.agent if isinstance(node, ir.Task) else node.call.provider
    return TaskState(id=node.id, title=node.label, kind=node.kind, agent=agent)


def _skipped(inp: RunInput) -> set[str]:
    """With resume-from, every task before the named one in depth-first order is skipped."""
    if not inp.resume_from:
        return set()
    ids = [leaf.id for leaf in inp.plan.leaves()]
    return set(ids[: ids.index(inp.resume_from)])
