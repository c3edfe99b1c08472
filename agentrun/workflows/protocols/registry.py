"""The protocols by name: what a task's `protocol` picks to prompt its agent and read the replies.

A new language brings its own protocol here (checkpoints and verdicts, a behaviour tree's results),
names it in the tasks it compiles, and adds its first prompt to `prompts.FIRST_PROMPTS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentrun.lang import ir
from agentrun.workflows.protocols import checkpoint, plain, status, tree

if TYPE_CHECKING:
    from agentrun.models.contract import TaskState
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope


class ReplyProtocol(Protocol):
    async def perform(
        self, engine: Runtime, node: ir.Task, scope: Scope, task: TaskState, retry_error: str | None
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
