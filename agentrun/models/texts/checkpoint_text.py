"""What an Agentfile goal's phases say to agents: the COMMIT and EXECUTE prompts, the supervisor's
question, the reminder after a reply that could not be read. Earlier outputs a prompt quotes go
through `quote`, which a paranoid run turns into a delimited untrusted block."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentrun.lang import ir
from agentrun.lang.render import UndefinedNames, render, to_text, untrusted

SUPERVISOR = "supervisor"  # the agent id that judges goals when the run names one (--agent supervisor=URI)

PRE_SHAPE = (
    '{"interpretation": "the goal in your own words", "scope_in": ["what you will do"], '
    '"scope_out": ["what you will leave alone"], "approach": "how you will do it", '
    '"predictions": ["what you expect to find or produce"], "assumptions": ["what you take for granted"], '
    '"confidence": 0.8}'
)
POST_SHAPE = (
    '{"output": OUTPUT, "tools_used": ["..."], "commitment_met": "yes" | "no" | "partial", '
    '"scope_changed": false, "concerns": ["..."], "deviations": ["..."], "unexpected_results": ["..."]}'
)
VERDICT_SHAPE = '{"verdict": "CONTINUE" | "REORIENT" | "PAUSE", "correction": "...", "reason": "..."}'


@dataclass(frozen=True)
class Setting:
    """What every prompt of a goal shares: its rendered instructions and the run's security mode."""

    goal: str  # the goal's id
    system: str  # rendered system text, the research scope included
    instructions: str  # the goal's rendered prompt
    paranoid: bool = False
    converge_message: str = ""  # the rendered `loop_until.message` of a CONVERGE goal
    fence: Callable[[str], str] = untrusted  # how a paranoid run fences: a workflow's tags each fence

    def quote(self, value: Any) -> str:
        """An earlier output as a prompt shows it; in a paranoid run, fenced off as untrusted."""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
        return self.fence(text) if self.paranoid else text

    def head(self) -> list[str]:
        return [self.system, f"Goal {self.goal}:\n{self.instructions}"]


def setting(
    plan: ir.Plan,
    node: ir.Task,
    values: dict[str, Any],
    undefined: UndefinedNames = "error",
    fence: Callable[[str], str] = untrusted,
) -> Setting:
    """The goal's templates rendered; a research run's scope goes into its system text. `fence`
    fences what a paranoid run's prompts quote."""
    system = render(node.system, values, undefined) if node.system else ""
    # A dialect may already have put the scope in the goal's system text (an Agentfile does, so that
    # inspect and dry-run show it); it is said once.
    if plan.security == "research" and plan.research_scope and plan.research_scope not in system:
        system = "\n\n".join(p for p in (system, f"Research scope (stay within it): {plan.research_scope}") if p)
    instructions = render(node.prompt, values, undefined)
    message = render(node.loop_until.message, values, undefined) if node.loop_until else ""
    return Setting(node.id, system, instructions, plan.security == "paranoid", message, fence)


def commit_prompt(at: Setting) -> str:
    ask = (
        "Phase COMMIT. Before doing any of the work, state how you understand the goal and how you will "
        "go about it. Do not do the work yet. Reply with only this JSON object (confidence from 0 to 1):\n" + PRE_SHAPE
    )
    return _join([*at.head(), ask])


def execute_prompt(
    at: Setting,
    node: ir.Task,
    pre: dict[str, Any],
    correction: str | None,
    last_output: Any,
    spawn_offer: str = "",
) -> str:
    parts = [*at.head(), "Your commitment (pre-checkpoint):\n" + at.quote(pre), spawn_offer]
    if correction:
        parts.append("Your supervisor corrects your last attempt; follow this now:\n" + at.quote(correction))
    if node.loop_until:
        parts.append(_converge(at, node.loop_until.status, last_output))
    return _join([*parts, _post_ask(node.outputs)])


def supervise_prompt(at: Setting, pre: dict[str, Any], post: dict[str, Any], flags: list[str]) -> str:
    raised = ", ".join(flags) if flags else "none"
    ask = (
        f"You supervise the agent working on goal {at.goal}. Compare what it committed to before the work "
        "with what it reports after it. Reply with only this JSON object:\n"
        f"{VERDICT_SHAPE}\n"
        "CONTINUE when the work meets the goal; REORIENT with a correction the agent will follow in a new "
        "attempt; PAUSE when a person should decide."
    )
    return _join(
        [
            at.system,
            f"The goal, as the agent was given it:\n{at.instructions}",
            "Before (pre-checkpoint):\n" + at.quote(pre),
            "After (post-checkpoint):\n" + at.quote(post),
            f"Flags raised when the two were compared: {raised}",
            ask,
        ]
    )


def reminder(why: str, prompt: str) -> str:
    """A reply that could not be read: why, then the whole prompt again, so that an agent that
    keeps no conversation still knows what was asked."""
    return f"Your last reply could not be read: {why}. Answer again exactly in the format asked.\n\n{prompt}"


def _converge(at: Setting, status: str, last_output: Any) -> str:
    """A CONVERGE round: the last round's output and the stop word; never the round limit."""
    parts: list[str] = []
    if last_output is not None:
        parts += ["Your output from the last round:\n" + at.quote(last_output), "Improve on it."]
    parts += [at.converge_message, f"When another round would not change the output, say {status} in your reply."]
    return "\n".join(p.strip() for p in parts if p.strip())


def _post_ask(outputs: list[str]) -> str:
    what = f"a JSON object with the fields {', '.join(outputs)}" if outputs else "your result, as a JSON string"
    return (
        "Phase EXECUTE. Do the work now. End your reply with this JSON object (the post-checkpoint), "
        f"where OUTPUT is {what}:\n{POST_SHAPE}"
    )


def _join(parts: list[str]) -> str:
    return "\n\n".join(to_text(p).strip() for p in parts if p and p.strip())


def first_prompt(node: ir.Task, values: dict[str, Any], undefined: UndefinedNames = "error") -> str:
    """A goal's COMMIT prompt, from its templates and these values."""
    system = render(node.system, values, undefined) if node.system else ""
    at = Setting(node.id, system, render(node.prompt, values, undefined))
    return commit_prompt(given(at, node, values.get("input")))


def given(at: Setting, node: ir.Task, value: Any) -> Setting:
    """A goal with an input (the task merging what a USING clause's agents gave) sees it after its
    instructions, quoted as every earlier output is; a goal without one is left as it is."""
    if node.input is None or value is None:
        return at
    return dataclasses.replace(at, instructions=f"{at.instructions}\n\nInput:\n{at.quote(value)}")


SUPERVISE_GATE = ".supervise"  # after the goal's id: the gate's name


def gate_id(node: ir.Task) -> str:
    """The gate a person answers for a supervised goal: approve, reject, or a correction."""
    return f"{node.id}{SUPERVISE_GATE}"
