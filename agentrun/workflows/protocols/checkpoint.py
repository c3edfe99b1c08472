"""An Agentfile goal's protocol: COMMIT → EXECUTE, then RECONCILE and SUPERVISE as its supervision
asks. The agent commits to a plan (a pre-checkpoint), does the work and reports on it (a
post-checkpoint); RECONCILE compares the two by rule in the workflow; a supervisor judges the
attempt, and REORIENT sends EXECUTE again with its correction. What each phase found is kept in the
run state's `supervision`, by the goal's run key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jinja2 import TemplateError
from temporalio import workflow

from agentrun.lang import expressions, ir
from agentrun.lang.render import clip, to_text
from agentrun.models.contract import DEFAULT_MAX_ITERATIONS, GoalSupervision, SupervisedAttempt, TaskState
from agentrun.models.texts.checkpoint_text import commit_prompt, execute_prompt, given, reminder, setting
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.protocols import reconcile
from agentrun.workflows.protocols.checkpoint_read import converged, output_value, read_post, read_pre
from agentrun.workflows.protocols.supervise import MAX_REORIENTS, Goal, decide
from agentrun.workflows.taint import fence

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

T = TypeVar("T")
_KEPT_OUTPUT = 4000  # characters of a post-checkpoint's output the run state keeps


class CheckpointProtocol:
    async def perform(
        self, engine: Runtime, node: ir.Task, scope: Scope, task: TaskState, retry_error: str | None
    ) -> Any:
        """COMMIT once, then EXECUTE until an attempt is accepted; its output is the goal's value."""
        goal = _goal(engine, node, scope, task)
        _, pre = await _ask_read(goal, commit_prompt(goal.at), "COMMIT", read_pre)
        goal.record.commit(pre)
        correction = f"The last attempt failed its success check: {retry_error}" if retry_error else None
        for _ in range(MAX_REORIENTS + 1):
            post = await _execute(goal, pre, correction)
            attempt = SupervisedAttempt(post=_kept(post), flags=reconcile.flags(pre, post))
            goal.record.add_attempt(attempt)
            correction = await decide(goal, pre, post, attempt)
            if correction is None:
                return output_value(post, node.outputs)
        raise TaskFailed(goal.key, f"still reoriented after {MAX_REORIENTS} corrections; the last: {correction}")


CHECKPOINT = CheckpointProtocol()


def _goal(engine: Runtime, node: ir.Task, scope: Scope, task: TaskState) -> Goal:
    key = str(scope.key)
    values = engine.values(scope)
    if engine.inp.plan.security == "paranoid":
        # What earlier goals stored reaches templates fenced off, like every output a prompt quotes.
        values.update({name: fence(to_text(value)) for name, value in engine.state.memory.items()})
    try:
        at = setting(engine.inp.plan, node, values, engine.inp.plan.undefined, fence)
        value = expressions.step_input(node.input, values, engine.all_prior()) if node.input is not None else None
    except (TemplateError, expressions.ExpressionError, TypeError) as exc:
        raise TaskFailed(key, f"cannot fill in its prompt: {exc}") from None
    at = given(at, node, value)
    record = engine.state.supervise(key, GoalSupervision(supervision=node.supervision))
    return Goal(engine, node, scope, task, at, record)


async def _execute(goal: Goal, pre: dict[str, Any], correction: str | None) -> dict[str, Any]:
    """One EXECUTE; a CONVERGE goal's rounds, each seeing the last output, until it says its word."""
    node, loop = goal.node, goal.node.loop_until
    limit = _rounds(goal)
    last: Any = None
    post: dict[str, Any] = {}
    for round_ in range(1, limit + 1):
        goal.task.count_iteration()
        text = execute_prompt(goal.at, node, pre, correction, last, goal.engine.conversation.spawn_offer(node))
        phase = f"EXECUTE round {round_}" if loop else "EXECUTE"
        reply, post = await _ask_read(goal, text, phase, lambda r: read_post(r, node.outputs), spawn=True)
        if loop is None or converged(reply, loop.status):
            return post
        last = post["output"]
    assert loop is not None
    goal.engine.warn(goal.scope, f"stopped after {limit} rounds without {loop.status}")
    return post


def _rounds(goal: Goal) -> int:
    """A CONVERGE goal's limit: WITHIN a number, or the param it names; else the run's default."""
    loop = goal.node.loop_until
    if loop is None:
        return 1
    name = loop.max_iterations_param
    if name:
        value = goal.engine.inp.params.get(name)
        try:
            return max(int(str(value).strip()), 1)
        except (TypeError, ValueError):
            raise TaskFailed(goal.key, f"its round limit ${name} is {value!r}, not a whole number") from None
    return loop.max_iterations or goal.engine.inp.max_iterations or DEFAULT_MAX_ITERATIONS


async def _ask_read(
    goal: Goal, text: str, phase: str, read: Callable[[str], T], *, spawn: bool = False
) -> tuple[str, T]:
    """Ask for a checkpoint and read it; one reminder of the format, then the goal fails. With
    `spawn` (the work itself) the agent may start sub-agents before it replies."""
    conversation = goal.engine.conversation
    workflow.set_current_details(f"Running **{goal.node.label}**: {phase}")
    reply = await conversation.ask(goal.node, goal.scope, text, phase=phase, spawn=spawn, act=spawn)
    try:
        return reply, read(reply)
    except ValueError as exc:
        why = str(exc)
    reply = await conversation.ask(
        goal.node, goal.scope, reminder(why, text), phase=f"{phase} (reminder)", spawn=spawn, act=spawn
    )
    try:
        return reply, read(reply)
    except ValueError as exc:
        raise TaskFailed(goal.key, f"its {phase} checkpoint could not be read, even after a reminder: {exc}") from None


def _kept(post: dict[str, Any]) -> dict[str, Any]:
    """The post-checkpoint as the run state keeps it: a long output cut, the rest as reported."""
    text = to_text(post.get("output"))
    return {**post, "output": clip(text, _KEPT_OUTPUT)} if len(text) > _KEPT_OUTPUT else post
