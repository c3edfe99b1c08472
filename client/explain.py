"""`inspect` and `dry-run`: a spec explained step by step, and the agent calls a run would make.

Both work from the compiled Plan alone: nothing connects to Temporal and no agent is called.
Steps are numbered as in the graph (`client.graph`), so 2a in a listing is 2a in the figure.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from jinja2 import TemplateError
from rich.console import Console

from client.graph import (
    agent_name,
    bare,
    draw,
    first_line,
    is_empty,
    scopes,
    sub_tag,
    switch_branches,
    top_steps,
    undo_who,
)
from client.start import load_run
from spec import expressions, ir
from spec.check import agent_ids, check
from spec.drivers import agent_type
from spec.load import load
from spec.render import render, to_text
from spec.scope import template_values
from workflows import prompt
from workflows.budgets import limits_text

PREVIEW_LINES = 6  # of each prompt and agent input a dry run shows
INPUT_LINES = 20  # of each run input


# ---- the commands ----------------------------------------------------------------------------


def inspect_command(path: str, console: Console) -> int:
    plan = load(path)
    check(plan)
    _print(console, inspect_text(plan))
    return 0


def dry_run_command(args: argparse.Namespace, console: Console) -> int:
    """What `start` would run with these -p and --agent flags; SpecError as `start` raises it."""
    plan, values, default, per_agent = load_run(args)
    _print(console, dry_run_text(plan, values, (default, per_agent)))
    return 0


def _print(console: Console, text: str) -> None:
    # Prompts are the user's text: no markup, emoji codes or highlighting may change them.
    console.print(text, markup=False, emoji=False, highlight=False)


# ---- inspect ---------------------------------------------------------------------------------


def inspect_text(plan: ir.Plan) -> str:
    described = _Describer(plan)
    lines = _header(plan) + ["", "Inputs"] + _inputs(plan) + ["", "Steps"]
    for i, node in enumerate(top_steps(plan)):
        lines += described.step(node, str(i + 1), "  ", "nothing but its prompt")
    lines += ["", "Graph"] + ["  " + line if line else "" for line in draw(plan).splitlines()]
    lines += ["", "Agents"] + _agents(plan)
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
    if plan.prices:
        lines.append(
            "Prices per million tokens: "
            + ", ".join(f"{model} ${price.input:g} in, ${price.output:g} out" for model, price in plan.prices.items())
        )
    return lines


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


def _agents(plan: ir.Plan) -> list[str]:
    declared = plan.agents
    if declared:
        return [
            f"  {aid}: {a.name or aid}"
            + (f" — {a.role}" if a.role else "")
            + (f" (tools: {', '.join(a.tools)})" if a.tools else "")
            for aid, a in declared.items()
        ]
    users: dict[str, list[str]] = {}
    for leaf in plan.leaves():
        if not isinstance(leaf, ir.Human):
            users.setdefault(getattr(leaf, "agent", None) or "(provider)", []).append(leaf.id)
    for node in plan.walk():
        if node.compensation is not None:
            users.setdefault(getattr(node.compensation, "agent", None) or "(provider)", []).append(node.compensation.id)
    return [f"  {agent}: runs {', '.join(ids)}" for agent, ids in users.items()]


class _Describer:
    """Each step in words: who runs, what it gets, where its output goes, and its policies."""

    def __init__(self, plan: ir.Plan):
        self.agents = plan.agents
        self.groups = scopes(plan)

    def step(self, node: ir.NodeBase | None, tag: str, pad: str, gets: Any, lead: str = "") -> list[str]:
        lines = self._step(node, tag, pad, gets, lead)
        return with_notes(lines, self.notes(node), pad + " " * (len(tag) + 2))

    def notes(self, node: ir.NodeBase | None) -> list[str]:
        """Gates, compensation and budget of a node, and of the task groups it starts."""
        if is_empty(node):
            return []
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
            found.append(f"{asks} (gate {node.gate.id}): {question(node.gate)}")
        comp = node.compensation
        if comp is not None:
            prompt = f", prompt: {first_line(comp.prompt)}" if isinstance(comp, ir.Task) else ""
            found.append(f"undo: {undo_who(comp, self.agents)}{prompt}")
        if node.budget is not None:
            found.append(f"budget: {_budget(node.budget)}")
        return found

    def _step(self, node: ir.NodeBase | None, tag: str, pad: str, gets: Any, lead: str = "") -> list[str]:
        """The walk `inspect` and `dry-run` share; `gets` is what the enclosing step hands down
        (words here, template values in a dry run)."""
        head = f"{pad}{tag}. {lead}"
        more = pad + " " * (len(tag) + 2)
        if is_empty(node):
            return [head + "nothing runs"]
        head += f"{node.id} — " if node.step else ""
        if isinstance(node, ir.Loop):
            return self._loop(node, tag, head, more, gets)
        if isinstance(node, ir.Map):
            return self._map(node, tag, head, more, gets)
        if isinstance(node, ir.Switch):
            branches = [(branch, f"{_if(cond)} → ") for branch, cond in switch_branches(node)]
        elif isinstance(node, (ir.Parallel, ir.Sequence, ir.Selector)):
            branches = [(child, "") for child in node.children]
        else:
            return self._leaf(node, tag, head, more, gets)
        lines = [head + self._group(node)]
        for i, (child, child_lead) in enumerate(branches):
            lines += self.step(child, sub_tag(tag, i), more, gets, child_lead)
        return lines

    def _group(self, node: ir.NodeBase) -> str:
        """What a step that holds others (parallel, conditional, in order, first that succeeds) does."""
        if isinstance(node, ir.Parallel):
            keys = ", ".join(c.output_key or c.id for c in node.children)
            return (
                f"parallel: {len(node.children)} agents at once, {wait_text(node.wait)}; "
                f"outputs {keys}{_stored(node)}{_step_timeout(node)}"
            )
        if isinstance(node, ir.Switch):
            return "conditional: the first branch whose condition holds runs" + _step_timeout(node)
        return "in order:" if isinstance(node, ir.Sequence) else "the first that succeeds:"

    def who(self, node: ir.NodeBase) -> str:
        if isinstance(node, ir.Provider):
            return f"{node.label}: provider {node.call.provider}.{node.call.method}"
        return f"{agent_name(node, self.agents)} ({getattr(node, 'agent', node.id)})"

    def _leaf(self, node: ir.NodeBase, tag: str, head: str, more: str, gets: str) -> list[str]:
        return [head + self._runs(node, gets)] + [more + line for line in self.details(node)]

    def _runs(self, node: ir.NodeBase, gets: str) -> str:
        if isinstance(node, ir.Human):
            return ("" if node.step else f"{node.label}: ") + "human: " + question(node) + _stored(node)
        if not isinstance(node, ir.Task) or node.protocol != "plain":
            return self.who(node)
        text = f"{self.who(node)} gets {_gets(node, gets)}"
        if node.output_key:
            text += f"; output as outputs.{node.output_key}"
        if node.step:
            text = "sequential: " + text + _stored(node, node.output_format)
        return text

    def _loop(self, node: ir.Loop, tag: str, head: str, more: str, gets: str) -> list[str]:
        if node.validator:
            feedback = bare(node.feedback) if node.feedback else "the check's feedback field"
            text = (
                f"loop: {self.who(node.body)} produces, {self.who(node.validator)} checks, until the check "
                f"passes (its reply has passed: true), at most {node.max_iterations} iterations; "
                f"feedback from {feedback}"
            )
        else:
            text = f"loop: {self.who(node.body)} runs until {_until(node)}, at most {node.max_iterations} iterations"
        lines = [head + text + _stored(node, getattr(node.body, "output_format", None)) + _step_timeout(node)]
        lines += self.step(node.body, sub_tag(tag, 0), more, gets)
        if node.validator:
            lines += self.step(node.validator, sub_tag(tag, 1), more, f"the output of {sub_tag(tag, 0)}")
        return lines

    def _map(self, node: ir.Map, tag: str, head: str, more: str, gets: str) -> list[str]:
        body_tag = sub_tag(tag, 0) if node.reduce else tag
        last = node.reduce or node.body
        text = (
            f"map: {self.who(node.body)} runs once per item of {bare(node.over)}, at most {node.concurrency} at a time"
        )
        if node.reduce:
            text += f"; {self.who(node.reduce)} combines the results"
        lines = [head + text + _stored(node, getattr(last, "output_format", None)) + _step_timeout(node)]
        if node.reduce:
            lines += self.step(node.body, body_tag, more, "one item")
            lines += self.step(node.reduce, sub_tag(tag, 1), more, f"the list of {body_tag} outputs")
        else:
            lines += [more + line for line in self.details(node.body)]
        return lines

    def details(self, node: ir.NodeBase) -> list[str]:
        if isinstance(node, ir.Human):
            return []  # its timeout is part of the question
        policy = policy_text(node, self.who)
        return ([policy] if policy else []) + checks(node)


def with_notes(lines: list[str], notes: list[str], pad: str) -> list[str]:
    """A step's lines with its notes under its first line."""
    return lines[:1] + [pad + note for note in notes] + lines[1:]


