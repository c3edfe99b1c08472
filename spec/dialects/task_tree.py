"""The recursive task tree (cyberian): depth-first tasks with instructions, loops, checks, providers.

Every key of the real format is accepted; unknown keys are errors. Extensions: `agent` (which agent
id a task talks to), `timeout`, `max_iterations`, and root `completion: strict | lenient`.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spec import ir
from spec.durations import parse_duration
from spec.errors import Problem, SpecError, did_you_mean
from spec.render import TemplateSyntaxError, names_used
from spec.schema_errors import problems_from
from spec.yamlpos import PosDict, position

BUILTINS = {"agent_type", "skip_permissions", "workdir", "iteration", "run_id"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RawParam(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the real system ignores unknown keys here
    range: str = "string"
    required: bool = False
    examples: list[Any] = []
    default: Any = None
    description: str = ""


class RawLoopUntil(_Strict):
    status: str
    message: str = ""
    max_iterations: int | None = Field(None, ge=1)


class RawCriteria(_Strict):
    python: str | None = None
    script: str | None = None
    max_retries: int = Field(0, ge=0)
    retry_message: str | None = None
    timeout: float | str | None = None


class RawProviderCall(_Strict):
    provider: str
    method: str
    params: dict[str, Any] = {}
    output_file: str | None = None


class RawFilesExist(_Strict):
    patterns: list[str]
    min_count: int = Field(1, ge=0)


class RawSyncTargets(_Strict):
    paths: list[str]


class RawPreconditions(_Strict):
    files_exist: RawFilesExist | None = None
    sync_targets: RawSyncTargets | None = None


class RawTask(_Strict):
    name: str | None = None
    description: str | None = None
    params: dict[str, RawParam] | None = None
    instructions: str | None = None
    system_instructions: str | None = None
    subtasks: dict[str, "RawTask"] | None = None
    loop_until: RawLoopUntil | None = None
    success_criteria: RawCriteria | None = None
    provider_call: RawProviderCall | None = None
    preconditions: RawPreconditions | None = None
    agent_lifecycle: Literal["reuse", "refresh"] | None = None
    requires_workdir: Any = None
    requirements: Any = None
    agent: str | None = None
    timeout: float | str | None = None
    max_iterations: int | None = Field(None, ge=1)
    completion: Literal["strict", "lenient"] | None = None

    @field_validator("subtasks", mode="before")
    @classmethod
    def _none_subtask_is_empty(cls, value: Any) -> Any:
        # `task:` with nothing under it is a container with no work, not an error.
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value


def detect(data: Any) -> bool:
    keys = {"subtasks", "instructions", "provider_call"}
    return isinstance(data, dict) and bool(keys & set(data)) and "workflow" not in data


def compile_plan(data: PosDict, file: str, given: set[str] = frozenset()) -> ir.Plan:
    """`given` names params passed on the command line, which templates may use undeclared."""
    try:
        raw = RawTask.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from(exc, data, file, RawTask)) from None
    builder = _Builder(file, data, raw, given)
    plan = builder.build()
    if builder.problems:
        raise SpecError(builder.problems)
    return plan


class _Builder:
    def __init__(self, file: str, data: PosDict, raw: RawTask, given: set[str]):
        self.file, self.data, self.raw, self.given = file, data, raw, given
        self.params = {name: self._param(name, p) for name, p in (raw.params or {}).items()}
        self.problems: list[Problem] = []

    def _param(self, name: str, p: RawParam) -> ir.Param:
        line, _ = position(self.data, ("params", name))
        return ir.Param(name=name, type=p.range, required=p.required, default=p.default,
                        description=p.description, examples=p.examples, line=line)

    def build(self) -> ir.Plan:
        name = self.raw.name or os.path.splitext(os.path.basename(self.file))[0]
        root = self._node(self.raw, (), name, system=None)
        return ir.Plan(
            name=name, description=self.raw.description or "", dialect="task-tree",
            source=os.path.abspath(self.file), spec_dir=os.path.dirname(os.path.abspath(self.file)),
            params=self.params, root=root, lifecycle=self.raw.agent_lifecycle or "reuse",
            info={"completion": self.raw.completion or "strict",
                  "requires_workdir": self.raw.requires_workdir,
                  "requirements": self.raw.requirements},
        )

    def _node(self, raw: RawTask, path: tuple, name: str, system: str | None) -> ir.NodeBase:
        task_id = ".".join(str(p) for p in path[1::2]) or name
        system = raw.system_instructions if raw.system_instructions is not None else system
        children: list[ir.NodeBase] = []
        work = self._work(raw, path, task_id, name, system)
        if work is not None:
            children.append(work)
        for sub_name, sub in (raw.subtasks or {}).items():
            children.append(self._node(sub, path + ("subtasks", sub_name), sub_name, system))
        line, _ = position(self.data, path)
        return ir.Sequence(id=task_id, title=name, line=line, children=children)

    def _work(self, raw: RawTask, path: tuple, task_id: str, name: str, system: str | None):
        line, _ = position(self.data, path)
        common = dict(id=task_id, title=name, line=line, timeout_s=self._timeout(raw.timeout, path + ("timeout",)))
        pre = self._preconditions(raw.preconditions)
        if raw.provider_call:
            call = raw.provider_call
            self._check_value_templates(call.params, path + ("provider_call", "params"))
            return ir.Provider(call=ir.ProviderSpec(**call.model_dump()), preconditions=pre, **common)
        if raw.instructions is None:
            return None
        self._check_template(raw.instructions, path + ("instructions",))
        if raw.system_instructions is not None:
            self._check_template(raw.system_instructions, path + ("system_instructions",))
        return ir.Task(agent=raw.agent or "default", prompt=raw.instructions, system=system,
                       loop_until=self._loop(raw, path), criteria=self._criteria(raw.success_criteria, path),
                       preconditions=pre, **common)

    def _loop(self, raw: RawTask, path: tuple) -> ir.LoopUntil | None:
        if raw.loop_until is None:
            return None
        self._check_template(raw.loop_until.message, path + ("loop_until", "message"))
        limit = raw.loop_until.max_iterations or raw.max_iterations
        return ir.LoopUntil(status=raw.loop_until.status, message=raw.loop_until.message, max_iterations=limit)

    def _criteria(self, raw: RawCriteria | None, path: tuple) -> ir.Criteria | None:
        if raw is None:
            return None
        where = path + ("success_criteria",)
        if (raw.python is None) == (raw.script is None):
            self._problem(where, "success_criteria needs exactly one of 'python' or 'script'",
                          "write python: | ... (setting result = True/False), or script: path/to/check.py")
            return None
        if raw.python is not None:
            self._check_template(raw.python, where + ("python",))
        if raw.script is not None and not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(self.file)), raw.script)):
            self._problem(where + ("script",), f"success_criteria script '{raw.script}' does not exist",
                          "a script path is relative to the spec file's folder")
        if raw.retry_message is not None:
            self._check_template(raw.retry_message, where + ("retry_message",), extra={"error"})
        timeout = self._timeout(raw.timeout, where + ("timeout",)) or 120.0
        return ir.Criteria(python=raw.python, script=raw.script, max_retries=raw.max_retries,
                           retry_message=raw.retry_message, timeout_s=timeout)

    def _preconditions(self, raw: RawPreconditions | None) -> ir.Preconditions | None:
        if raw is None:
            return None
        files = raw.files_exist
        return ir.Preconditions(files_exist=files.patterns if files else [],
                                min_count=files.min_count if files else 1,
                                sync_targets=raw.sync_targets.paths if raw.sync_targets else [])

    def _timeout(self, value: float | str | None, path: tuple) -> float | None:
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self._problem(path, str(exc), "write a number of seconds or a duration like '30m'")
            return None

    def _check_value_templates(self, value: Any, path: tuple) -> None:
        if isinstance(value, str):
            self._check_template(value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._check_value_templates(item, path + (i,))
        elif isinstance(value, dict):
            for key, item in value.items():
                self._check_value_templates(item, path + (key,))

    def _check_template(self, source: str, path: tuple, extra: set[str] = frozenset()) -> None:
        try:
            used = names_used(source)
        except TemplateSyntaxError as exc:
            line, col = position(self.data, path)
            self.problems.append(Problem(self.file, line + (exc.lineno or 1) - 1, col,
                                         f"template syntax: {exc.message}",
                                         "Jinja2 syntax: {{ name }} for values, {% if %}...{% endif %} for logic"))
            return
        known = set(self.params) | BUILTINS | set(extra) | set(self.given)
        for name in sorted(used - known):
            self._problem(path, f"undefined template variable '{name}'", _undefined_hint(name, known))

    def _problem(self, path: tuple, message: str, hint: str = "") -> None:
        line, col = position(self.data, path)
        self.problems.append(Problem(self.file, line, col, message, hint))


def _undefined_hint(name: str, known: set[str]) -> str:
    return did_you_mean(name, known) or f"declare it under params: ({name}: {{range: string}}) or pass it with -p {name}=VALUE"


RawTask.model_rebuild()
