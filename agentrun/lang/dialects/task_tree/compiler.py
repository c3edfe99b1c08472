"""Compiling a task tree to the IR: `compile`, which the registry calls (the package
says what the language is and which files are in it)."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from agentrun.lang import expressions, ir, params, scope
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
    compensation_retry,
    compensation_task,
    on_timeout_problem,
    text_shorthand,
)
from agentrun.lang.dialects.task_tree import NAME
from agentrun.lang.errors import Problem, SpecError, did_you_mean
from agentrun.lang.render import TemplateSyntaxError, names_used
from agentrun.lang.schema_errors import problems_from
from agentrun.lang.yamlpos import PosDict, load_mapping, position, text_line

# `human` is the dict of gate id -> answer; which gate ids exist is checked per reference.
BUILTINS = scope.names("core")


class Lenient(BaseModel):
    """A sub-model cyberian reads leniently: an unknown key is ignored there, so here it is kept
    aside (`model_extra`) and said as a warning instead of refused. A task and a provider call
    stay strict, as they are in cyberian."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class RawParam(Lenient):
    range: str = "string"
    required: bool = False
    examples: list[Any] = []
    default: Any = None
    description: str = ""


class RawLoopUntil(Lenient):
    status: str
    message: str = ""
    max_iterations: int | None = Field(None, ge=1)


class RawCriteria(Lenient):
    python: str | None = None
    script: str | None = None
    max_retries: int = Field(0, ge=0)
    retry_message: str | None = None
    timeout: float | str | None = None


class RawFilesExist(Lenient):
    patterns: list[str]
    min_count: int = Field(1, ge=0)


class RawSyncTargets(Lenient):
    paths: list[str]
    description: str = ""


class RawPreconditions(Lenient):
    files_exist: RawFilesExist | None = None
    sync_targets: RawSyncTargets | None = None


class RawHuman(Strict):
    id: str | None = None
    prompt: str
    choices: Choices = []
    timeout: float | str | None = None
    on_timeout: str = "fail"


class RawTaskApproval(RawApproval):
    id: str | None = None  # the gate id, when the task's name is taken by another gate


class RawCompensate(Strict):
    instructions: str | None = None
    agent: str | None = None
    max_attempts: int | None = Field(None, ge=1)
    provider_call: ir.ProviderSpec | None = None


def _lower(value: Any) -> Any:
    """cyberian reads `agent_lifecycle` in any case (REFRESH, Refresh)."""
    return value.lower() if isinstance(value, str) else value


class RawTask(Strict):
    name: str | None = None
    description: str | None = None
    params: dict[str, RawParam] | None = None
    instructions: str | None = None
    system_instructions: str | None = None
    subtasks: dict[str, RawTask] | None = None
    loop_until: RawLoopUntil | None = None
    success_criteria: RawCriteria | None = None
    provider_call: ir.ProviderSpec | None = None
    preconditions: RawPreconditions | None = None
    agent_lifecycle: Annotated[Literal["reuse", "refresh"] | None, BeforeValidator(_lower)] = None
    requires_workdir: Any = None
    requirements: Any = None
    agent: str | None = None
    timeout: float | str | None = None
    max_iterations: int | None = Field(None, ge=1)
    completion: Literal["strict", "lenient"] | None = None
    human: RawHuman | None = None
    approval: Annotated[RawTaskApproval | None, BeforeValidator(approval_shorthand)] = None
    compensate: Annotated[RawCompensate | None, text_shorthand("instructions")] = None
    budget: RawBudget | None = None
    store_as: str | None = None
    goal: str | None = None
    constraints: list[str] | None = None
    prices: dict[str, ir.Price] | None = None

    @field_validator("subtasks", mode="before")
    @classmethod
    def _none_subtask_is_empty(cls, value: Any) -> Any:
        # `task:` with nothing under it is a container with no work, not an error.
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value


def compile_data(data: PosDict, file: str, given: set[str] | frozenset[str] = frozenset()) -> ir.Plan:
    try:
        raw = RawTask.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from(exc, data, file, RawTask, VALUE_HINTS)) from None
    builder = _Builder(file, data, raw, given)
    plan = builder.build()
    if builder.problems:
        raise SpecError(builder.problems)
    return plan


_ROOT_ONLY = ("goal", "constraints", "prices")


