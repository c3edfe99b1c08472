"""AgentRun: the one generic workflow. It interprets the Plan it is given, deterministically.

People reach a running run through updates: `answer` (a gate), `raise_budget` (a paused budget)
and `rollback_on_cancel` (the cancellation that follows runs the compensation stack). An answer or a
budget raise can also come as a signal (`queue_answer`, `queue_budget`), sent when no worker may be
there to take an update: the run checks it with the same refusals, and records a refusal instead of
failing the sender.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.models import contract, limits
from agentrun.models.contract import (
    Answer,
    AnswerInput,
    BudgetInput,
    EvalInput,
    Note,
    NoteInput,
    RunInput,
    RunState,
    RunStatus,
    StepRecord,
    SubmitInput,
    ThinkInput,
    VarWriteInput,
    limits_text,
)
from agentrun.models.driven import NextStep, Recorded, Said, VarWritten
from agentrun.workflows import gates, notes
from agentrun.workflows.budgets import Budgets
from agentrun.workflows.continuing import Continuing
from agentrun.workflows.conversation import Conversation
from agentrun.workflows.driven import PROTOCOL_STEP, Driven
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.humans import Humans
from agentrun.workflows.interpreter import Interpreter
from agentrun.workflows.journal import Journal
from agentrun.workflows.reuse import STEP_LOG, Reuse
from agentrun.workflows.saga import Saga

# A rolled-back run's failure says so first; runs recorded before this said it last.
ROLLED_BACK_FIRST = "rolled-back-first"
WHOLE_ROLLBACK = "rollback-outlasts-a-cancel"
# Queued answers and budget raises are held to the size limits of agentrun.models.limits. The
# updates' validators check them without a patch: replay does not run validators.
QUEUED_LIMITS = "queued-inputs-are-capped"
# The run's open gates go to its memo (contract.INBOX_MEMO) as they open and close.
INBOX_IN_MEMO = "open-gates-in-memo"


@workflow.defn(name=contract.WORKFLOW)
class AgentRun:
    @workflow.init
    def __init__(self, inp: RunInput) -> None:
        plan = inp.plan
        self.inp = inp
        self.activities_scheduled = 0  # numbers the activity ids Temporal Web shows
        self.run_state = RunState(
            run_id=workflow.info().workflow_id,
            spec=plan.name,
            dialect=plan.dialect,
            traits=plan.traits,
            goal=plan.goal or plan.description,
            constraints=plan.constraints,
            budget=plan.budget,
            tasks=contract.task_rows(plan),
            memory=copy.deepcopy(plan.memory),
            constants=plan.constants,
            parent_run=inp.parent_run,
        )
        if inp.fork is not None:
            self.run_state.forked_from(inp.fork)
        if inp.carried is not None:  # the run continued as new: it goes on where it was
            self.run_state = inp.carried.state
        self.humans = Humans(self.run_state, self._changed)
        self.budgets = Budgets(self.run_state, self.humans.pause)
        self.saga = Saga(self.run_state)
        if inp.carried is not None:
            self.saga.restore(plan, inp.carried.undos)
        self.conversation = Conversation(inp, self.run_state, self.budgets)
        self.conversation.humans = self.humans
        if inp.carried is not None:
            self.conversation.transcripts, self.conversation.turns = inp.carried.transcripts, inp.carried.turns
        self.rollback = inp.carried.rollback if inp.carried else False  # set by rollback_on_cancel
        self.saga_ran = False
        self.published: tuple[str, str] | None = None
        # What the inbox memo says now; a run starts with an empty one (client.launch).
        self.inbox_published: dict[str, Any] = contract.empty_inbox(plan.name)
        self.driven = Driven(self.run_state, plan.constants, self._changed) if inp.driven else None

    @workflow.run
    async def run(self, inp: RunInput) -> RunState:
        if inp.carried is None:
            self.run_state.start(workflow.now())
        self._publish()
        reuse = Reuse(self.run_state, inp.fork, recording=workflow.patched(STEP_LOG))
        interpreter = Interpreter(
            inp, self.run_state, _skipped(inp), self.humans, self.saga, self.budgets, self.conversation, reuse
        )
        # An agent driving a tree over MCP holds a phase machine the carried state lacks: such runs
        # are as long as an agent keeps at it, and stay one execution.
        interpreter.continuing = None if inp.driven else Continuing(inp, lambda: self.rollback)
        if inp.carried is not None:
            interpreter.journal, interpreter.ran = Journal(inp.carried.journal), inp.carried.ran
        try:
            await asyncio.wait_for(self._walk(interpreter, inp.plan.root), timeout=self._time_left(inp))
        except TaskFailed as exc:
            await self._failed(interpreter, exc)
        except TimeoutError:
            self.run_state.record_error(
                f"the run's timeout ({inp.plan.timeout_s:g}s) was reached; running agents were cancelled"
            )
            self._end("timeout")
            raise ApplicationError(
                "the run timed out; partial results are in its report",
                self.run_state.shown(),
                type="RunTimedOut",
                non_retryable=True,
            ) from None
        except asyncio.CancelledError:
            self.run_state.move("cancelled")
            if self.rollback:
                await self._compensate(interpreter)
            self._end("cancelled")
            raise
        self._end("completed")
        if inp.parent_run:  # a subgraph's undos join its parent's stack (workflows.nodes.subflow)
            self.run_state.hand_undos(self.saga.carried())
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.run_state.shown()

    def _time_left(self, inp: RunInput) -> float | None:
        """The run's timeout counts from its start, across the executions it continued as new into."""
        timeout, started = inp.plan.timeout_s, self.run_state.started_at
        if timeout is None or inp.carried is None or started is None:
            return timeout
        return max(timeout - (workflow.now() - started).total_seconds(), 0.001)

    async def _walk(self, interpreter: Interpreter, root: ir.Node) -> None:
        """The plan's tree; a driven run's agent first accepts the protocol it is given."""
        if self.driven is not None:
            interpreter.driven = self.driven
            if not await self.driven.accepted():
                raise TaskFailed(PROTOCOL_STEP, "the agent did not accept the protocol")
        await interpreter.run(root)

    async def _failed(self, interpreter: Interpreter, exc: TaskFailed) -> None:
        state = self.run_state
        error = f"{exc.task_id}: {exc.message}"
        state.failed_with(error)
        state.move("failed")
        failed = await self._compensate_whole(interpreter)
        status = "compensated" if self.saga_ran and not failed else "failed"
        self._end(status)
        await workflow.wait_condition(workflow.all_handlers_finished)
        message = f"task {exc.task_id} failed: {exc.message}"
        if status == "compensated" and workflow.patched(ROLLED_BACK_FIRST):
            message = f"rolled back after task {exc.task_id} failed: {exc.message}"
        elif self.saga_ran:
            message += f"; compensations failed: {', '.join(failed)}" if failed else "; its compensations ran"
        raise ApplicationError(message, state, type="RunFailed", non_retryable=True) from None

    async def _compensate_whole(self, interpreter: Interpreter) -> list[str]:
        """`_compensate`, which a cancellation that comes during the rollback does not cut short:
        an undo already started would otherwise be abandoned half done and the ones after it never
        run. The run still ends as the failure that started the rollback."""
        if not workflow.patched(WHOLE_ROLLBACK):
            return await self._compensate(interpreter)
        rollback = asyncio.ensure_future(self._compensate(interpreter))
        while True:
            try:
                return await asyncio.shield(rollback)
            except asyncio.CancelledError:
                if rollback.done():
                    raise
                self.run_state.warn("cancelled during the rollback: the compensations ran to the end")

    async def _compensate(self, interpreter: Interpreter) -> list[str]:
        """Undo what succeeded, last first; the ids of compensations that failed too."""
        self.saga_ran = bool(self.saga.pending)
        if not self.saga_ran:
            return []
        workflow.set_current_details(f"Compensating: {self.saga.pending} step(s) to undo")
        self.conversation.rolling_back = True
        output = self.run_state.final_output  # what the run made, not what undoing it said
        failed = await self.saga.rollback(interpreter.run)
        self.run_state.give_output(output)
        if failed:
            self.run_state.record_error(f"compensations failed: {', '.join(failed)}")
        return failed

    @workflow.query(name=contract.STATE)
    def query_state(self) -> RunState:
        return self.run_state.shown()

    @workflow.query(name=contract.HELD)
    def query_held(self) -> str:
        return self.run_state.status

    @workflow.query(name=contract.STEP_LOG)
    def query_step_log(self) -> list[StepRecord]:
        return self.run_state.step_log

    @workflow.update(name=contract.ANSWER)
    def answer(self, given: AnswerInput) -> Answer:
        return self._answer(given)

    @answer.validator
    def _check_answer(self, given: AnswerInput) -> None:
        _refuse(limits.answer_refusal(given) or gates.answer_refusal(self.run_state, given))

    @workflow.update(name=contract.SAY)
    def say(self, given: NoteInput) -> Note:
        return notes.take(self.run_state, given)

    @say.validator
    def _check_say(self, given: NoteInput) -> None:
        _refuse(notes.refusal(self.run_state, given))

    @workflow.signal(name=contract.QUEUE_ANSWER)
    def queued_answer(self, given: AnswerInput) -> None:
        too_large = limits.answer_refusal(given) if workflow.patched(QUEUED_LIMITS) else None
        refusal = too_large or gates.answer_refusal(self.run_state, given)
        if refusal:
            self._refused(given.gate, f"queued answer to gate '{given.gate}' refused: {refusal}")
        else:
            self._answer(given)

    def _answer(self, given: AnswerInput) -> Answer:
        answer = self.humans.answer(given)
        self._changed()
        return answer

    @workflow.update(name=contract.RAISE_BUDGET)
    def raise_budget(self, given: BudgetInput) -> ir.Budget:
        return self._raise_budget(given)

    @raise_budget.validator
    def _check_budget(self, given: BudgetInput) -> None:
        _refuse(limits.budget_refusal(given) or gates.budget_refusal(self.run_state, given))

    @workflow.signal(name=contract.QUEUE_BUDGET)
    def queued_budget(self, given: BudgetInput) -> None:
        too_large = limits.budget_refusal(given) if workflow.patched(QUEUED_LIMITS) else None
        refusal = too_large or gates.budget_refusal(self.run_state, given)
        if refusal:
            self._refused(given.gate, f"queued budget raise for gate '{given.gate}' refused: {refusal}")
        else:
            self._raise_budget(given)

    def _raise_budget(self, given: BudgetInput) -> ir.Budget:
        budget = self.budgets.raised(given.gate, given.tokens, given.usd, given.iterations)
        self.humans.close(given.gate, f"raised to {limits_text(budget)}", given.comment, given.by)
        self._changed()
        return budget

    def _refused(self, gate: GateId, message: str) -> None:
        """A signal cannot be refused to its sender, who may be long gone: the run keeps the refusal."""
        self.run_state.refuse(gate, message, workflow.now())
        self._publish_inbox()

    @workflow.update(name=contract.ROLLBACK)
    def rollback_on_cancel(self) -> int:
        """The cancellation that follows undoes what the run did; how many compensations are queued."""
        self.rollback = True
        return self.saga.pending

    @workflow.update(name=contract.NEXT_STEP)
    async def next_step(self) -> NextStep:
        return await self._driven().next_step()

    @next_step.validator
    def _check_next_step(self) -> None:
        self._driven()

    @workflow.update(name=contract.EVAL)
    def eval(self, given: EvalInput) -> Said:
        return self._driven().eval(given)

    @eval.validator
    def _check_eval(self, given: EvalInput) -> None:
        _refuse(self._driven().eval_refusal())

    @workflow.update(name=contract.SUBMIT)
    def submit(self, given: SubmitInput) -> Said:
        return self._driven().submit(given)

    @submit.validator
    def _check_submit(self, given: SubmitInput) -> None:
        _refuse(self._driven().submit_refusal())

    @workflow.update(name=contract.THINK)
    def think(self, given: ThinkInput) -> Recorded:
        return self._driven().think(given.thought)

    @think.validator
    def _check_think(self, given: ThinkInput) -> None:
        self._driven()

    @workflow.update(name=contract.VAR_WRITE)
    def var_write(self, given: VarWriteInput) -> VarWritten:
        return self._driven().var_write(given.path, given.value)

    @var_write.validator
    def _check_var_write(self, given: VarWriteInput) -> None:
        _refuse(self._driven().var_refusal(given.path))

    def _driven(self) -> Driven:
        if self.driven is None:
            raise ApplicationError("this run is not driven by an agent over MCP", type="Refused", non_retryable=True)
        return self.driven

    def _changed(self) -> None:
        self.run_state.settle()
        self._publish()

    def _end(self, status: RunStatus) -> None:
        state = self.run_state
        state.move(status)
        if self.driven is not None:
            self.driven.finish(status)
        state.wind_up(workflow.now())
        workflow.set_current_details(f"Run **{'rolled back' if status == 'compensated' else status}**")
        # The step log grows with every step run; only a fork reads it, so it is kept apart and the
        # state people read stays small however long the run was.
        workflow.upsert_memo({"state": state.shown(), contract.STEP_LOG: state.step_log})
        self._publish()

    def _publish(self) -> None:
        """Status and "waiting for whom" as search attributes, so Temporal Web can list them."""
        self._publish_inbox()
        now = (self.run_state.status, self.run_state.waiting_for or "")
        if not self.inp.search_attributes or now == self.published:
            return
        self.published = now
        workflow.upsert_search_attributes(
            [
                contract.SPEC.value_set(self.inp.plan.name),
                contract.STATUS.value_set(now[0]),
                contract.WAITING_FOR.value_set(now[1]),
            ]
        )

    def _publish_inbox(self) -> None:
        """The open gates in the memo, whenever they change, so the inbox lists them without a query."""
        now = contract.inbox(self.run_state)
        if now == self.inbox_published or not workflow.patched(INBOX_IN_MEMO):
            return
        self.inbox_published = now
        workflow.upsert_memo({contract.INBOX_MEMO: now})


def _refuse(refusal: str | None) -> None:
    if refusal:
        raise ApplicationError(refusal, type="Refused", non_retryable=True)


def _skipped(inp: RunInput) -> set[str]:
    """With resume-from, every task before the named one in depth-first order is skipped."""
    if not inp.resume_from:
        return set()
    ids = [leaf.id for leaf in inp.plan.leaves()]
    return set(ids[: ids.index(inp.resume_from)])