def question(gate: ir.Human) -> str:
    """What a person is asked, and what happens without an answer or on a rejection."""
    text = first_line(gate.prompt)
    if gate.choices and not gate.approval:
        text += f" [{', '.join(gate.choices)}]"
    if gate.timeout_s:
        text += "; " + waits(gate)
    if gate.approval:
        text += f"; on reject: {_ON_REJECT[gate.on_reject]}"
    return text


def waits(gate: ir.Human) -> str:
    then = _ON_TIMEOUT.get(gate.on_timeout) or f"takes '{gate.on_timeout}'"
    return f"waits at most {duration(gate.timeout_s or 0)}, then {then}"


_ON_TIMEOUT = {"fail": "the run fails", "continue": "goes on without an answer"}
_ON_REJECT = {"fail": "the run fails", "skip": "skipped, the run goes on", "continue": "the run goes on"}


def checks(node: ir.NodeBase) -> list[str]:
    """What a task's output must satisfy, and how a task tree's task decides it is done."""
    if not isinstance(node, ir.Task):
        return []
    lines = ["schema: " + _compact(node.output_schema)] if node.output_schema else []
    lines += [f"rule: {rule}" for rule in node.rules]
    if node.loop_until:
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


def _gets(node: ir.Task, otherwise: str) -> str:
    if node.input is None:
        return otherwise
    if node.input == ir.ALL_PRIOR:
        return "all prior context (every earlier step's output)"
    return node.input