_DURATION_HINT = "write a number of seconds or a duration like '30m'"


class _Builder(Builder):
    def __init__(self, file: str, data: PosDict, raw: RawTask, given: set[str] | frozenset[str]):
        super().__init__(file, data)
        self.raw, self.given = raw, given
        self.name = raw.name or os.path.splitext(os.path.basename(file))[0]
        self.params = {name: self._param(name, p) for name, p in (raw.params or {}).items()}
        # Every gate id, known before any template is checked: a template may read a later gate.
        self.gates: dict[str, int] = {}
        self._collect_gates(raw, (), self.name)
        # Memory keys tasks write (store_as:), which any task's templates may read.
        self.memory_keys = _stored_keys(raw)

    def _param(self, name: str, p: RawParam) -> ir.Param:
        where = ("params", name)
        self._ignored(p, where, typos_are_errors=True)
        if p.range.lower() not in params.TYPES:
            hint = did_you_mean(p.range.lower(), params.TYPES) or "write one of: " + ", ".join(sorted(params.TYPES))
            self.problem(where + ("range",), f"param '{name}' has the unknown range '{p.range}'", hint)
        elif p.default is not None and p.range.lower() != "file_path":
            try:
                params.coerce(p.default, p.range)
            except ValueError as exc:
                self.problem(where + ("default",), f"default of param '{name}': {exc}", f"write a {p.range} value")
        line, _ = position(self.data, where)
        return ir.Param(
            name=name,
            type=p.range,
            required=p.required,
            default=p.default,
            description=p.description,
            examples=p.examples,
            line=line,
        )

    def _collect_gates(self, raw: RawTask, path: tuple, name: str) -> None:
        key = "human" if raw.human is not None else "approval" if raw.approval is not None else None
        if key:
            gate_id = getattr(raw, key).id or name
            line, _ = position(self.data, path + (key,))
            if gate_id in self.gates:
                self.problem(
                    path + (key, "id"),
                    f"two gates are both named '{gate_id}'",
                    f"the other is at line {self.gates[gate_id]}; give this one its own id: under {key}:",
                )
            self.gates.setdefault(gate_id, line)
        for sub_name, sub in (raw.subtasks or {}).items():
            self._collect_gates(sub, path + ("subtasks", sub_name), sub_name)

    def build(self) -> ir.Plan:
        root = self._node(self.raw, (), self.name, system=None)
        return ir.Plan(
            name=self.name,
            description=self.raw.description or "",
            dialect=NAME,
            source=os.path.abspath(self.file),
            spec_dir=os.path.dirname(os.path.abspath(self.file)),
            params=self.params,
            root=root,
            lifecycle=self.raw.agent_lifecycle or "reuse",
            goal=self.raw.goal or self.raw.description or "",
            constraints=self.raw.constraints or [],
            budget=budget_of(self.raw.budget),
            prices=self.raw.prices or {},
            completion=self.raw.completion or "strict",
            requires_workdir=self.raw.requires_workdir,
            requirements=self.raw.requirements,
            undefined="empty",  # templates render as plain Jinja does in cyberian
            warnings=[str(w) for w in self.warnings],
        )

    def _node(self, raw: RawTask, path: tuple, name: str, system: str | None) -> ir.Node:
        task_id = ".".join(str(p) for p in path[1::2]) or name
        system = raw.system_instructions if raw.system_instructions is not None else system
        for key in _ROOT_ONLY:
            if path and getattr(raw, key) is not None:
                self.problem(
                    path + (key,),
                    f"'{key}:' applies to the whole run, not to task '{name}'",
                    "move it to the top level of the spec",
                )
        if raw.store_as and scope.shadowing(raw.store_as):
            message = f"store_as '{raw.store_as}' would hide a name templates read: {scope.shadowing(raw.store_as)}"
            self.problem(path + ("store_as",), message, "pick another name")
        gate = self._gate(raw, path, name)
        work = self._work(raw, path, task_id, name, system)
        compensation = self._compensation(raw, path, task_id, name, system, has_work=work is not None)
        budget = budget_of(raw.budget) if path else None  # the root's is the run's
        guards = {"budget": budget, "preconditions": self._preconditions(raw.preconditions, path)}
        # An approval on a task with subtasks guards them all, so it goes on the task's sequence.
        gate_on_sequence = raw.approval is not None and (bool(raw.subtasks) or work is None)
        own: ir.Node | None = None
        if work is not None:
            own = work.model_copy(update={"compensation": compensation, "gate": None if gate_on_sequence else gate})
        elif raw.human is not None and gate is not None:
            own = gate.model_copy(update={"store_as": raw.store_as})  # a question alone is the work
        if own is not None and not raw.subtasks:
            # A task with no subtasks is its own work, under the task's id people see.
            return own.model_copy(update=guards)
        subtasks = [self._node(sub, path + ("subtasks", n), n, system) for n, sub in (raw.subtasks or {}).items()]
        line, _ = position(self.data, path)
        return ir.Sequence(
            # With work of its own (which keeps the task's id), the sequence is the task and its subtasks.
            id=f"{task_id}.*" if own is not None else task_id,
            title=name,
            line=line,
            children=([own] if own is not None else []) + subtasks,
            gate=gate if gate_on_sequence else None,
            **guards,
        )

    def _gate(self, raw: RawTask, path: tuple, name: str) -> ir.Human | None:
        if raw.human is not None and raw.approval is not None:
            self.problem(
                path + ("approval",),
                f"task '{name}' has both human: and approval:",
                "use one: approval: asks approve or reject, human: asks a question of your own",
            )
        if raw.human is not None:
            return self._human(raw.human, path + ("human",), name)
        if raw.approval is not None:
            return self._approval(raw.approval, path + ("approval",), name)
        return None

    def _human(self, raw: RawHuman, where: tuple, name: str) -> ir.Human:
        self._check_template(raw.prompt, where + ("prompt",))
        self._check_on_timeout(raw.on_timeout, raw.choices, where)
        line, _ = position(self.data, where)
        return ir.Human(
            id=raw.id or name,
            title=name,
            prompt=raw.prompt,
            choices=raw.choices,
            timeout_s=self.duration(raw.timeout, where + ("timeout",), _DURATION_HINT),
            on_timeout=raw.on_timeout,
            line=line,
        )

    def _approval(self, raw: RawTaskApproval, where: tuple, name: str) -> ir.Human:
        if raw.prompt is not None:
            self._check_template(raw.prompt, where + ("prompt",))
        self._check_on_timeout(raw.on_timeout, [ir.APPROVE, ir.REJECT], where)
        return approval_gate(
            raw.id or name,
            name,
            raw,
            self.duration(raw.timeout, where + ("timeout",), _DURATION_HINT),
            position(self.data, where)[0],
        )

    def _check_on_timeout(self, on_timeout: str, choices: list[str], where: tuple) -> None:
        problem = on_timeout_problem(on_timeout, choices)
        if problem:
            self.problem(where + ("on_timeout",), *problem)

    def _compensation(
        self, raw: RawTask, path: tuple, task_id: str, name: str, system: str | None, has_work: bool
    ) -> ir.Task | ir.Provider | None:
        comp, where = raw.compensate, path + ("compensate",)
        if comp is None:
            return None
        if not has_work:
            self.problem(
                where,
                f"task '{name}' has compensate: but no work of its own to undo",
                "compensate undoes a task's instructions or provider_call; "
                "put it on the subtask whose effect it undoes",
            )
            return None
        if (comp.instructions is None) == (comp.provider_call is None):
            self.problem(
                where,
                "compensate needs exactly one of 'instructions' or 'provider_call'",
                'write compensate: "Undo ..." (instructions for the task\'s agent), '
                "or compensate: {provider_call: {provider: ..., method: ..., params: ...}}",
            )
            return None
        line, _ = position(self.data, where)
        attempts = comp.max_attempts or COMPENSATION_ATTEMPTS
        if comp.provider_call is not None:
            call = comp.provider_call
            self._check_value_templates(
                call.params, where + ("provider_call", "params"), extra=scope.names("compensation")
            )
            self._warn_shell_reads_written_values(call, where + ("provider_call",))
            return ir.Provider(
                id=f"{task_id}.compensate",
                title=f"undo {name}",
                line=line,
                call=call,
                retry=compensation_retry(attempts),
            )
        assert comp.instructions is not None  # exactly one of the two, checked above
        self._check_template(comp.instructions, where + ("instructions",), extra=scope.names("compensation"))
        return compensation_task(
            task_id,
            name,
            comp.agent or raw.agent or "default",
            comp.instructions,
            attempts,
            line,
            protocol="status",
            system=system,
        )

    def _work(self, raw: RawTask, path: tuple, task_id: str, name: str, system: str | None):
        line, _ = position(self.data, path)
        common: dict[str, Any] = dict(
            id=task_id,
            title=name,
            line=line,
            timeout_s=self.duration(raw.timeout, path + ("timeout",), _DURATION_HINT),
            store_as=raw.store_as,
        )
        if raw.provider_call:
            call = raw.provider_call
            self._check_value_templates(call.params, path + ("provider_call", "params"))
            self._warn_shell_reads_written_values(call, path + ("provider_call",))
            if call.output_file is not None:
                self._check_template(call.output_file, path + ("provider_call", "output_file"))
            return ir.Provider(call=call, criteria=self._criteria(raw.success_criteria, path), **common)
        if raw.instructions is None:
            return None
        self._check_template(raw.instructions, path + ("instructions",))
        if raw.system_instructions is not None:
            self._check_template(raw.system_instructions, path + ("system_instructions",))
        return ir.Task(
            agent=raw.agent or "default",
            prompt=raw.instructions,
            system=system,
            loop_until=self._loop(raw, path),
            criteria=self._criteria(raw.success_criteria, path),
            **common,
        )

    def _ignored(self, raw: Lenient | None, path: tuple, typos_are_errors: bool = False) -> None:
        """Keys cyberian ignores in a sub-model, each a warning, with the known key it is closest to.
        With `typos_are_errors` (a param's keys), a near miss of a known key is refused instead: a
        `defauult:` silently ignored would run with an empty value."""
        if raw is None:
            return
        known = type(raw).model_fields
        for key in raw.model_extra or {}:
            close = did_you_mean(key, known)
            if close and typos_are_errors:
                self.problem(path + (key,), f"unknown key '{key}'", close)
                continue
            hint = close or "allowed here: " + ", ".join(known)
            self.warn(path + (key,), f"unknown key '{key}' is ignored, as cyberian ignores it", hint)

    def _written(self, source: str) -> list[str]:
        """The names a template reads whose values an agent or a person wrote: memory keys, step
        outputs, answers and the output being undone."""
        try:
            used = names_used(source)
        except TemplateSyntaxError:
            return []  # reported as a syntax error where the template is checked
        return sorted(used & (self.memory_keys | {"steps", "human", "output"}))

    def _no_written_values_in_code(self, source: str, path: tuple) -> None:
        """Code never has agent text spliced into it: a check reads such values as data."""
        for name in self._written(source):
            self.problem(
                path,
                f"success_criteria python reads '{name}', which an agent or a person wrote: "
                "spliced into the code, that text would run as code",
                f"read it as data: json.load(open(os.environ['AGENTRUN_VALUES']))['{name}']",
            )

    def _warn_shell_reads_written_values(self, call: ir.ProviderSpec, path: tuple) -> None:
        command = call.params.get("command") if call.provider == "shell" else None
        for name in self._written(command) if isinstance(command, str) else []:
            self.warn(
                path + ("params", "command"),
                f"this shell command reads '{name}', which an agent or a person wrote: the shell "
                "will run whatever that text says",
                "pass it through a file or an environment variable and quote it in the command",
            )

    def _loop(self, raw: RawTask, path: tuple) -> ir.LoopUntil | None:
        if raw.loop_until is None:
            return None
        self._ignored(raw.loop_until, path + ("loop_until",))
        self._check_template(raw.loop_until.message, path + ("loop_until", "message"))
        limit = raw.loop_until.max_iterations or raw.max_iterations
        return ir.LoopUntil(status=raw.loop_until.status, message=raw.loop_until.message, max_iterations=limit)

    def _criteria(self, raw: RawCriteria | None, path: tuple) -> ir.Criteria | None:
        if raw is None:
            return None
        where = path + ("success_criteria",)
        self._ignored(raw, where)
        if (raw.python is None) == (raw.script is None):
            self.problem(
                where,
                "success_criteria needs exactly one of 'python' or 'script'",
                "write python: | ... (setting result = True/False), or script: path/to/check.py",
            )
            return None
        if raw.python is not None:
            self._check_template(raw.python, where + ("python",))
            self._no_written_values_in_code(raw.python, where + ("python",))
        if raw.script is not None and not os.path.exists(
            os.path.join(os.path.dirname(os.path.abspath(self.file)), raw.script)
        ):
            self.problem(
                where + ("script",),
                f"success_criteria script '{raw.script}' does not exist",
                "a script path is relative to the spec file's folder",
            )
        if raw.retry_message is not None:
            self._check_template(raw.retry_message, where + ("retry_message",), extra=scope.names("retry"))
        timeout = self.duration(raw.timeout, where + ("timeout",), _DURATION_HINT) or 120.0
        return ir.Criteria(
            python=raw.python,
            script=raw.script,
            max_retries=raw.max_retries,
            retry_message=raw.retry_message,
            timeout_s=timeout,
        )

    def _preconditions(self, raw: RawPreconditions | None, path: tuple) -> ir.Preconditions | None:
        if raw is None:
            return None
        where = path + ("preconditions",)
        self._ignored(raw, where)
        self._ignored(raw.files_exist, where + ("files_exist",))
        self._ignored(raw.sync_targets, where + ("sync_targets",))
        files = raw.files_exist
        return ir.Preconditions(
            files_exist=files.patterns if files else [],
            min_count=files.min_count if files else 1,
            sync_targets=raw.sync_targets.paths if raw.sync_targets else [],
        )

    def _check_value_templates(self, value: Any, path: tuple, extra: frozenset[str] = frozenset()) -> None:
        if isinstance(value, str):
            self._check_template(value, path, extra)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._check_value_templates(item, path + (i,), extra)
        elif isinstance(value, dict):
            for key, item in value.items():
                self._check_value_templates(item, path + (key,), extra)

    def _check_template(self, source: str, path: tuple, extra: frozenset[str] = frozenset()) -> None:
        try:
            used = names_used(source)
        except TemplateSyntaxError as exc:
            line, col = position(self.data, path)
            self.problems.append(
                Problem(
                    self.file,
                    line + (exc.lineno or 1) - 1,
                    col,
                    f"template syntax: {exc.message}",
                    "Jinja2 syntax: {{ name }} for values, {% if %}...{% endif %} for logic",
                )
            )
            return
        known = set(self.params) | BUILTINS | set(extra) | set(self.given) | self.memory_keys
        for name in sorted(used - known):
            self.warn_at(
                *self._place_of(source, name, path),
                f"undeclared template variable '{name}': renders empty unless given with -p {name}=…",
                _undefined_hint(name, known),
            )
        if "human" in used:
            self._check_gate_refs(source, path)

    def _place_of(self, source: str, name: str, path: tuple) -> tuple[int, int]:
        """(line, column) of the first use of `name` in the template at `path`: its own line in a
        block scalar, else the key's place."""
        key_line, key_col = position(self.data, path)
        first = text_line(self.data, path) or key_line
        lines = source.splitlines()
        hit = next((n for n, line in enumerate(lines) if re.search(rf"\b{re.escape(name)}\b", line)), 0)
        return (key_line, key_col) if first + hit == key_line else (first + hit, 1)

    def _check_gate_refs(self, source: str, path: tuple) -> None:
        for ref, _ in expressions.template_references(source):
            if ref[0] == "human" and len(ref) > 1 and str(ref[1]) not in self.gates:
                gate = str(ref[1])
                listed = "gates: " + ", ".join(self.gates) if self.gates else ""
                hint = did_you_mean(gate, self.gates) or listed or "add human: or approval: to the task that asks"
                self.problem(path, f"undefined gate '{gate}'", hint)


def _stored_keys(raw: RawTask) -> set[str]:
    keys = {raw.store_as} if raw.store_as else set()
    for sub in (raw.subtasks or {}).values():
        keys |= _stored_keys(sub)
    return keys


def _undefined_hint(name: str, known: set[str]) -> str:
    if name == "output":
        return "'output' is set only in compensate: (the output of the task being undone)"
    return (
        did_you_mean(name, known)
        or f"declare it under params: ({name}: {{range: string}}) or pass it with -p {name}=VALUE"
    )


RawTask.model_rebuild()


def compile(path: str, text: str, params: set[str]) -> ir.Plan:
    """`params` names params passed on the command line, which templates may use undeclared."""
    return compile_data(load_mapping(text, path), path, params)
