"""What a fork changes before it goes on: params (-p), memory values (--set memory.KEY=VALUE),
step prompts (--prompt STEP=TEXT) and the spec itself (--spec FILE), each checked against the plan
before anything starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, NoReturn

import yaml

from agentrun.explain import mistakes
from agentrun.explain.cut import step_id
from agentrun.explain.prepare import cli_params
from agentrun.lang import blackboard, ir, params
from agentrun.lang.errors import Problem, SpecError, did_you_mean
from agentrun.lang.render import TemplateSyntaxError, names_used

MEMORY = "memory."


class Changes(NamedTuple):
    plan: ir.Plan
    params: dict[str, Any]
    memory: dict[str, Any]  # dotted paths
    said: list[str]  # each change in words, for the report
    warnings: list[str]  # a param the spec does not read


@dataclass(frozen=True)
class Wanted:
    """What a fork changes: params by name, memory (blackboard) values by dotted path, new prompt
    templates by step."""

    params: dict[str, Any] = field(default_factory=dict[str, Any])
    memory: dict[str, Any] = field(default_factory=dict[str, Any])
    prompts: dict[str, str] = field(default_factory=dict[str, str])
    spec: str | None = None  # a changed spec file the fork runs instead of its parent's plan


def from_options(param: list[str], set_: list[str], prompt: list[str]) -> Wanted:
    """`fork`'s options as what they change: `KEY=VALUE` params (a YAML scalar, or KEY=@FILE),
    `memory.KEY=VALUE` values (YAML) and `STEP=TEXT` prompts. Raises SpecError."""
    memory: dict[str, Any] = {}
    for item in set_:
        target, sep, raw = item.partition("=")
        if not sep or not target.startswith(MEMORY) or target == MEMORY:
            _refuse(f"--set {item}", f"cannot set '{target}'", "write --set memory.KEY=VALUE (KEY may be dotted: a.b)")
        memory[target.removeprefix(MEMORY)] = _value(raw)
    prompts: dict[str, str] = {}
    for item in prompt:
        name, sep, text = item.partition("=")
        if not sep or not name:
            _refuse(f"--prompt {item}", "expected STEP=TEXT", "write --prompt STEP=TEXT")
        prompts[name] = text
    return Wanted(dict(cli_params(param)), memory, prompts)


def apply(plan: ir.Plan, given: dict[str, Any], wanted: Wanted) -> Changes:
    """The fork's plan, params and memory values with what is `wanted`, each checked against the
    plan. Raises SpecError."""
    plan = plan.model_copy(deep=True)
    said: list[str] = []
    values = dict(given)
    for name, value in wanted.params.items():
        values[name] = _param(plan, name, value)
        said.append(f"param {name} = {values[name]!r}")
    warnings = [str(problem) for problem in mistakes.unknown_params(plan, list(wanted.params))]
    for path, value in wanted.memory.items():
        _check_memory(plan, path)
        said.append(f"memory.{path} = {value!r}")
    for name, text in wanted.prompts.items():
        said.append(_prompt(plan, name, text))
    return Changes(plan, values, dict(wanted.memory), said, warnings)


def _param(plan: ir.Plan, name: str, value: Any) -> Any:
    param = plan.params.get(name)
    if param is None:
        return value
    try:
        return params.coerce(value, param.type)
    except ValueError as exc:
        raise SpecError([Problem(f"-p {name}", 0, 0, f"param '{name}': {exc}", f"pass a {param.type} value")]) from None


def _check_memory(plan: ir.Plan, path: str) -> None:
    """Refuse a memory path the run cannot take: a constant, or a key none of its steps keeps."""
    flag, root = f"--set memory.{path}", path.split(".")[0]
    if plan.traits.blackboard:
        refusal = blackboard.const_refusal(path, plan.constants)
        if refusal:
            _refuse(flag, refusal, "set a $VAR value")
        return
    names = memory_names(plan)
    if not names:
        where = plan.traits.stores_with
        _refuse(
            flag,
            f"a {plan.dialect} run of '{plan.name}' keeps no memory: none of its steps stores a value",
            f"memory values come from {where}; change a step's input with --prompt or a param with -p",
        )
    if root not in names:
        hint = did_you_mean(root, names) or "its memory keys: " + ", ".join(sorted(names))
        _refuse(flag, f"no memory key '{root}' in {plan.name}", hint)


def memory_names(plan: ir.Plan) -> set[str]:
    """The memory keys the plan's steps read and write: seeded ones, store_as names, goal outputs,
    and a state graph's read and write keys."""
    names = set(plan.memory)
    for node in plan.walk():
        names |= {node.store_as} if node.store_as else set()
        names |= set(node.outputs) if isinstance(node, ir.Task) else set()
        for access in node.access.values() if isinstance(node, ir.Graph) else []:
            names |= {*access.read_keys, *access.write_keys, access.write_key or "*"} - {"*"}
    return names


def _value(raw: str) -> Any:
    try:
        return yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        return raw


def _prompt(plan: ir.Plan, name: str, text: str) -> str:
    """Replace a step's prompt in the plan; the change in words."""
    node = next(n for n in plan.leaves() if n.id == step_id(plan, name, f"--prompt {name}"))
    if not isinstance(node, ir.Task):
        _refuse(
            f"--prompt {name}", f"step '{node.id}' is a {node.kind} step, which has no prompt", "name an agent task"
        )
    try:
        names_used(text)
    except TemplateSyntaxError as exc:
        _refuse(f"--prompt {name}", f"the new prompt is not a valid template: {exc}", "check its {{ }} and {% %}")
    node.prompt = text
    return f"prompt of {node.id} replaced"


def _refuse(flag: str, message: str, hint: str) -> NoReturn:
    raise SpecError([Problem(flag, 0, 0, message, hint)])


def onto(parent: ir.Plan, path: str, given: dict[str, Any], reused: list[str]) -> ir.Plan:
    """The changed spec at `path` as the fork's plan. The steps the fork takes over are found in it
    by id; where ids it would take over vanished, the fork is refused with their list. Raises SpecError."""
    from agentrun.lang.load import load  # the spec languages, loaded by a fork onto a spec only

    plan = load(path, given_params=list(given))
    ids = {node.id for node in plan.walk_all()}
    vanished = sorted({node for node in reused if node not in ids})
    if vanished:
        raise SpecError(
            [
                Problem(
                    path,
                    0,
                    0,
                    f"the fork would take over step(s) {', '.join(vanished)} of {parent.name}, which {path} "
                    "no longer has (steps are matched by id)",
                    "keep those ids in the changed spec, or fork from an earlier step (--at) so they run again",
                )
            ]
        )
    return plan