def _stored(node: ir.NodeBase, fmt: str | None = None) -> str:
    """Where later steps find a step's output."""
    if not node.step:
        return ""
    where = f"stored as {node.store_as}" if node.store_as else f"in steps.{node.id}.output"
    return f"; output {where}" + (f" ({fmt})" if fmt else "")


def _until(node: ir.Loop) -> str:
    return f"{bare(node.until)} holds" if node.until else "it passes"


def _step_timeout(node: ir.NodeBase) -> str:
    return f"; step timeout {duration(node.timeout_s)}" if node.timeout_s else ""


def _if(cond: str) -> str:
    return "else" if cond == "else" else ("" if cond.startswith("else if ") else "if ") + cond


def wait_text(wait: str | int) -> str:
    if wait == "all":
        return "waits for all"
    if wait == "any":
        return "takes the first to finish and cancels the rest"
    return f"takes the first {wait} to finish and cancels the rest"


def policy_text(node: ir.NodeBase, who) -> str:
    """Retries, failure policy and timeout, where they differ from a single try that stops the run."""
    parts = []
    if node.retry.attempts > 1:
        backoff = f", {node.retry.backoff} backoff" if node.retry.backoff != "none" else ""
        parts.append(f"up to {node.retry.attempts} attempts{backoff}")
    if node.on_failure == "skip":
        parts.append("on failure: skipped, the run goes on")
    elif node.on_failure == "fallback" and node.fallback is not None:
        parts.append(f"on failure: falls back to {who(node.fallback)}")
    elif node.retry.attempts > 1:
        parts.append("on failure: the run stops")
    if node.timeout_s:
        parts.append(f"timeout {duration(node.timeout_s)}")
    return "; ".join(parts)


def duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    secs += seconds - int(seconds)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs:g}s" if secs else "")
    return text or "0s"


def _compact(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: Any) -> str:
    return '""' if value == "" else to_text(value)


# ---- dry run ---------------------------------------------------------------------------------


