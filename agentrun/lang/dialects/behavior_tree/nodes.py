"""A behaviour tree's nodes compiled to the IR, from the top node down, `$ref`s followed.

sequence, selector and parallel become the IR's own kinds; an action becomes a sequence of one task
per step (protocol `evaluate` or `instruct`, the step's text as written, never a template). A node's
id is the names from the top joined by '/', a step's its action's id and '@' its number from 1; a
sibling of a name already taken gets '-2', '-3'. Every problem is collected, each in the file it is in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentrun.lang import ir
from agentrun.lang.dialects.behavior_tree.keys import (
    HINTS,
    NODE_TYPES,
    STEP_KINDS,
    TOP_KEYS,
    RawAction,
    RawComposite,
    RawNode,
    StepKind,
    explained,
    known_keys,
)
from agentrun.lang.dialects.behavior_tree.refs import REF, Located, Path, Refs, is_ref
from agentrun.lang.dialects.common_keys import (
    COMPENSATION_ATTEMPTS,
    approval_gate,
    budget_of,
    compensation_task,
    on_timeout_problem,
)
from agentrun.lang.durations import parse_duration
from agentrun.lang.errors import Problem, did_you_mean
from agentrun.lang.schema_errors import problems_from
from agentrun.lang.yamlpos import PosDict, PosList, position, text_line

# A tree of fragments used in many places grows with each use; past these it is a mistake.
MAX_NODES = 10_000
MAX_DEPTH = 64
# $CONST.x / $GLOBAL.x in a step's text: a constant it reads (the runtime shows its value).
CONSTANT = re.compile(r"\$(CONST|GLOBAL)\.([A-Za-z_][\w-]*)")
_COMPOSITES: dict[str, type[ir.Sequence | ir.Selector | ir.Parallel]] = {
    "sequence": ir.Sequence,
    "selector": ir.Selector,
    "parallel": ir.Parallel,
}
_DURATION_HINT = "write a duration like '90s', '30m' or '2h'"


@dataclass
class Slot:
    """Where a node is written: the mapping holding it and the key path to it, for problems about
    what is there (not a mapping, nothing at all)."""

    owner: Located
    path: tuple


@dataclass
class StepText:
    """A step's text and where it is, for the names it reads once the tree's state is known."""

    here: Located
    path: tuple
    text: str


@dataclass
class Walk:
    """The walk's place: the ancestors it is inside (for cycles) and the child indexes to here."""

    inside: Path = ()
    path: tuple[int, ...] = ()
    parent_id: str = ""
    label: str | None = None  # the tree file's name, for the walk's first node


