"""`inspect` and `dry-run`: a spec explained step by step, and the agent calls a run would make.

Both work from the compiled Plan alone: nothing connects to Temporal and no agent is called.
Steps are numbered as in the graph (`client.graph`), so 2a in a listing is 2a in the figure.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable
from typing import Any

from jinja2 import TemplateError
from rich.console import Console

from agentrun.explain.flowchart import flowchart
from agentrun.explain.graph import draw, is_empty, scopes, top_steps
from agentrun.explain.prepare import load_run, say_warnings
from agentrun.explain.views import view_of
from agentrun.explain.views.base import Entry, Scope, Shown, View
from agentrun.explain.views.human import question
from agentrun.explain.views.words import bare, duration, first_line, labelled, sub_tag, undo_who
from agentrun.lang import ir
from agentrun.lang.amounts import limits_text
from agentrun.lang.check import agent_ids, check
from agentrun.lang.load import load
from agentrun.lang.render import render, to_text
from agentrun.lang.scope import template_values
from agentrun.models.drivers import agent_type
from agentrun.models.texts.checkpoint_text import SUPERVISOR
from agentrun.models.texts.tree_text import CONSTANTS

INPUT_LINES = 20  # of each run input


# ---- the commands ----------------------------------------------------------------------------


def inspect_command(path: str, console: Console, form: str = "text") -> int:
    plan = load(path)
    check(plan)
    if form == "mermaid":
        _print(console, flowchart(plan))
        return 0
    _print(console, inspect_text(plan))
    return 0


def dry_run_command(args: argparse.Namespace, console: Console) -> int:
    """What `start` would run with these -p and --agent flags; SpecError as `start` raises it, but
    with no agent configured it shows which agents are not, instead of refusing."""
    plan, values, default, per_agent = load_run(args, agents_required=False)
    say_warnings(plan)
    _print(console, dry_run_text(plan, values, (default, per_agent)))
    return 0


def _print(console: Console, text: str) -> None:
    # Prompts are the user's text: no markup, emoji codes or highlighting may change them.
    console.print(text, markup=False, emoji=False, highlight=False)


# ---- inspect ---------------------------------------------------------------------------------


def inspect_text(plan: ir.Plan) -> str:
    described = Describer(plan)
    lines = _header(plan) + ["", "Inputs"] + _inputs(plan) + _state(plan) + ["", "Steps"]
    for i, node in enumerate(top_steps(plan)):
        lines += described.step(node, str(i + 1), "  ", "nothing but its prompt")
    lines += ["", "Graph"] + ["  " + line if line else "" for line in draw(plan).splitlines()]
    for name, graph in plan.subgraphs.items():  # a bundle's graphs, which its subgraph nodes run
        lines += ["", f"Subgraph {name}"] + described.step(graph, "S", "  ", "what input_mapping gives it")
    lines += ["", "Agents"] + _agents(plan) + _supervisor(plan)
    return "\n".join(lines)


def _header(plan: ir.Plan) -> list[str]:
    version = plan.version
    lines = [f"Workflow: {plan.name}" + (f", version {version}" if version else "")]
    if plan.description:
        lines.append(plan.description.strip())
    if plan.timeout_s:
        lines.append(f"Timeout for the whole run: {duration(plan.timeout_s)}")
    if plan.goal.strip() and plan.goal.strip() != plan.description.strip():
        lines.append(f"Goal: {plan.goal.strip()}")
    if plan.constraints:
        lines.append("Constraints: " + "; ".join(plan.constraints))
    if plan.budget:
        lines.append(f"Budget for the whole run: {_budget(plan.budget)}")
    lines += _security(plan)
    if plan.prices:
        lines.append(
            "Prices per million tokens: "
            + ", ".join(f"{model} ${price.input:g} in, ${price.output:g} out" for model, price in plan.prices.items())
        )
    return lines


def _security(plan: ir.Plan) -> list[str]:
    """An Agentfile's SECURITY mode, in what it changes about the prompts a run sends."""
    if plan.security == "paranoid":
        return [
            "Security: paranoid — every agent and provider output is untrusted data, fenced off where a prompt quotes it"
        ]
    if plan.security == "research":
        scope = json.dumps(plan.research_scope, ensure_ascii=False)
        return [f"Security: research, scope {scope} — it goes into every system prompt"]
    return []


def _budget(budget: ir.Budget) -> str:
    then = "pauses for a person to raise it" if budget.on_exceeded == "pause" else "fails"
    return f"{limits_text(budget)}; over it the run {then}"


def _inputs(plan: ir.Plan) -> list[str]:
    if not plan.params:
        return ["  (none)"]
    lines = []
    for p in plan.params.values():
        need = "required" if p.required else f"default {_value(p.default if p.default is not None else '')}"
        lines.append(f"  {p.name} ({p.type}, {need})" + (f": {p.description}" if p.description else ""))
    return lines


