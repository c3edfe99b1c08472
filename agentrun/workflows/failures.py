"""How a node fails: the one exception the interpreter's failure policy acts on."""

from __future__ import annotations


class TaskFailed(Exception):
    """A node failed for good after its own attempts; `task_id` is its run key as people read it."""

    def __init__(self, task_id: str, message: str, *, retryable: bool = True):
        super().__init__(f"{task_id}: {message}")
        # False when running the node again cannot help and would only spend more (a budget ran out).
        self.task_id, self.message, self.retryable = task_id, message, retryable


class CallNotCompleted(TaskFailed):
    """A model's tool call that could not be completed: every attempt its declaration allows ended
    with its worker gone, or its time ran out. The step fails, saying which call; the model is not
    told a made-up result."""

    def __init__(self, task_id: str, message: str, *, attempts: int):
        super().__init__(task_id, message)
        self.attempts = attempts


def unexpected(exc: Exception) -> str:
    """The reason a node gives for an error no code of the node expected (a template that cannot be
    filled in, an expression that overflows): its type and message, for people to read."""
    return f"{type(exc).__name__}: {exc}"
