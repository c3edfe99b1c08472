"""An agent prompt: who runs it, what it gets, what its output must satisfy; in a dry run, its prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError

from agentrun.explain.views.base import Agents, Entry, Scope
from agentrun.explain.views.leaves import LeafView
from agentrun.explain.views.words import agent_name, kept, labelled, policy_text, preview, stored
from agentrun.lang import expressions, ir
from agentrun.lang.render import UndefinedNames, to_text
from agentrun.models.texts.checkpoint_text import SUPERVISOR, gate_id
from agentrun.models.texts.prompts import first_prompt

NOT_CONFIGURED = "(not configured: pass --agent ID=URI)"
TREE_PROMPT_LINES = 40

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class TaskView(LeafView[ir.Task]):
    def describe(self, node: ir.Task, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, self._runs(node, gets, inspect.agents), inspect.who)

    def _runs(self, node: ir.Task, gets: str, agents: Agents) -> str:
        if node.protocol == "checkpoint":
            by = "the default agent" if node.agent == "default" else f"agent {node.agent}"
            outputs = f"; outputs {', '.join(node.outputs)}" if node.outputs else ""
            return f"goal: {node.label} ({SUPERVISION[node.supervision]}), by {by}{outputs}"
        if node.protocol != "plain":
            return self.who(node, agents)
        text = f"{self.who(node, agents)} gets {_gets(node, gets)}"
        if node.output_key:
            text += f"; output as outputs.{node.output_key}"
        if node.step:
            text = "sequential: " + text + stored(node, node.output_format)
        return text

    def dry_run(self, node: ir.Task, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        more = at.indent
        uri = dry.uris.get(node.agent, dry.default_uri) or NOT_CONFIGURED
        lines = [at.head + f"{self.who(node, dry.agents)} via {uri}"]
        info = dry.agents.get(node.agent)
        if info is not None and info.system:  # sent with each of its prompts as the system message
            lines += labelled(more, "system: ", info.system)
        context = dry.values(scope)
        try:
            context["input"] = expressions.step_input(node.input, context, dry.all_prior())
            text = _first_prompt(node, context, dry.plan.undefined)
        except (TemplateError, expressions.ExpressionError, TypeError) as exc:
            dry.problem(f"{at.tag}: cannot fill in its prompt: {exc}")
            return lines + [f"{more}cannot fill in its prompt: {exc}"]
        if node.protocol == "plain":
            lines += labelled(more, "input: ", "(none)" if context["input"] is None else to_text(context["input"]))
        if node.protocol == "checkpoint":
            spawns = "; EXECUTE may start sub-agents (spawn_agents)" if node.spawn else ""
            lines.append(f"{more}supervision: {supervisor(node, dry.uris)}")
            lines.append(f"{more}phases: {phases(node.supervision)}{spawns}")
        if node.tree_step is not None:  # short, and its last lines are the values it shows
            return lines + preview(more, text, limit=TREE_PROMPT_LINES)
        lines += preview(more, text)
        lines.append(f"{more}expected output: {_expected(node)}")
        lines += [f"{more}  {line}" for line in checks(node)]
        policy = policy_text(node, dry.who)
        return lines + ([f"{more}{policy}"] if policy else [])

    def who(self, node: ir.Task, agents: Agents) -> str:
        return f"{agent_name(node, agents)} ({node.agent})"

    def details(self, node: ir.Task, who: Callable[[ir.Node], str]) -> list[str]:
        return super().details(node, who) + checks(node)


SUPERVISION = {"none": "unsupervised", "supervised": "supervised", "human": "supervised, human"}


def phases(supervision: ir.Supervision) -> str:
    """The checkpoint phases a goal goes through, as the Agentfile reference orders them."""
    if supervision == "none":
        return "COMMIT → EXECUTE"
    if supervision == "supervised":
        return "COMMIT → EXECUTE → RECONCILE → SUPERVISE when reconcile raises flags"
    return "COMMIT → EXECUTE → RECONCILE → SUPERVISE → a person"


def supervisor(node: ir.Task, uris: dict[str, str]) -> str:
    """A goal's supervision mode and who judges its attempts, as SUPERVISE picks the agent in a run
    with these per-agent URIs."""
    if node.supervision == "none":
        return "none"
    if SUPERVISOR in uris:
        judge = f"agent {SUPERVISOR} via {uris[SUPERVISOR]}"
    else:
        judge = f"its own agent ({node.agent}; --agent {SUPERVISOR}=URI names another)"
    if node.supervision == "human":
        return f"human — {judge} judges every attempt, then a person answers at gate {gate_id(node)}"
    return f"supervised — {judge} judges an attempt that raised flags"


def _first_prompt(node: ir.Task, context: dict[str, Any], undefined: UndefinedNames) -> str:
    """The first prompt the task's reply protocol sends (every protocol of the IR has its module)."""
    return first_prompt(node, context, undefined)


def checks(node: ir.Task) -> list[str]:
    """What a task's output must satisfy, and how a task tree's task decides it is done."""
    lines = ["schema: " + _compact(node.output_schema)] if node.output_schema else []
    lines += [f"rule: {rule}" for rule in node.rules]
    if node.loop_until and node.protocol == "checkpoint":
        lines.append(_rounds(node.loop_until))
    elif node.loop_until:
        limit = node.loop_until.max_iterations
        lines.append(
            f"repeats until the agent reports {node.loop_until.status}"
            + (f", at most {limit} iterations" if limit else "")
        )
    if node.criteria:
        kind = "python" if node.criteria.python else f"script {node.criteria.script}"
        retries = node.criteria.max_retries
        lines.append(f"success check: {kind}, up to {retries} {'retry' if retries == 1 else 'retries'}")
    return lines


def _rounds(loop: ir.LoopUntil) -> str:
    if loop.max_iterations_param:
        return f"repeats until {loop.status}, at most as many rounds as the input {loop.max_iterations_param}"
    limit = f", at most {loop.max_iterations} rounds" if loop.max_iterations else ""
    return f"repeats until {loop.status}{limit}"


def _gets(node: ir.Task, otherwise: str) -> str:
    if node.input is None:
        return otherwise
    if node.input == ir.ALL_PRIOR:
        return "all prior context (every earlier step's output)"
    return node.input


def _expected(node: ir.Task) -> str:
    if node.protocol == "status":
        return "a reply ending with its COMPLETION_STATUS"
    if node.protocol == "checkpoint":
        work = "a JSON object with " + ", ".join(node.outputs) if node.outputs else "the work"
        return f"a pre-checkpoint, then {work} and a post-checkpoint"
    parts = [node.output_format]
    if node.output_key:
        parts.append(f"as outputs.{node.output_key}")
    if node.step:
        parts.append(kept(node))
    return ", ".join(parts)


def _compact(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"