class _Shown(str):
    """A value a dry run does not have, such as a step's output. It is its label as text, so it
    renders and serializes as one, and any field read from it is a label too (`<output of x>.score`):
    templates fill in without an agent having run."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_"):
            return super().__getattribute__(name)
        return _Shown(f"{self}.{name}")

    def __getitem__(self, key: Any) -> _Shown:
        return _Shown(f"{self}[{key}]" if isinstance(key, int) else f"{self}.{key}")

    def __iter__(self):
        return iter([_Shown(f"{self}[0]")])


def dry_run_text(plan: ir.Plan, params: dict[str, Any], agents: tuple[str, dict[str, str]]) -> str:
    """The run's inputs, then every agent call in execution order with what it would be sent."""
    dry = _DryRun(plan, params, agents)
    lines = _header(plan) + ["", "Inputs"] + _bound(plan, params) + ["", "Plan"]
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
    lines += ["", "No agent was called."]
    return "\n".join(lines)


def _bound(plan: ir.Plan, values: dict[str, Any]) -> list[str]:
    lines = []
    for name, value in values.items():
        param = plan.params.get(name)
        shown = _block("  ", f"{name} = ", _value(value), INPUT_LINES)
        if param is None:
            shown[-1] += " (not declared by the spec)"
        elif not param.required and value == (param.default if param.default is not None else ""):
            shown[-1] += " (default)"
        lines += shown
    return lines or ["  (none)"]


class _DryRun(_Describer):
    """The walk of `inspect` in a run's terms: each agent call with its prompt filled in as far as
    the run's inputs allow."""

    def __init__(self, plan: ir.Plan, values: dict[str, Any], agents: tuple[str, dict[str, str]]):
        super().__init__(plan)
        self.default_uri, self.uris = agents
        steps = [n for n in plan.walk() if n.step]
        shown = {n.id: _Shown(f"<output of {n.id}>") for n in steps}
        # What templates see at run time, with placeholders for what only a run has.
        self.context = template_values(
            workdir=plan.spec_dir,
            run_id="<run id>",
            agent_type=agent_type(self.default_uri),
            params=values,
            memory={n.store_as: shown[n.id] for n in steps if n.store_as},
            steps={sid: {"output": s, "outputs": s} for sid, s in shown.items()},
            human={g.id: _Shown(f"<answer to {g.id}>") for g in plan.gates()},
        )
        self.done: list[str] = []  # top-level steps before the current one, for "all prior context"
        self.problems: list[str] = []

    def _group(self, node: ir.NodeBase) -> str:
        if isinstance(node, ir.Parallel):
            return f"parallel, {wait_text(node.wait)}" + _stored(node) + _step_timeout(node)
        if isinstance(node, ir.Switch):
            return "conditional, decided at run time" + _step_timeout(node)
        return "in order" if isinstance(node, ir.Sequence) else "the first that succeeds"

    def _loop(self, node: ir.Loop, tag: str, head: str, more: str, scope: dict[str, Any]) -> list[str]:
        until = f"{agent_name(node.validator, self.agents)} passes it" if node.validator else _until(node)
        lines = [
            head
            + f"loop, at most {node.max_iterations} iterations, until {until}"
            + _stored(node)
            + _step_timeout(node)
        ]
        body_tag, judge_tag = sub_tag(tag, 0), sub_tag(tag, 1)
        # The first iteration, as workflows.interpreter runs it: no feedback yet.
        lines += self.step(node.body, body_tag, more, {**scope, "feedback": None, "iteration": 1})
        if node.validator:
            feedback = self._fill(node.feedback, scope) if node.feedback else "the check's feedback field"
            lines.append(f"{more}{' ' * (len(body_tag) + 2)}from iteration 2 it also gets the feedback: {feedback}")
            checked = {**scope, "input": _Shown(f"<output of {node.body.id}>")}
            lines += self.step(node.validator, judge_tag, more, checked)
            lines.append(f"{more}{' ' * (len(judge_tag) + 2)}the loop ends when its reply has passed: true")
        return lines

    def _map(self, node: ir.Map, tag: str, head: str, more: str, scope: dict[str, Any]) -> list[str]:
        over = self._fill(node.over, scope)
        lines = [head + f"map over {over}, at most {node.concurrency} at a time" + _stored(node) + _step_timeout(node)]
        item = _Shown(f"<one item of {over}>")
        body_tag = sub_tag(tag, 0) if node.reduce else tag
        lines += self.step(
            node.body,
            body_tag,
            more,
            {**scope, "item": item, "index": _Shown("<its index>"), "input": item},
            "once per item: ",
        )
        if node.reduce:
            results = _Shown(f"<the list of {node.body.id} outputs>")
            lines += self.step(node.reduce, sub_tag(tag, 1), more, {**scope, "input": results})
        return lines

    def _leaf(self, node: ir.NodeBase, tag: str, head: str, more: str, scope: dict[str, Any]) -> list[str]:
        if isinstance(node, ir.Human):
            return self._ask(node, tag, head, more, scope)
        if isinstance(node, ir.Provider):
            return [head + self.who(node) + " (no agent)"] + [more + line for line in self.details(node)]
        uri = self.uris.get(node.agent, self.default_uri)
        lines = [head + f"{self.who(node)} via {uri}"]
        context = {**self.context, **scope}
        try:
            context["input"] = self._input(node, context)
            text = prompt.build_plain(node, context) if node.protocol == "plain" else prompt.build(node, context, None)
        except (TemplateError, expressions.ExpressionError, TypeError) as exc:
            self.problems.append(f"{tag}: cannot fill in its prompt: {exc}")
            return lines + [f"{more}cannot fill in its prompt: {exc}"]
        if node.protocol == "plain":
            lines += _block(more, "input: ", "(none)" if context["input"] is None else to_text(context["input"]))
        lines += _preview(more, text)
        lines.append(f"{more}expected output: {_expected(node)}")
        lines += [f"{more}  {line}" for line in checks(node)]
        policy = policy_text(node, self.who)
        return lines + ([f"{more}{policy}"] if policy else [])

    def _ask(self, node: ir.Human, tag: str, head: str, more: str, scope: dict[str, Any]) -> list[str]:
        lines = [head + ("" if node.step else f"{node.label}: ") + f"asks a person (gate {node.id}; no agent)"]
        try:
            lines += _preview(more, render(node.prompt, {**self.context, **scope}))
        except (TemplateError, TypeError) as exc:
            self.problems.append(f"{tag}: cannot fill in its question: {exc}")
            lines.append(f"{more}cannot fill in its question: {exc}")
        answer = f"one of {', '.join(node.choices)}" if node.choices else "any text"
        lines.append(f"{more}expected answer: {answer}" + (f", {_kept(node)}" if node.step else ""))
        return lines + ([f"{more}{waits(node)}"] if node.timeout_s else [])

    def _input(self, node: ir.Task, context: dict[str, Any]) -> Any:
        """The value the step gets, read as the engine reads it."""
        all_prior = _Shown(f"<outputs of {', '.join(self.done)}>" if self.done else "<no earlier outputs>")
        return expressions.step_input(node.input, context, all_prior)

    def _fill(self, template: str, scope: dict[str, Any]) -> str:
        try:
            return render(template, {**self.context, **scope})
        except (TemplateError, TypeError):
            return bare(template)


