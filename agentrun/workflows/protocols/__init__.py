"""How an agent's reply is read: one module per protocol, chosen by a task's `protocol`.

A protocol prompts the task's agent through the run's conversation and turns the replies into
the task's value, or fails the task. A new language brings its own protocol here (checkpoints and
verdicts, a behaviour tree's results) and names it in the tasks it compiles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentrun.lang import ir
from agentrun.lang.render import UndefinedNames
from agentrun.workflows.protocols import checkpoint, plain, status, tree

if TYPE_CHECKING:
    from agentrun.contract import TaskState
    from agentrun.workflows.interpreter import Interpreter
    from agentrun.workflows.scope import Scope


class ReplyProtocol(Protocol):
    def first_prompt(self, node: ir.Task, values: dict[str, Any], undefined: UndefinedNames = "error") -> str:
        """The first prompt the task sends, from its templates and these template values."""
        ...

    async def perform(
        self, engine: Interpreter, node: ir.Task, scope: Scope, task: TaskState, retry_error: str | None
    ) -> Any:
        """Prompt the agent until its replies give the task's value; TaskFailed if they cannot.
        `retry_error` says why the previous attempt failed its success check."""
        ...


PROTOCOLS: dict[str, ReplyProtocol] = {
    "status": status.STATUS,
    "plain": plain.PLAIN,
    "checkpoint": checkpoint.CHECKPOINT,
    "evaluate": tree.TREE,
    "instruct": tree.TREE,
}
