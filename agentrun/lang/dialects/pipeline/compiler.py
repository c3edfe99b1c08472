"""Compiling a pipeline to the IR: `compile`, which the registry calls (the package
says what the language is and which files are in it)."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator

from agentrun.lang import coding_tools, grants, ir
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.dialects.common_keys import (
    COMPENSATION_ATTEMPTS,
    VALUE_HINTS,
    Choices,
    RawApproval,
    RawBudget,
    Strict,
    approval_gate,
    approval_shorthand,
    budget_of,
    compensation_task,
    on_timeout_problem,
    text_shorthand,
)
from agentrun.lang.dialects.pipeline import NAME
from agentrun.lang.dialects.pipeline import refs as pipeline_refs
from agentrun.lang.errors import SpecError, did_you_mean
from agentrun.lang.mcp_servers import McpServer, read_servers
from agentrun.lang.params import coerce
from agentrun.lang.schema_errors import problems_from
from agentrun.lang.tool_names import builtin_name
from agentrun.lang.yamlpos import PosDict, load_mapping, position

StepType = Literal["sequential", "parallel", "conditional", "loop", "map", "human"]
_ON_FAILURE = re.compile(r"^(skip|abort|fallback:\s*[\w-]+)$")
# The seed's backoff: linear waits 5 s × attempt, exponential 2^attempt s.
_BACKOFF_DELAY = {"none": 0.0, "linear": 5.0, "exponential": 1.0}


class RawInput(Strict):
    name: str
    type: Literal["string", "number", "boolean", "json", "file_path"] = "string"
    required: bool = False
    default: Any = None
    description: str = ""


class RawRetry(Strict):
    max_attempts: int = Field(default=1, ge=1)
    backoff: Literal["none", "linear", "exponential"] = "none"
    on_failure: str = "abort"

    @field_validator("on_failure")
    @classmethod
    def _policy(cls, value: str) -> str:
        if not _ON_FAILURE.match(value.strip()):
            raise ValueError("must be skip, abort or fallback:<agent_id>")
        return value.strip()

    @property
    def final_policy(self) -> Literal["abort", "skip"]:
        """What happens after the last attempt when no fallback agent stands in."""
        return "skip" if self.on_failure == "skip" else "abort"

    @property
    def fallback_agent(self) -> str | None:
        """The agent of `fallback:<agent_id>`, else None."""
        policy, _, agent = self.on_failure.partition(":")
        return agent.strip() if policy == "fallback" else None


class RawValidation(Strict):
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    rules: list[str] = []


class RawAgent(Strict):
    name: str = ""
    role: str = ""
    prompt: str
    tools: list[str] = []
    max_tool_calls: int = Field(default=grants.DEFAULT_MAX_CALLS, ge=1)
    max_context_tokens: int | None = Field(default=None, ge=1000)
    timeout: str | float | None = None
    retry: RawRetry = RawRetry()
    validation: RawValidation | None = None


class RawBranch(Strict):
    agent: str
    input: str | None = None
    output_key: str | None = None


class RawCondition(Strict):
    eval: str
    true: str | None = None
    false: str | None = None


class RawLoop(Strict):
    agent: str
    validator: str
    max_iterations: int = Field(default=3, ge=1)
    feedback_path: str | None = None


class RawMap(Strict):
    over: str
    agent: str
    reduce: str | None = None
    concurrency: int = Field(default=20, ge=1)
    batch: int = Field(default=ir.MAP_BATCH, ge=1, le=ir.MAX_MAP_BATCH)


class RawOutput(Strict):
    store_as: str | None = None
    format: ir.OutputFormat = "text"


class RawCompensate(Strict):
    agent: str | None = None  # default: the step's own agent (sequential steps only)
    prompt: str


class RawStep(Strict):
    id: str
    agent: str | None = None
    type: StepType = "sequential"
    input: str | None = None
    parallel: list[RawBranch] | None = None
    wait: Literal["all", "any"] | int = "all"
    condition: RawCondition | None = None
    loop: RawLoop | None = None
    map: RawMap | None = None
    output: RawOutput = RawOutput()
    timeout: str | float | None = None
    prompt: str | None = None
    choices: Choices | None = None
    on_timeout: str | None = None
    approval: Annotated[RawApproval | None, BeforeValidator(approval_shorthand)] = None
    compensate: Annotated[RawCompensate | None, text_shorthand("prompt")] = None
    budget: RawBudget | None = None

    @field_validator("wait", mode="before")
    @classmethod
    def _wait(cls, value: Any) -> str | int:
        # One check instead of a union, so `wait: some` is one error, and `wait: yes` (a YAML
        # boolean) is not read as 1.
        if value in ("all", "any"):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        raise ValueError(f"'{value}' is not a wait policy")


class RawWorkflow(Strict):
    name: str
    description: str = ""
    version: str = ""
    timeout: str | float | None = None
    inputs: list[RawInput] = []
    agents: dict[str, RawAgent]
    steps: list[RawStep] = Field(min_length=1)
    goal: str | None = None
    constraints: list[str] = []
    budget: RawBudget | None = None
    prices: dict[str, ir.Price] = {}
    policy: str | None = None  # a policy.toml every tool call answers to, beside the spec or a path
    mcp_servers: dict[str, Any] | None = None  # MCP servers its agents' mcp__<server> tools reach


class RawSpec(Strict):
    workflow: RawWorkflow


def compile_data(data: PosDict, file: str) -> ir.Plan:
    _booleans_as_branch_names(data)
    try:
        raw = RawSpec.model_validate(data).workflow
    except ValidationError as exc:
        raise SpecError(problems_from(exc, data, file, RawSpec, _VALUE_HINTS)) from None
    builder = _Builder(file, data, raw)
    plan = builder.build()
    if builder.problems:
        raise SpecError(builder.problems)
    assert plan is not None  # build gives no plan only when it has recorded a problem
    return plan


# Hints for values a validator refused, by the key holding the value.
_VALUE_HINTS = {
    **VALUE_HINTS,
    "on_failure": "retries are set with max_attempts: N (and backoff:); on_failure says what happens after "
    "the last attempt: skip, abort or fallback:<agent_id>",
    "wait": "use all, any, or how many agents must finish (a number)",
}


def _booleans_as_branch_names(data: PosDict) -> None:
    """YAML reads the keys `true:` and `false:` as booleans; a condition means them as names."""
    workflow = data.get("workflow")
    steps = workflow.get("steps") if isinstance(workflow, dict) else None
    for step in steps if isinstance(steps, list) else []:  # any other steps: is refused with its line later
        cond = step.get("condition") if isinstance(step, dict) else None
        if isinstance(cond, PosDict):
            for flag in (True, False):
                if flag in cond:
                    name = str(flag).lower()
                    cond[name] = cond.pop(flag)
                    cond.key_pos[name] = cond.key_pos.pop(flag)
                    cond.text_line[name] = cond.text_line.pop(flag)


_DURATION_HINT = "write a duration like '90s', '5m' or '2h'"


class _Builder(Builder):
    def __init__(self, file: str, data: PosDict, raw: RawWorkflow):
        super().__init__(file, data)
        self.raw = raw
        self.step_index = {step.id: i for i, step in enumerate(raw.steps)}

    def build(self) -> ir.Plan | None:
        self._check_names()
        if len(self.step_index) < len(self.raw.steps):
            return None  # with two steps of one id, no reference is clear
        graph = pipeline_refs.StepGraph(self.file, self.data, self.raw)
        self.problems += graph.problems
        if self.problems:
            return None
        nodes = {step.id: self._step(step) for step in self.raw.steps}
        attached: set[str] = set()
        for step in self.raw.steps:
            if step.type == "conditional" and step.id not in attached:
                self._attach_branches(nodes, step, attached)
        order = [nodes[step_id] for step_id in graph.order]
        path = os.path.abspath(self.file)
        return ir.Plan(
            name=self.raw.name,
            description=self.raw.description,
            dialect=NAME,
            source=path,
            spec_dir=os.path.dirname(path),
            params=self._params(),
            lifecycle="refresh",
            root=ir.Sequence(id=f"workflow:{self.raw.name}", title=self.raw.name, children=order),
            timeout_s=self.duration(self.raw.timeout, ("workflow", "timeout"), _DURATION_HINT),
            goal=self.raw.goal or self.raw.description,
            constraints=self.raw.constraints,
            budget=budget_of(self.raw.budget),
            prices=self.raw.prices,
            version=self.raw.version,
            branches=graph.branches,
            agents={
                aid: ir.AgentInfo(name=a.name, role=a.role, tools=a.tools, max_context_tokens=a.max_context_tokens)
                for aid, a in self.raw.agents.items()
            },
            **self._policy(path),
            mcp_servers=self._mcp_servers(path),
        )

    def _mcp_servers(self, spec: str) -> dict[str, McpServer]:
        """The MCP servers the spec declares itself (agentrun.yaml's are added when a run starts)."""
        found = self.data.get("workflow", {}).get("mcp_servers")
        try:
            return read_servers(found, spec, position(self.data, ("workflow", "mcp_servers"))[0])
        except SpecError as exc:
            self.problems.extend(exc.problems)
            return {}

    def _policy(self, spec: str) -> dict[str, Any]:
        """The policy.toml the spec names, read now so a mistake in it is found before the run."""
        if not self.raw.policy:
            return {}
        path = os.path.join(os.path.dirname(spec), os.path.expanduser(self.raw.policy))
        data, why, hint = grants.read_policy(path)
        if data is None:
            self.problem(
                ("workflow", "policy"),
                f"policy: {why}",
                hint or "policy: names a policy.toml (relative to the spec) in the Agentfile's format",
            )
            return {}
        return {"tool_policy": data, "policy_file": os.path.abspath(path)}

    def _params(self) -> dict[str, ir.Param]:
        params = {}
        for i, inp in enumerate(self.raw.inputs):
            line, _ = position(self.data, ("workflow", "inputs", i))
            params[inp.name] = ir.Param(
                name=inp.name,
                type=inp.type,
                required=inp.required,
                default=self._default(inp, i),
                description=inp.description,
                line=line,
            )
        return params

    def _default(self, inp: RawInput, i: int) -> Any:
        """The default as a value of the input's type, so a bad default is found now, not mid-run.
        A file_path default is not checked: the file may only exist where the run starts."""
        if inp.default is None or inp.type in ("string", "file_path"):
            return inp.default
        try:
            return coerce(inp.default, inp.type)
        except ValueError as exc:
            self.problem(
                ("workflow", "inputs", i, "default"),
                f"default of input '{inp.name}': {exc}",
                f"write a {inp.type} value, or leave default: out",
            )
            return inp.default

    # -- names ------------------------------------------------------------------------------

    def _check_names(self) -> None:
        seen: dict[str, int] = {}
        for i, step in enumerate(self.raw.steps):
            if step.id in seen:
                self.problem(
                    ("workflow", "steps", i, "id"),
                    f"two steps are both named '{step.id}'",
                    f"the other is step {seen[step.id] + 1}; step ids must be unique",
                )
            seen.setdefault(step.id, i)
            self._check_step_shape(step, ("workflow", "steps", i))
        inputs: set[str] = set()
        for i, inp in enumerate(self.raw.inputs):
            if inp.name in inputs:
                self.problem(
                    ("workflow", "inputs", i, "name"),
                    f"two inputs are both named '{inp.name}'",
                    "input names must be unique; rename or remove one",
                )
            inputs.add(inp.name)
        for aid, agent in self.raw.agents.items():
            for i, name in enumerate(agent.tools):
                if builtin_name(name) is None and coding_tools.mcp_name(name) is None:
                    self.problem(("workflow", "agents", aid, "tools", i), *grants.unknown(name))
            other = agent.retry.fallback_agent
            if other is not None:
                where = ("workflow", "agents", aid, "retry", "on_failure")
                if other == aid:
                    self.problem(
                        where,
                        f"agent '{aid}' is its own fallback",
                        "name a different agent, or use max_attempts to run it again",
                    )
                self._agent_ref(other, where)

    def _check_step_shape(self, step: RawStep, path: tuple) -> None:
        needs = {
            "sequential": "agent",
            "parallel": "parallel",
            "conditional": "condition",
            "loop": "loop",
            "map": "map",
            "human": "prompt",
        }[step.type]
        shape = next((key for key in _SHAPE_KEYS if getattr(step, key) is not None), None)
        if "type" not in step.model_fields_set and shape is not None:
            kind = _SHAPE_KEYS[shape]
            hint = f"add type: {kind}"
            if shape == "prompt" and step.agent:
                hint = "an agent's prompt goes under agents: <id>: prompt:; a step asking a person is type: human"
            self.problem(path + (shape,), f"step '{step.id}' has '{shape}:' but no type:", hint)
            return
        for key, types in _USED_BY.items():
            if key in step.model_fields_set and step.type not in types:
                self.problem(
                    path + (key,),
                    f"'{key}:' is not used by a {step.type} step ('{step.id}')",
                    f"remove it; {_shape_hint(step.type)}",
                )
        if step.condition is not None and step.condition.true is None and step.condition.false is None:
            self.problem(
                path + ("condition",),
                f"the condition of '{step.id}' names nothing to run",
                "add true: and/or false:, each a step id or an agent id",
            )
        if getattr(step, needs) is None:
            self.problem(path, f"step '{step.id}' is of type {step.type} but has no '{needs}:'", _shape_hint(step.type))
        for key in ("parallel", "condition", "loop", "map"):
            if key != needs and getattr(step, key) is not None:
                kind = _SHAPE_KEYS[key]
                self.problem(
                    path + (key,),
                    f"'{key}:' only applies to steps of type {kind}, and '{step.id}' is {step.type}",
                    f"set type: {kind}, or remove '{key}:'",
                )
        for agent, where in _agents_of(step):
            self._agent_ref(agent, path + where)
        if step.parallel is not None:
            self._check_parallel(step, path)
        self._check_human(step, path)
        if step.condition is not None:
            for branch in ("true", "false"):
                target = getattr(step.condition, branch)
                if target is not None and target not in self.step_index and target not in self.raw.agents:
                    self.problem(
                        path + ("condition", branch),
                        f"'{target}' is neither a step id nor an agent id",
                        _close_hint(target, list(self.step_index) + list(self.raw.agents)),
                    )

    def _check_human(self, step: RawStep, path: tuple) -> None:
        if step.type == "human":
            problem = on_timeout_problem(step.on_timeout or "fail", step.choices or [])
            if problem:
                self.problem(path + ("on_timeout",), *problem)
        if step.approval is not None:
            problem = on_timeout_problem(step.approval.on_timeout, [ir.APPROVE, ir.REJECT])
            if problem:
                self.problem(path + ("approval", "on_timeout"), *problem)
        if step.compensate is not None and step.compensate.agent is None and step.type != "sequential":
            self.problem(
                path + ("compensate",),
                f"compensate: on the {step.type} step '{step.id}' must name the agent that undoes it",
                'write compensate: {agent: <agent id>, prompt: "..."}',
            )

    def _check_parallel(self, step: RawStep, path: tuple) -> None:
        branches = step.parallel or []
        keys = [b.output_key or b.agent for b in branches]
        for i, key in enumerate(keys):
            if keys.index(key) != i:
                self.problem(
                    path + ("parallel", i),
                    f"two branches of '{step.id}' both produce '{key}'",
                    "give each branch its own output_key",
                )
        if isinstance(step.wait, int) and not 1 <= step.wait <= len(branches):
            self.problem(
                path + ("wait",),
                f"wait: {step.wait} but the step has {len(branches)} agents",
                f"use all, any, or a number from 1 to {len(branches)}",
            )

    def _agent_ref(self, agent: str, path: tuple) -> None:
        if agent not in self.raw.agents:
            self.problem(
                path, f"agent '{agent}' is not defined under agents:", _close_hint(agent, list(self.raw.agents))
            )

    # -- compiling steps ----------------------------------------------------------------------

    def _step(self, step: RawStep) -> ir.Node:
        """The step's node with what guards, undoes and limits it."""
        where = ("workflow", "steps", self.step_index[step.id])
        gate = None
        if step.approval is not None:
            timeout = self.duration(step.approval.timeout, where + ("approval", "timeout"), _DURATION_HINT)
            line, _ = position(self.data, where + ("approval",))
            gate = approval_gate(step.id, step.id, step.approval, timeout, line)
        compensation, comp = None, step.compensate
        if comp is not None:
            agent = comp.agent or step.agent
            assert agent is not None  # a step with no agent of its own is refused a compensate with none
            compensation = compensation_task(
                step.id,
                step.id,
                agent,
                comp.prompt,
                COMPENSATION_ATTEMPTS,
                position(self.data, where + ("compensate",))[0],
            )
        return self._shape(step).model_copy(
            update={"gate": gate, "compensation": compensation, "budget": budget_of(step.budget)}
        )

    def _shape(self, step: RawStep) -> ir.Node:
        """The step's node; the shape checks before it (`_check_step_shape`) made sure the key its
        type needs is there, so each branch below reads it as given."""
        i = self.step_index[step.id]
        common: dict[str, Any] = dict(
            id=step.id,
            title=step.id,
            line=position(self.data, ("workflow", "steps", i))[0],
            step=True,
            store_as=step.output.store_as,
        )
        fmt = step.output.format
        timeout = self.duration(step.timeout, ("workflow", "steps", i, "timeout"), _DURATION_HINT)
        step_input = _step_input(step)
        if step.type == "sequential":
            assert step.agent is not None
            task = self._task(step.agent, step.id, step_input, fmt)
            return task.model_copy(update={**common, "title": task.title, "timeout_s": timeout or task.timeout_s})
        if step.type == "parallel":
            assert step.parallel is not None
            children: list[ir.Node] = [
                self._task(
                    b.agent, f"{step.id}.{b.output_key or b.agent}", b.input, fmt, output_key=b.output_key or b.agent
                )
                for b in step.parallel
            ]
            return ir.Parallel(children=children, wait=step.wait, timeout_s=timeout, **common)
        if step.type == "loop":
            loop = step.loop
            assert loop is not None
            validator_id = f"{step.id}.{loop.validator}" + (".check" if loop.validator == loop.agent else "")
            return ir.Loop(
                body=self._task(loop.agent, f"{step.id}.{loop.agent}", step_input, fmt),
                validator=self._task(loop.validator, validator_id, None, "json"),
                feedback=loop.feedback_path,
                max_iterations=loop.max_iterations,
                timeout_s=timeout,
                **common,
            )
        if step.type == "human":
            assert step.prompt is not None
            return ir.Human(
                prompt=step.prompt,
                choices=step.choices or [],
                on_timeout=step.on_timeout or "fail",
                timeout_s=timeout,
                **common,
            )
        if step.type == "map":
            m = step.map
            assert m is not None
            body = self._task(m.agent, f"{step.id}.{m.agent}", None, "text" if m.reduce else fmt)
            reduce = self._task(m.reduce, f"{step.id}.{m.reduce}", None, fmt) if m.reduce else None
            return ir.Map(
                over=m.over,
                body=body,
                reduce=reduce,
                concurrency=m.concurrency,
                batch=m.batch,
                timeout_s=timeout,
                **common,
            )
        return ir.Switch(cases=[], timeout_s=timeout, **common)

    def _attach_branches(self, nodes: dict[str, ir.Node], step: RawStep, done: set[str]) -> None:
        """Fill a conditional's branches, its own branch conditionals first (chains like hot/warm/cold)."""
        done.add(step.id)
        cond = step.condition
        assert cond is not None  # only conditional steps are attached
        for target in (cond.true, cond.false):
            inner = self.raw.steps[self.step_index[target]] if target in self.step_index else None
            if inner is not None and inner.type == "conditional" and inner.id not in done:
                self._attach_branches(nodes, inner, done)

        def branch(target: str | None, name: str) -> ir.Node | None:
            if target is None:
                return None
            if target in nodes:
                return nodes[target]
            return self._task(target, f"{step.id}.{name}.{target}", _step_input(step), step.output.format)

        when_true = branch(cond.true, "true") or ir.Sequence(id=f"{step.id}.true")
        nodes[step.id] = nodes[step.id].model_copy(
            update={"cases": [ir.Case(when=cond.eval, node=when_true)], "default": branch(cond.false, "false")}
        )

    def _task(
        self,
        agent_id: str,
        node_id: str,
        input_: str | None,
        fmt: ir.OutputFormat,
        output_key: str | None = None,
        is_fallback: bool = False,
    ) -> ir.Task:
        agent = self.raw.agents[agent_id]
        validation = agent.validation or RawValidation()
        other = agent.retry.fallback_agent
        backup = None
        if other is not None and not is_fallback:
            backup = self._task(other, f"{node_id}.fallback.{other}", input_, fmt, is_fallback=True)
        # A failing fallback aborts the step, whatever its own policy says.
        on_failure: ir.OnFailure = "abort" if is_fallback else "fallback" if backup else agent.retry.final_policy
        return ir.Task(
            id=node_id,
            title=agent.name or agent_id,
            agent=agent_id,
            prompt=agent.prompt,
            protocol="plain",
            input=input_,
            tools=agent.tools,
            grant=grants.grant(
                [b for t in agent.tools if (b := builtin_name(t))],
                coding_tools.mcp_grants(agent.tools),  # mcp__<server>__<tool>, as Claude Code names them
                max_calls=agent.max_tool_calls,
            ),
            output_key=output_key,
            line=position(self.data, ("workflow", "agents", agent_id))[0],
            timeout_s=self.duration(agent.timeout, ("workflow", "agents", agent_id, "timeout"), _DURATION_HINT),
            retry=ir.Retry(
                attempts=agent.retry.max_attempts,
                backoff=agent.retry.backoff,
                delay_s=_BACKOFF_DELAY[agent.retry.backoff],
            ),
            on_failure=on_failure,
            fallback=backup,
            output_format="json" if validation.json_schema else fmt,
            output_schema=validation.json_schema,
            rules=validation.rules,
        )


# The key that gives each step type its shape, and the type it belongs to.
_SHAPE_KEYS = {"parallel": "parallel", "condition": "conditional", "loop": "loop", "map": "map", "prompt": "human"}
# Step keys only some step types read; elsewhere they would be silently ignored. A person's
# answer has nothing to undo and spends no tokens, and a human step needs no approval.
_AGENT_STEPS = {"sequential", "parallel", "conditional", "loop", "map"}
_USED_BY = {
    "agent": {"sequential"},
    "input": {"sequential", "conditional", "loop"},
    "wait": {"parallel"},
    "prompt": {"human"},
    "choices": {"human"},
    "on_timeout": {"human"},
    "approval": _AGENT_STEPS,
    "compensate": _AGENT_STEPS,
    "budget": _AGENT_STEPS,
}


def _step_input(step: RawStep) -> str | None:
    return ir.ALL_PRIOR if (step.input or "").strip().lower() == ir.ALL_PRIOR else step.input


def _agents_of(step: RawStep) -> list[tuple[str, tuple]]:
    """Every agent id a step names, with the path of the key naming it."""
    found: list[tuple[str, tuple]] = [(step.agent, ("agent",))] if step.agent else []
    for i, branch in enumerate(step.parallel or []):
        found.append((branch.agent, ("parallel", i, "agent")))
    if step.loop:
        found += [(step.loop.agent, ("loop", "agent")), (step.loop.validator, ("loop", "validator"))]
    if step.map:
        found.append((step.map.agent, ("map", "agent")))
        if step.map.reduce:
            found.append((step.map.reduce, ("map", "reduce")))
    if step.compensate and step.compensate.agent:
        found.append((step.compensate.agent, ("compensate", "agent")))
    return found


def _shape_hint(step_type: str) -> str:
    return {
        "sequential": "name the agent that runs it: agent: <agent_id>",
        "parallel": "list the agents: parallel: [{agent: a, input: ...}, {agent: b, input: ...}]",
        "conditional": "condition: {eval: \"{{steps.x.output.y}} == 'z'\", true: <step or agent>, false: ...}",
        "loop": "loop: {agent: writer, validator: reviewer, max_iterations: 3}",
        "map": 'map: {over: "{{steps.split.output.chunks}}", agent: worker, reduce: reducer}',
        "human": 'a human step asks a person: prompt: "Publish {{steps.draft.output}}?", choices: [publish, revise]',
    }[step_type]


def _close_hint(name: str, known: list[str]) -> str:
    return did_you_mean(name, known) or ("defined: " + ", ".join(known) if known else "")


def compile(path: str, text: str, params: set[str]) -> ir.Plan:
    """A pipeline reads no params undeclared: its references are checked against its inputs."""
    return compile_data(load_mapping(text, path), path)