def _expected(node: ir.Task) -> str:
    if node.protocol == "status":
        return "a reply ending with its COMPLETION_STATUS"
    parts = [node.output_format]
    if node.output_key:
        parts.append(f"as outputs.{node.output_key}")
    if node.step:
        parts.append(_kept(node))
    return ", ".join(parts)


def _kept(node: ir.NodeBase) -> str:
    return f"stored as {node.store_as}" if node.store_as else f"as steps.{node.id}.output"


def _preview(pad: str, text: str) -> list[str]:
    lines = text.strip("\n").splitlines()
    shown = [f"{pad}prompt ({len(lines)} line{'s' if len(lines) != 1 else ''}):"]
    shown += [f"{pad}  | {line}".rstrip() for line in lines[:PREVIEW_LINES]]
    if len(lines) > PREVIEW_LINES:
        shown.append(f"{pad}  | … {len(lines) - PREVIEW_LINES} more lines")
    return shown


def _block(pad: str, label: str, text: str, limit: int = PREVIEW_LINES) -> list[str]:
    """`label` then text, continued under it, cut after `limit` lines."""
    lines = text.splitlines() or [""]
    out = [f"{pad}{label}{lines[0]}"] + [f"{pad}{' ' * len(label)}{line}" for line in lines[1:limit]]
    if len(lines) > limit:
        out.append(f"{pad}{' ' * len(label)}… {len(lines) - limit} more lines")
    return [line.rstrip() for line in out]