@dataclass
class NodeCompiler:
    refs: Refs
    top_hint: str  # where state:, running: and a whole-run budget: go in this tree's layout
    problems: list[Problem] = field(init=False)
    texts: list[StepText] = field(default_factory=list)
    top: RawNode | None = None  # the top node's keys, when the file's root is a node
    count: int = 0

    def __post_init__(self) -> None:
        self.problems = self.refs.problems  # one list, in the order the walk meets them

    def node(self, slot: Slot, value: Any, walk: Walk, used: set[str], is_top: bool = False) -> ir.Node | None:
        """The IR of the node written at `slot`; None after its problems are recorded. `used` holds
        the ids its siblings took."""
        entered = self._enter(slot, value, walk)
        if entered is None:
            return None
        here, inside = entered
        kind = self._kind(here)
        raw = self._raw(here, kind) if kind else None
        name = raw.name if raw is not None else None
        # A node without a name is refused; its children are still checked, under a stand-in id.
        node_id = _unique("/".join(part for part in (walk.parent_id, name or "?") if part), used)
        items = self._items_of(here, kind, name or "", Walk(inside, walk.path, node_id))
        if is_top:
            self.top = raw
        elif raw is not None:
            self._misplaced(here, raw, name or str(kind))
        if raw is None or kind is None or name is None or items is None:
            return None
        return self._built(here, raw, kind, node_id, list(walk.path), items, is_top)

    # ---- reading a node ----

    def _enter(self, slot: Slot, value: Any, walk: Walk) -> tuple[Located, Path] | None:
        if not isinstance(value, dict):
            self._at(slot.owner, slot.path, _not_a_node(value), "write a node: type:, name: and steps: or children:")
            return None
        self.count += 1
        if self.count == MAX_NODES + 1:
            hint = "a $ref used in many places repeats its nodes each time; split the work into separate trees"
            self._at(slot.owner, slot.path, f"the tree grows to more than {MAX_NODES:,} nodes", hint)
        elif len(walk.path) == MAX_DEPTH + 1:
            hint = "flatten it: a sequence can hold many children; check for $refs that lead ever deeper"
            self._at(slot.owner, slot.path, f"the tree is nested more than {MAX_DEPTH} levels deep", hint)
        if self.count > MAX_NODES or len(walk.path) > MAX_DEPTH:
            return None
        beside = [key for key in value if key != REF] if is_ref(value) else []
        if beside:
            hint = f"a $ref stands for the node it points at: put '{beside[0]}:' on that node, or hold the $ref in a sequence that has it"
            self._at(Located(value, slot.owner.file), (beside[0],), f"'{beside[0]}:' beside $ref is not read", hint)
            return None
        entered = self.refs.follow(value, slot.owner.file, walk.inside, walk.label)
        if entered is not None and not isinstance(entered[0].value, PosDict):
            message = f"$ref '{value[REF]}' points at {_what(entered[0].value)}, not at a node"
            self._at(Located(value, slot.owner.file), (REF,), message, "point it at a mapping with type: and name:")
            return None
        return entered

    def _kind(self, here: Located) -> str | None:
        kind = here.value.get("type")
        if kind in NODE_TYPES:
            return kind
        if "type" not in here.value:
            self._at(here, (), "this node has no type:", _type_hint(here.value))
        else:
            hint = did_you_mean(str(kind), NODE_TYPES) or "write one of: " + ", ".join(NODE_TYPES)
            self._at(here, ("type",), f"unknown node type '{kind}'", hint)
        return None

    def _raw(self, here: Located, kind: str) -> RawNode | None:
        model = RawAction if kind == "action" else RawComposite
        problems: list[Problem] = []
        raw = None
        try:
            raw = model.model_validate(here.value)
        except ValidationError as exc:
            problems = [
                _misplaced_items(p, here.value, kind) for p in problems_from(exc, here.value, here.file, model, HINTS)
            ]
        if "name" not in here.value and not explained("name", here.value, known_keys(model)):
            hint = "add name: — a name like Run_Tests, which identifies the node in the run and its trace"
            problems.append(self._problem(here, (), f"this {kind} has no name:", hint))
        self.problems += problems
        return raw if not problems else None

    def _items_of(self, here: Located, kind: str | None, name: str, walk: Walk) -> list[ir.Node] | None:
        """The node's steps or children compiled. Under a node of no known type, children written
        as a list are still checked, so their own mistakes are said in the same run."""
        if kind == "action":
            return self._steps(here, name, walk.parent_id, walk.path)
        if kind is not None:
            return self._children(here, walk)
        if isinstance(here.value.get("children"), list) and here.value["children"]:
            self._children(here, walk)
        return None

    def _children(self, here: Located, walk: Walk) -> list[ir.Node] | None:
        items = self._items(here, "children")
        if items is None:
            return None
        used: set[str] = set()
        built = [
            self.node(Slot(here, ("children", i)), item, Walk(walk.inside, walk.path + (i,), walk.parent_id), used)
            for i, item in enumerate(items)
        ]
        return None if any(node is None for node in built) else [node for node in built if node is not None]

    def _steps(self, here: Located, name: str, action_id: str, path: tuple[int, ...]) -> list[ir.Node] | None:
        items = self._items(here, "steps")
        if items is None:
            return None
        read = [self._step(here, i, item) for i, item in enumerate(items)]
        steps = [step for step in read if step is not None]
        if len(steps) < len(read):
            return None
        tasks: list[ir.Node] = []
        for i, (kind, text) in enumerate(steps):
            tasks.append(
                ir.Task(
                    id=f"{action_id}@{i + 1}",
                    title=f"{name}: {kind} {i + 1}",
                    line=position(here.value, ("steps", i))[0],
                    agent="default",
                    prompt=text.strip(),
                    protocol=kind,
                    tree_step=ir.TreeStep(action=name, path=list(path), index=i, last=i == len(steps) - 1),
                )
            )
        return tasks

    def _items(self, here: Located, key: str) -> PosList | None:
        """The node's steps or children: a list of one or more; None after saying why not."""
        items = here.value.get(key)
        kind = here.value.get("type")
        what = f"{kind} '{here.value.get('name')}'" if isinstance(here.value.get("name"), str) else str(kind)
        if key not in here.value:
            model = RawAction if key == "steps" else RawComposite
            # `children:` on an action (or `steps:` on a composite) is said as the misplaced key.
            other = "children" if key == "steps" else "steps"
            if other not in here.value and not explained(key, here.value, known_keys(model)):
                self._at(here, (), f"{what} has no {key}:", _items_hint(key))
            return None
        if items is None or isinstance(items, list) and not items:  # `steps:` with nothing under it is None
            self._at(here, (key,), f"{what} has no {key}: the list is empty", _items_hint(key))
            return None
        return items if isinstance(items, PosList) else None  # another value is said by the model

    def _step(self, here: Located, i: int, item: Any) -> tuple[StepKind, str] | None:
        where = ("steps", i)
        hint = "write each step as - evaluate: <what must hold> or - instruct: <what to do>"
        if not isinstance(item, dict) or not item:
            self._at(here, where, f"step {i + 1} is not an evaluate: or instruct: step", hint)
            return None
        unknown = [key for key in item if key not in STEP_KINDS]
        for key in unknown:
            close = did_you_mean(str(key), STEP_KINDS)
            self._at(here, where + (key,), f"unknown key '{key}' in step {i + 1}", close or hint)
        kinds: list[StepKind] = [key for key in STEP_KINDS if key in item]
        if len(kinds) > 1:
            both = "a step is one or the other; give each its own step: - evaluate: … then - instruct: …"
            self._at(here, where + (kinds[1],), f"step {i + 1} has both evaluate: and instruct:", both)
        if unknown or len(kinds) != 1:
            return None
        kind, text = kinds[0], item[kinds[0]]
        if not isinstance(text, str) or not text.strip():
            said = "is empty" if text is None or isinstance(text, str) else "is not text"
            self._at(here, where + (kind,), f"the {kind} text of step {i + 1} {said}", _step_text_hint(kind))
            return None
        self.texts.append(StepText(Located(item, here.file), (kind,), text))
        return kind, text

    def _misplaced(self, here: Located, raw: RawNode, name: str) -> None:
        for key in TOP_KEYS:
            if getattr(raw, key) is not None and key != "budget":
                self._at(here, (key,), f"'{key}:' applies to the whole tree, not to node '{name}'", self.top_hint)

    # ---- the IR ----

    def _built(
        self, here: Located, raw: RawNode, kind: str, node_id: str, path: list[int], items: list[ir.Node], is_top: bool
    ) -> ir.Node:
        assert raw.name is not None  # a node without one is refused before it is built
        common: dict[str, Any] = dict(
            id=node_id,
            title=raw.name,
            line=here.value.line,
            children=items,
            retry=ir.Retry(attempts=raw.retries + 1, backoff="none", delay_s=0) if raw.retries else ir.Retry(),
            gate=self._gate(here, raw, node_id),
            # The top node's budget is the run's, in a file whose root is a node.
            budget=None if is_top else budget_of(raw.budget),
            compensation=self._compensation(here, raw, node_id, path),
        )
        if kind == "action":
            return ir.Sequence(**common)
        return _COMPOSITES[kind](**common)

    def _gate(self, here: Located, raw: RawNode, node_id: str) -> ir.Human | None:
        approval = raw.approval
        if approval is None:
            return None
        problem = on_timeout_problem(approval.on_timeout, [ir.APPROVE, ir.REJECT])
        if problem:
            self._at(here, ("approval", "on_timeout"), *problem)
        timeout = self.duration(here, approval.timeout, ("approval", "timeout"))
        assert raw.name is not None
        return approval_gate(node_id, raw.name, approval, timeout, position(here.value, ("approval",))[0])

    def _compensation(self, here: Located, raw: RawNode, node_id: str, path: list[int]) -> ir.Task | None:
        if raw.compensate is None:
            return None
        assert raw.name is not None
        line = position(here.value, ("compensate",))[0]
        task = compensation_task(
            node_id, raw.name, "default", raw.compensate.strip(), COMPENSATION_ATTEMPTS, line, protocol="instruct"
        )
        undo = ir.TreeStep(action=f"undo {raw.name}", path=path, index=0, last=True)
        return task.model_copy(update={"tree_step": undo})

    # ---- helpers ----

    def duration(self, here: Located, value: float | str | None, path: tuple) -> float | None:
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self._at(here, path, str(exc), _DURATION_HINT)
            return None

    def undeclared(self, constants: dict[str, Any]) -> list[Problem]:
        """Warnings for the $CONST names step texts read that the state does not declare."""
        found = []
        for step in self.texts:
            for match in CONSTANT.finditer(step.text):
                scope, root = match.groups()
                if root in constants:
                    continue
                line, column = _place(step, match.start())
                hint = did_you_mean(root, constants) or f"declare it under state: {_SCOPE[scope]}: ({root}: <value>)"
                message = f"${scope}.{root} is not declared in the tree's state: it can never have a value"
                found.append(Problem(step.here.file, line, column, message, hint, severity="warning"))
        return found

    def _at(self, here: Located, path: tuple, message: str, hint: str = "") -> None:
        self.problems.append(self._problem(here, path, message, hint))

    def _problem(self, here: Located, path: tuple, message: str, hint: str) -> Problem:
        line, column = position(here.value, path)
        return Problem(here.file, line, column, message, hint)


