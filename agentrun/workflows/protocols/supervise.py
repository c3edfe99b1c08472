"""SUPERVISE: a supervisor agent judges one attempt at a goal, and a person decides when it pauses
(or always, for a goal supervised by a human) at the gate `<goal>.supervise`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrun.lang import ir
from agentrun.lang.render import clip, to_text
from agentrun.models.contract import GoalSupervision, SupervisedAttempt, TaskState, Verdict
from agentrun.models.texts.checkpoint_text import SUPERVISOR, Setting, gate_id, supervise_prompt
from agentrun.workflows.conversation import first_line
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.humans import rejected
from agentrun.workflows.protocols.checkpoint_read import read_verdict

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

MAX_REORIENTS = 3  # re-executions after a REORIENT; one more and the goal fails
_SHOWN_TO_PEOPLE = 600  # characters of the output a gate's question quotes


@dataclass
class Goal:
    """One checkpoint goal being run: where, with what prompts, and its record in the run state."""

    engine: Runtime
    node: ir.Task
    scope: Scope
    task: TaskState
    at: Setting
    record: GoalSupervision

    @property
    def key(self) -> str:
        return str(self.scope.key)


async def decide(goal: Goal, pre: dict[str, Any], post: dict[str, Any], attempt: SupervisedAttempt) -> str | None:
    """None accepts the attempt; a correction sends EXECUTE again with it. TaskFailed when a
    person rejects the work (or a required person does not answer in time). The verdicts go
    into `attempt`, whose post-checkpoint may be cut short; `post` is the whole one."""
    mode = goal.node.supervision
    if mode == "none" or (mode == "supervised" and not attempt.flags):
        return None
    verdict = await _supervisor(goal, pre, post, attempt.flags)
    attempt.judged(verdict)
    if verdict.verdict == "REORIENT":
        return verdict.correction
    # A human-supervised goal is shown to a person whenever its supervisor would accept it.
    if verdict.verdict != "PAUSE" and mode != "human":
        return None
    person = await _person(goal, verdict, post)
    attempt.judged(person)
    if person.verdict == "REJECT":
        raise TaskFailed(goal.key, person.reason)
    return person.correction if person.verdict == "REORIENT" else None


async def _supervisor(goal: Goal, pre: dict[str, Any], post: dict[str, Any], flags: list[str]) -> Verdict:
    engine, node = goal.engine, goal.node
    agent = SUPERVISOR if SUPERVISOR in engine.inp.agents else node.agent
    asker = node if agent == node.agent else node.model_copy(update={"agent": agent})
    text = supervise_prompt(goal.at, pre, post, flags)
    reply = await engine.conversation.ask(asker, goal.scope, text, fresh=True, phase="SUPERVISE")
    read = read_verdict(reply)
    if read is None:
        engine.warn(goal.scope, f"the supervisor's verdict could not be read, taken as CONTINUE: {first_line(reply)}")
        return Verdict(by=f"agent {agent}", verdict="CONTINUE", reason="verdict could not be read")
    correction = read["correction"]
    if read["verdict"] == "REORIENT" and not correction:
        correction = read["reason"] or "Your work does not match what you committed to; go back to your commitment."
    return Verdict(by=f"agent {agent}", verdict=read["verdict"], correction=correction, reason=read["reason"])


async def _person(goal: Goal, verdict: Verdict, post: dict[str, Any]) -> Verdict:
    """Ask at the goal's gate: approve is CONTINUE, reject fails the goal, any other answer is a
    correction. A timeout fails a human-supervised goal and lets any other go on, with a warning."""
    node = goal.node
    gate = ir.Human(
        id=gate_id(node),
        prompt=f"Supervise goal {node.id}",
        approval=True,
        timeout_s=node.timeout_s,
        on_timeout="fail" if node.supervision == "human" else "continue",
    )
    answer = await goal.engine.ask(gate, goal.scope, _question(node, verdict, post))
    asked = [g.id for g in goal.engine.state.gates.values() if g.name == gate.id][-1]
    if answer.timed_out:
        return Verdict(by="", verdict="CONTINUE", reason="no answer in time", gate=asked)
    if answer.value == ir.REJECT:
        return Verdict(by=answer.by, verdict="REJECT", reason=rejected(asked, answer), gate=asked)
    if answer.value == ir.APPROVE:
        return Verdict(by=answer.by, verdict="CONTINUE", reason=answer.comment, gate=asked)
    return Verdict(by=answer.by, verdict="REORIENT", correction=answer.value or "", reason=answer.comment, gate=asked)


def _question(node: ir.Task, verdict: Verdict, post: dict[str, Any]) -> str:
    said = f"the supervisor says {verdict.verdict}" + (f" ({verdict.reason})" if verdict.reason else "")
    output = clip(to_text(post.get("output")), _SHOWN_TO_PEOPLE)
    return (
        f"Goal {node.id}: {said}. Its output: {output}\n"
        "Approve to accept the work, reject to fail the goal, or answer with a correction for the agent "
        "to work on."
    )
