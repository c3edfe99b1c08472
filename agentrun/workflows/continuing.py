"""Continue-as-new: a run whose history nears Temporal's limits goes on in a fresh execution of
the same workflow id, carrying its state, and walks its plan again to where it was.

Temporal warns at 10,240 events and refuses 51,200; a loop or a cycle of a few thousand rounds
would reach them. Between two work nodes, when nothing else is under way (no agent call, no gate,
no other branch's step), a run whose history has passed its limit, or that the server suggests
should continue, continues as new. People notice nothing: the workflow id stays, and `status`,
`watch` and Temporal Web follow the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from temporalio import workflow

from agentrun.models.contract import HISTORY_LIMIT, Carried, RunInput

if TYPE_CHECKING:
    from agentrun.workflows.interpreter import Interpreter

# Runs recorded before runs could continue as new never check their history's length.
CONTINUE_AS_NEW = "continue-as-new"


class Continuing:
    def __init__(self, inp: RunInput, rollback: Callable[[], bool]) -> None:
        self.inp, self.rollback = inp, rollback  # rollback: whether a cancellation should undo the run
        self.limit = inp.history_limit or HISTORY_LIMIT

    def due(self) -> bool:
        info = workflow.info()
        return info.get_current_history_length() >= self.limit or info.is_continue_as_new_suggested()

    async def if_due(self, engine: Interpreter, own: int = 0) -> None:
        """Continue as new now if it is time; otherwise return at once. `own` is the work nodes the
        caller is inside (a task between the rounds of its loop): nothing else may be under way."""
        if engine.busy != own or engine.conversation.rolling_back or not self.due():
            return
        if not workflow.patched(CONTINUE_AS_NEW):
            return
        await workflow.wait_condition(workflow.all_handlers_finished)
        if engine.busy != own:  # another branch started a step meanwhile: the next boundary will do
            return
        engine.state.continued()
        carried = Carried(
            state=engine.state,
            journal=engine.journal.entries,
            transcripts=engine.conversation.transcripts,
            turns=engine.conversation.turns,
            ran=engine.ran,
            undos=engine.saga.carried(),
            rollback=self.rollback(),
        )
        workflow.continue_as_new(self.inp.model_copy(update={"carried": carried}))