def _state(plan: ir.Plan) -> list[str]:
    """A behaviour tree's blackboard as a run starts with it, and how a running step is asked again."""
    if not plan.traits.blackboard:
        return []
    values = [f"  $VAR.{name} = {_json(value)}" for name, value in plan.memory.items()]
    values += [f"  $CONST.{name} = {_json(value)} (read-only)" for name, value in plan.constants.items()]
    pace = plan.running
    asked = (
        f"  a step still running is asked again after {duration(pace.wait_s)}, the wait doubling up to "
        f"{duration(pace.max_wait_s)}; {pace.max_asks} asks at most"
    )
    return ["", "State"] + (values or ["  (none declared)"]) + [asked]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _agents(plan: ir.Plan) -> list[str]:
    declared = plan.agents
    if declared:
        return [line for aid, a in declared.items() for line in _agent_lines(aid, a)]
    users: dict[str, list[str]] = {}
    for node in plan.walk():
        judge = isinstance(node, ir.Verifier) and node.mode == "llm_judge"
        if isinstance(node, (ir.Task, ir.Provider, ir.Supervisor)) or judge:
            users.setdefault(getattr(node, "agent", None) or "(provider)", []).append(node.id)
    for node in plan.walk():
        if node.compensation is not None:
            users.setdefault(getattr(node.compensation, "agent", None) or "(provider)", []).append(node.compensation.id)
    return [f"  {agent}: runs {', '.join(ids)}" for agent, ids in users.items()]


def _agent_lines(aid: str, agent: ir.AgentInfo) -> list[str]:
    settings = [f"{agent.uri} unless --agent {aid}=URI says otherwise"] if agent.uri else []
    settings += [f"temperature {agent.temperature:g}"] if agent.temperature is not None else []
    line = (
        f"  {aid}: {agent.name or aid}"
        + (f" — {agent.role}" if agent.role else "")
        + (f" (tools: {', '.join(agent.tools)})" if agent.tools else "")
        + (f" ({'; '.join(settings)})" if settings else "")
    )
    return [line] + ([f"    system: {first_line(agent.system)}"] if agent.system else [])


def _supervisor(plan: ir.Plan) -> list[str]:
    """The agent that judges supervised goals: one only a run's --agent flags (or agentrun.yaml) name."""
    goals = [leaf.id for leaf in plan.leaves() if isinstance(leaf, ir.Task) and leaf.supervision != "none"]
    if not goals:
        return []
    return [
        f"  {SUPERVISOR}: judges {', '.join(goals)} when --agent {SUPERVISOR}=URI names it; "
        "else each goal's own agent does"
    ]


class Describer:
    """The walk `inspect` and `dry-run` share: numbering, indentation and the notes every kind has
    (gate, undo, budget). What a step of each kind says comes from its view (`client.views`)."""

    def __init__(self, plan: ir.Plan):
        self.plan = plan
        self.agents = plan.agents
        self.groups = scopes(plan)

    def step(self, node: ir.Node | None, tag: str, pad: str, gets: Any, lead: str = "") -> list[str]:
        """A step numbered `tag` and the steps under it; `gets` is what the enclosing step hands down
        (words here, template values in a dry run), `lead` what goes before it ("if x → ")."""
        head, indent = f"{pad}{tag}. {lead}", pad + " " * (len(tag) + 2)
        if node is None or is_empty(node):
            return [head + "nothing runs"]
        at = Entry(tag, head + (f"{node.id} — " if node.step else ""), indent)
        return with_notes(self.lines(self.view(node), node, at, gets), self.notes(node), indent)

    def view(self, node: ir.Node) -> View[Any]:
        return view_of(node, self.plan.traits)

    def lines(self, view: View[Any], node: ir.Node, at: Entry, gets: Any) -> list[str]:
        return view.describe(node, at, gets, self)

    def substeps(
        self, at: Entry, children: Iterable[ir.Node | None], gets: Any, leads: list[str] | None = None
    ) -> list[str]:
        """The steps under a step, numbered after it (2a, 2b, …), each after its lead, if any."""
        lines = []
        for i, child in enumerate(children):
            lines += self.step(child, sub_tag(at.tag, i), at.indent, gets, leads[i] if leads else "")
        return lines

    def who(self, node: ir.Node) -> str:
        """How a step names another (a loop's checker, a map's body, a fallback)."""
        return self.view(node).who(node, self.agents)

    def details(self, node: ir.Node) -> list[str]:
        return self.view(node).details(node, self.who)

    def notes(self, node: ir.NodeBase) -> list[str]:
        """Gates, compensation and budget of a node, and of the task groups it starts."""
        found = [
            f"{group.label} and its subtasks: {note}"
            for group in self.groups.get(node.id, [])
            for note in self._notes(group)
        ]
        return found + self._notes(node)

    def _notes(self, node: ir.NodeBase) -> list[str]:
        found = []
        if node.gate is not None:
            asks = "needs approval" if node.gate.approval else "asks a person first"
            found.append(f"{asks} (gate {node.gate.id}): {question(node.gate, self.asked(node.gate))}")
        comp = node.compensation
        if comp is not None:
            prompt = f", prompt: {first_line(comp.prompt)}" if isinstance(comp, ir.Task) else ""
            found.append(f"undo: {undo_who(comp, self.agents)}{prompt}")
        if node.budget is not None:
            found.append(f"budget: {_budget(node.budget)}")
        return found

    def asked(self, gate: ir.Human) -> str | None:
        """A gate's question as shown: as written (inspect); a dry run fills it in."""
        return None