_SCOPE = {"CONST": "const", "GLOBAL": "global"}


def _unique(node_id: str, used: set[str]) -> str:
    """`node_id`, or with '-2', '-3' after it when a sibling took it."""
    candidate, n = node_id, 1
    while candidate in used:
        n += 1
        candidate = f"{node_id}-{n}"
    used.add(candidate)
    return candidate


def _place(step: StepText, offset: int) -> tuple[int, int]:
    """(line, column) of a name in a step's text: its own line in a block of text, else the key's."""
    key_line, key_column = position(step.here.value, step.path)
    first = text_line(step.here.value, step.path)
    if first and first != key_line:
        return first + step.text.count("\n", 0, offset), 1
    return key_line, key_column


def _not_a_node(value: Any) -> str:
    return f"a node must be a mapping, not {_what(value)}"


def _what(value: Any) -> str:
    """What kind of value it is, never the value: a $ref may point into a file of secrets."""
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    return "true or false" if isinstance(value, bool) else "a number" if isinstance(value, int | float) else "a text"


def _type_hint(node: dict[str, Any]) -> str:
    if "steps" in node:
        return "add type: action"
    if "children" in node:
        return "add type: sequence, selector or parallel"
    return "add type: action (with steps:) or type: sequence, selector or parallel (with children:)"


def _items_hint(key: str) -> str:
    if key == "steps":
        return "list at least one step: - evaluate: <what must hold> or - instruct: <what to do>"
    return "list at least one child node under children:, or make it an action with steps:"


def _step_text_hint(kind: str) -> str:
    if kind == "evaluate":
        return "write the condition the agent judges true or false: - evaluate: $VAR.tests_passed is true"
    return "write the work the agent does: - instruct: Run the tests and store the result at $VAR.tests_passed"


def _misplaced_items(problem: Problem, node: dict[str, Any], kind: str) -> Problem:
    """An action's `children:` or a composite's `steps:` is a wrong type: or a wrong indentation."""
    wrong = "children" if kind == "action" else "steps"
    if problem.message != f"unknown key '{wrong}'":
        return problem
    owner = "actions (type: action)" if wrong == "steps" else "sequence, selector and parallel nodes"
    hint = f"'{wrong}:' belongs to {owner}; check this node's type: '{node.get('type')}', or the indentation"
    return Problem(problem.file, problem.line, problem.column, problem.message, hint)
