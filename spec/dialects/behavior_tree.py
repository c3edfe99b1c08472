"""Behaviour trees (behaviors-sh, and abtree before it), YAML or JSON, compiled to the IR.

Two layouts: abtree's wrapper `{name, version, description, state: {local, global}, tree}` and a
behaviors-sh file whose root is a node with `state: {var, const}` on it. Composites (sequence,
selector, parallel) become the IR's nodes of those names; an action becomes a sequence of its
steps, each a task whose protocol is `evaluate` or `instruct` (workflows.protocols.tree). `$ref`s
are pasted in at load. The engine's own keys work on any node: `approval`, `budget`, `compensate`.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from typing import Any

from pydantic import ValidationError

from spec import ir
from spec.blackboard import NAMED, is_constant
from spec.dialects.behavior_tree_refs import Refs, is_ref
from spec.dialects.common_keys import (
    COMPENSATION_ATTEMPTS,
    VALUE_HINTS,
    RawApproval,
    RawBudget,
    approval_gate,
    approval_shorthand,
    budget_of,
    compensation_task,
)
from spec.durations import parse_duration
from spec.errors import Problem, SpecError, did_you_mean
from spec.yamlpos import PosDict, load_mapping, mapping_or_none

NAME = "behavior_tree"
COMPOSITES: dict[str, type[ir.Sequence] | type[ir.Selector] | type[ir.Parallel]] = {
    "sequence": ir.Sequence,
    "selector": ir.Selector,
    "parallel": ir.Parallel,
}
KINDS = (*COMPOSITES, "action")
STEP_KINDS = ("evaluate", "instruct")
ENGINE_KEYS = {"approval", "budget", "compensate"}
NODE_KEYS = {"type", "name", "retries", *ENGINE_KEYS}
TOP_KEYS = {"$schema", "name", "version", "description", "state", "budget", "running"}
STATE_KEYS = {"var": "memory", "local": "memory", "const": "constants", "global": "constants"}
RUNNING_KEYS = {"wait", "max_wait", "max_asks"}
TYPE_HINT = "write type: sequence, selector, parallel or action"


def detect(path: str, text: str) -> bool:
    data = mapping_or_none(text)
    if data is None:
        return False
    tree = data.get("tree")
    if isinstance(tree, dict):
        return "type" in tree or "$ref" in tree
    return "type" in data and ("children" in data or "steps" in data)


def compile(path: str, text: str, params: set[str]) -> ir.Plan:
    return _Compiler(path, load_mapping(text, path)).plan()


class _Compiler:
    def __init__(self, path: str, data: PosDict):
        self.path, self.data = path, data
        self.wrapped = "tree" in data
        self.refs = Refs(path, data)
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.texts: list[tuple[str, str, tuple[int, int]]] = []  # each step's text, file and place
        self.meant: set[tuple[int, str]] = set()  # (mapping, key) a misspelled key stands for: said once

    def plan(self) -> ir.Plan:
        data = self.data
        self._keys(data, self.path, TOP_KEYS | ({"tree"} if self.wrapped else NODE_KEYS | {"children", "steps"}))
        state = self._state(data.get("state"))
        running = self._running(data.get("running"))
        budget = self._budget(data, self.path)
        root = self._node(data["tree"] if self.wrapped else data, self.path, [], "", (), Counter())
        if self.wrapped and not _text(data.get("name")):
            self._problem(
                self.path, _at(data, "name"), "the tree needs a name: (abtree's name:)", "write name: my-tree"
            )
        self._undeclared_constants(state["constants"])
        if self.problems or root is None:
            raise SpecError(self.problems or [Problem(self.path, 1, 1, "the tree has no root node", TYPE_HINT)])
        return ir.Plan(
            name=_text(data.get("name")) or root.title or root.id,
            description=_text(data.get("description")),
            version=str(data.get("version") or ""),
            dialect=NAME,
            source=self.path,
            spec_dir=os.path.dirname(os.path.abspath(self.path)),
            root=root,
            budget=budget,
            memory=state["memory"],
            constants=state["constants"],
            running=running,
            warnings=[str(w) for w in self.warnings],
        )

    # ------------------------------------------------------------------ nodes

    def _node(
        self, raw: Any, file: str, path: list[int], parent: str, chain: tuple[str, ...], seen: Counter
    ) -> ir.Node | None:
        if is_ref(raw):
            try:
                found, name = self.refs.follow(raw["$ref"], file, _at(raw, "$ref"), chain)
            except SpecError as exc:
                self.problems += exc.problems
                return None
            return self._node(found.node, found.file, path, parent, (*chain, name), seen)
        if not isinstance(raw, PosDict):
            self._problem(file, _place(raw), "a node must be a mapping with type: and name:", TYPE_HINT)
            return None
        kind = raw.get("type")
        if kind not in KINDS:
            self._bad_type(raw, file, kind)
            return None
        extra = set() if raw is not self.data or self.wrapped else TOP_KEYS
        self._keys(raw, file, NODE_KEYS | extra | {"steps" if kind == "action" else "children"})
        name = self._name(raw, file)
        node_id = f"{parent}/{name}" if parent else name
        seen[name] += 1
        if seen[name] > 1:
            node_id += f"-{seen[name]}"
        common = self._common(raw, file, node_id, name, path)
        if kind == "action":
            return ir.Sequence(children=self._steps(raw, file, node_id, name, path), **common)
        children = self._list(raw, file, "children", "a composite needs children: [a node, ...]")
        inner: Counter = Counter()
        compiled = [self._node(c, file, [*path, i], node_id, chain, inner) for i, c in enumerate(children)]
        nodes = [c for c in compiled if c is not None]
        return COMPOSITES[kind](children=nodes, **common)

    def _common(self, raw: PosDict, file: str, node_id: str, name: str, path: list[int]) -> dict[str, Any]:
        retries = self._retries(raw, file)
        common: dict[str, Any] = {"id": node_id, "title": name, "line": raw.line, "budget": self._budget(raw, file)}
        if retries:
            common["retry"] = ir.Retry(attempts=retries + 1, backoff="none", delay_s=0)
        if raw.get("approval") not in (None, False):
            common["gate"] = self._gate(raw, file, node_id, name)
        if raw.get("compensate") is not None:
            common["compensation"] = self._compensation(raw, file, node_id, name, path)
        return common

    def _steps(self, raw: PosDict, file: str, node_id: str, name: str, path: list[int]) -> list[ir.Node]:
        steps = self._list(raw, file, "steps", "an action needs steps: [{instruct: ...} or {evaluate: ...}, ...]")
        tasks: list[ir.Node] = []
        for i, step in enumerate(steps):
            kind_text = self._step(step, file)
            if kind_text is None:
                continue
            kind, text = kind_text
            self.texts.append((text, file, (step.line, step.column)))
            tasks.append(
                ir.Task(
                    id=f"{node_id}@{i + 1}",
                    title=f"{name}: {kind} {i + 1}",
                    prompt=text,
                    protocol=kind,
                    tree_step=ir.TreeStep(action=name, path=path, index=i, last=i == len(steps) - 1),
                    line=step.line,
                )
            )
        return tasks

    def _step(self, step: Any, file: str) -> tuple[ir.Protocol, str] | None:
        hint = "write - instruct: text, or - evaluate: text"
        if not isinstance(step, PosDict) or len(step) != 1 or next(iter(step)) not in STEP_KINDS:
            keys = list(step) if isinstance(step, PosDict) else []
            close = did_you_mean(str(keys[0]), STEP_KINDS) if len(keys) == 1 else ""
            self._problem(file, _place(step), "a step is exactly one of evaluate: or instruct:", close or hint)
            return None
        kind = next(iter(step))
        text = step[kind]
        if not isinstance(text, str) or not text.strip():
            self._problem(file, _at(step, kind), f"the {kind} step's text is empty", hint)
            return None
        return kind, text.strip()

    # ------------------------------------------------------------------ keys of a node

    def _name(self, raw: PosDict, file: str) -> str:
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            self._problem(file, _at(raw, "name"), "the node needs a name:", "write name: Run_Tests")
            return f"{raw.get('type')}-{raw.line}"
        if "/" in name or "@" in name:
            hint = "names may not contain '/' or '@' (they separate names in a node's path); use _ or -"
            self._problem(file, _at(raw, "name"), f"the name '{name}' contains '/' or '@'", hint)
        return name

    def _retries(self, raw: PosDict, file: str) -> int:
        value = raw.get("retries")
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            hint = "retries: N gives the node N more attempts; N is a whole number of at least 1"
            self._problem(file, _at(raw, "retries"), f"retries must be an integer of at least 1, not {value!r}", hint)
            return 0
        return value

    def _gate(self, raw: PosDict, file: str, node_id: str, name: str) -> ir.Human | None:
        try:
            approval = RawApproval(**(approval_shorthand(raw["approval"]) or {}))
            timeout = parse_duration(approval.timeout) if approval.timeout is not None else None
        except (ValueError, TypeError) as exc:
            self._problem(file, _at(raw, "approval"), f"approval: {_reason(exc)}", VALUE_HINTS["approval"])
            return None
        return approval_gate(node_id, name, approval, timeout, raw.line)

    def _compensation(self, raw: PosDict, file: str, node_id: str, name: str, path: list[int]) -> ir.Task | None:
        text = raw["compensate"]
        if not isinstance(text, str) or not text.strip():
            hint = 'write compensate: "Delete the image you pushed." (an instruct step asked on rollback)'
            self._problem(file, _at(raw, "compensate"), "compensate: must be the text of an instruct step", hint)
            return None
        task = compensation_task(
            node_id, name, "default", text.strip(), COMPENSATION_ATTEMPTS, raw.line, protocol="instruct"
        )
        step = ir.TreeStep(action=f"undo {name}", path=path, index=0, last=True)
        return task.model_copy(update={"tree_step": step})

    def _budget(self, raw: PosDict, file: str) -> ir.Budget | None:
        value = raw.get("budget")
        if value is None:
            return None
        try:
            return budget_of(RawBudget.model_validate(value))
        except ValidationError as exc:
            self._problem(file, _at(raw, "budget"), f"budget: {_reason(exc)}", VALUE_HINTS["budget"])
            return None

    def _list(self, raw: PosDict, file: str, key: str, hint: str) -> list[Any]:
        value = raw.get(key)
        if value is None and (id(raw), key) in self.meant:
            return []  # the misspelled key is the problem, already said
        if not isinstance(value, list) or not value:
            what = "missing" if value is None else "empty" if value == [] else "not a list"
            self._problem(file, _at(raw, key), f"{key}: is {what}; it needs at least one entry", hint)
            return []
        return value

    def _keys(self, raw: PosDict, file: str, allowed: set[str]) -> None:
        for key in raw:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                self.meant.update((id(raw), meant) for meant in close)
                hint = did_you_mean(str(key), allowed) or "known keys: " + ", ".join(sorted(allowed))
                self._problem(file, _at(raw, key), f"unknown key '{key}'", hint)

    def _bad_type(self, raw: PosDict, file: str, kind: Any) -> None:
        if kind is None:
            self._problem(file, (raw.line, raw.column), "the node has no type:", TYPE_HINT)
        else:
            hint = did_you_mean(str(kind), KINDS) or TYPE_HINT
            self._problem(file, _at(raw, "type"), f"unknown node type '{kind}'", hint)

    # ------------------------------------------------------------------ the top level

    def _state(self, state: Any) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {"memory": {}, "constants": {}}
        if state is None:
            return found
        if not isinstance(state, PosDict):
            self._problem(
                self.path,
                _at(self.data, "state"),
                "state: must be a mapping",
                "write state: {var: {...}, const: {...}}",
            )
            return found
        for key, value in state.items():
            if key not in STATE_KEYS:
                hint = did_you_mean(str(key), STATE_KEYS) or "write var: and const: (or abtree's local: and global:)"
                self._problem(self.path, _at(state, key), f"unknown state scope '{key}'", hint)
            elif value is not None and not isinstance(value, dict):
                self._problem(self.path, _at(state, key), f"state.{key} must be a mapping of names to values", "")
            else:
                found[STATE_KEYS[key]].update(_plain(value or {}))
        return found

    def _running(self, value: Any) -> ir.Running:
        if value is None:
            return ir.Running()
        hint = "write running: {wait: 30s, max_wait: 10m, max_asks: 20}"
        if not isinstance(value, PosDict):
            self._problem(self.path, _at(self.data, "running"), "running: must be a mapping", hint)
            return ir.Running()
        self._keys(value, self.path, RUNNING_KEYS)
        pace = ir.Running()
        try:
            wait = parse_duration(value.get("wait", pace.wait_s))
            most = parse_duration(value.get("max_wait", max(pace.max_wait_s, wait)))
            asks = value.get("max_asks", pace.max_asks)
            if isinstance(asks, bool) or not isinstance(asks, int) or asks < 1:
                raise ValueError(f"max_asks must be a whole number of at least 1, not {asks!r}")
        except ValueError as exc:
            self._problem(self.path, _at(self.data, "running"), f"running: {exc}", hint)
            return pace
        return ir.Running(wait_s=wait, max_wait_s=max(most, wait), max_asks=asks)

    def _undeclared_constants(self, constants: dict[str, Any]) -> None:
        for text, file, (line, column) in self.texts:
            for match in NAMED.finditer(text):
                root = match.group(2).split(".")[0]
                if is_constant(match.group(1)) and root not in constants:
                    message = f"${match.group(1)}.{root} is not declared in state, so it never has a value"
                    hint = "add it under state: const: (abtree: global:); $CONST values cannot be written"
                    problem = Problem(file, line, column, message, hint, severity="warning")
                    if problem not in self.warnings:
                        self.warnings.append(problem)

    def _problem(self, file: str, at: tuple[int, int], message: str, hint: str) -> None:
        self.problems.append(Problem(file, at[0], at[1], message, hint))


def _at(raw: Any, key: str) -> tuple[int, int]:
    """Where a key of a loaded mapping is, else the mapping itself."""
    if isinstance(raw, PosDict):
        return raw.key_pos.get(key, (raw.line, raw.column))
    return (0, 0)


def _place(value: Any) -> tuple[int, int]:
    line = getattr(value, "line", 0)
    return (line, getattr(value, "column", 0)) if line else (0, 0)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _plain(value: Any) -> Any:
    """Loaded YAML as plain dicts and lists: the Plan carries it into the run's memory."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
    return str(exc)