def with_notes(lines: list[str], notes: list[str], pad: str) -> list[str]:
    """A step's lines with its notes under its first line."""
    return lines[:1] + [pad + note for note in notes] + lines[1:]


def _value(value: Any) -> str:
    return '""' if value == "" else to_text(value)


# ---- dry run ---------------------------------------------------------------------------------


def dry_run_text(plan: ir.Plan, params: dict[str, Any], agents: tuple[str, dict[str, str]]) -> str:
    """The run's inputs, then every agent call in execution order with what it would be sent."""
    dry = DryRun(plan, params, agents)
    lines = _header(plan) + ["", "Inputs"] + _bound(plan, params) + _state(plan) + ["", "Plan"]
    for i, node in enumerate(top_steps(plan)):
        lines += dry.step(node, str(i + 1), "  ", {})
        if node.step:
            dry.done.append(node.id)
    dry.problems += [
        f"agent '{aid}' has no URI: pass --agent {aid}=URI"
        for aid in sorted(agent_ids(plan))
        if aid not in dry.uris and not dry.default_uri
    ]
    if dry.problems:
        lines += ["", "Problems a run would meet"] + [f"  {p}" for p in dry.problems]
    if _PLACEHOLDER.search("\n".join(lines)):
        lines += ["", "<…> stands for a value only the run has: an output, a person's answer, the run id."]
    lines += ["", "No agent was called."]
    return "\n".join(lines)


# The placeholders DryRun fills a template with for what only a run has.
_PLACEHOLDER = re.compile(r"<(answer to \S+|outputs? of \S|run id|no earlier outputs|\S+ from \S+)>")


def _bound(plan: ir.Plan, values: dict[str, Any]) -> list[str]:
    lines = []
    for name, value in values.items():
        param = plan.params.get(name)
        shown = labelled("  ", f"{name} = ", _value(value), INPUT_LINES)
        if param is None:
            shown[-1] += " (not declared by the spec)"
        elif not param.required and value == (param.default if param.default is not None else ""):
            shown[-1] += " (default)"
        lines += shown
    return lines or ["  (none)"]


def _outputs(plan: ir.Plan) -> dict[str, Shown]:
    """The memory keys tasks with named outputs (an Agentfile's `-> a, b`) write, as placeholders."""
    return {
        key: Shown(f"<{key} from {leaf.id}>")
        for leaf in plan.leaves()
        if isinstance(leaf, ir.Task)
        for key in leaf.outputs
    }


class DryRun(Describer):
    """The walk of `inspect` in a run's terms: each agent call with its prompt filled in as far as
    the run's inputs allow."""

    def __init__(self, plan: ir.Plan, values: dict[str, Any], agents: tuple[str, dict[str, str]]):
        super().__init__(plan)
        self.default_uri, self.uris = agents
        steps = [n for n in plan.walk() if n.step]
        shown = {n.id: Shown(f"<output of {n.id}>") for n in steps}
        # What templates see at run time, with placeholders for what only a run has.
        self.context = template_values(
            workdir=plan.spec_dir,
            run_id="<run id>",
            agent_type=agent_type(self.default_uri),
            params=values,
            memory={**plan.memory, **_outputs(plan), **{n.store_as: shown[n.id] for n in steps if n.store_as}},
            steps={sid: {"output": s, "outputs": s} for sid, s in shown.items()},
            human={g.id: Shown(f"<answer to {g.id}>") for g in plan.gates()},
        )
        # A behaviour tree's steps show the values of the $CONST names they read, as a run does.
        self.context[CONSTANTS] = plan.constants
        self.done: list[str] = []  # top-level steps before the current one, for "all prior context"
        self.problems: list[str] = []

    def lines(self, view: View[Any], node: ir.Node, at: Entry, gets: Any) -> list[str]:
        return view.dry_run(node, at, gets, self)

    def values(self, added: Scope) -> dict[str, Any]:
        """What a template of a step sees: the run's values and those its enclosing steps add."""
        return {**self.context, **added}

    def all_prior(self) -> Shown:
        """What "all prior context" stands for at this point of the run."""
        return Shown(f"<outputs of {', '.join(self.done)}>" if self.done else "<no earlier outputs>")

    def problem(self, text: str) -> None:
        """Something a run would meet, listed at the end of the dry run."""
        self.problems.append(text)

    def asked(self, gate: ir.Human) -> str | None:
        return self.fill(gate.prompt, {})

    def fill(self, template: str, added: Scope) -> str:
        """A template filled in as far as a dry run can, else as written without its braces."""
        try:
            return render(template, self.values(added), self.plan.undefined)
        except (TemplateError, TypeError):
            return bare(template)
