"""Workflow code changes a run's state only through methods of the state's own models, and node
handlers see the narrow Runtime.

A run's state is what its queries show and what a continued or replayed run carries on from: the
RunState and the models it holds (TaskState rows, Drive, MapSummary, Note, SubgraphRun,
SpawnedAgent, a goal's GoalSupervision and its attempts, CompensationEntry, ToolUse, ...). When
every change to it is a named method of one of those models, what a step may change is read in one
place. So a workflow module assigns (or augments, or deletes) attributes of `self` only, and items of
its own locals and of `self.<name>`; an attribute of anything else, or of an attribute of `self`,
is a part of the state a method or a lookup handed out, unless NOT_STATE names it as something else.
The workflow modules are read here as text, the way test_determinism reads them, so a write slipped
in anywhere fails this test whatever the rest of the suite happens to run. Each check also runs on
a planted slip, so a checker that finds nothing cannot pass unnoticed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

WORKFLOWS = ROOT / "agentrun" / "workflows"
WORKFLOW_CODE = sorted(WORKFLOWS.rglob("*.py"))
HANDLER_CODE = sorted((WORKFLOWS / "nodes").glob("*.py"))
# The names a run's state goes by in workflow code: a variable, or an attribute of whatever holds it.
STATE_NAMES = {"state", "run_state"}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add"}


def _from_state(node: ast.expr) -> bool:
    """Whether `node` is a RunState, or reached from one through attributes and subscripts."""
    while True:
        if isinstance(node, ast.Name):
            return node.id in STATE_NAMES
        if isinstance(node, ast.Attribute):
            if node.attr in STATE_NAMES:
                return True
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return False


def _written(target: ast.expr) -> list[ast.expr]:
    """The places an assignment or `del` target writes into: its object, for an attribute or an item."""
    if isinstance(target, ast.Tuple | ast.List):
        return [w for elt in target.elts for w in _written(elt)]
    if isinstance(target, ast.Starred):
        return _written(target.value)
    if isinstance(target, ast.Attribute | ast.Subscript):
        return [target.value]
    return []


def state_writes(source: str, name: str = "<source>") -> list[str]:
    """Each line of `source` that changes a run's state other than through a RunState method."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target] if not isinstance(node, ast.AnnAssign) or node.value is not None else []
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if _from_state(node.func.value):
                found.append((node.lineno, f"{name}:{node.lineno}: {ast.unparse(node.func)}()"))
            continue
        else:
            continue
        for target in targets:
            if any(_from_state(place) for place in _written(target)):
                found.append((node.lineno, f"{name}:{node.lineno}: {ast.unparse(target)} written"))
    return [text for _, text in sorted(found)]


@pytest.mark.parametrize("path", WORKFLOW_CODE, ids=lambda p: str(p.relative_to(WORKFLOWS)))
def test_workflow_code_writes_the_run_state_only_through_its_methods(path: Path):
    assert state_writes(path.read_text(), str(path.relative_to(ROOT))) == []


def test_the_check_finds_direct_writes():
    planted = """
def handler(engine, state, self):
    engine.state.memory["k"] = 1
    state.iteration_count += 1
    self.state.warnings.append("w")
    engine.state.tasks[key].status = "failed"
    state.current_task, other = None, 2
    del state.memory["k"]
    self.run_state.errors.extend(["e"])
    state.tool_calls.setdefault("k", []).append(use)
    state.visit("k")
    self.state = state
    memory = engine.state.memory
"""
    assert state_writes(planted) == [
        "<source>:3: engine.state.memory['k'] written",
        "<source>:4: state.iteration_count written",
        "<source>:5: self.state.warnings.append()",
        "<source>:6: engine.state.tasks[key].status written",
        "<source>:7: (state.current_task, other) written",
        "<source>:8: state.memory['k'] written",
        "<source>:9: self.run_state.errors.extend()",
        "<source>:10: state.tool_calls.setdefault()",
    ]


# What workflow modules write that is not a run's state: (module, the start of the written
# expression) -> what it is. An entry no write uses fails test_every_exemption_is_used.
NOT_STATE: dict[tuple[str, str], str] = {
    ("activity_calls.py", "run."): "workflow.instance(), the workflow object: its count of scheduled activities",
    ("agent_run.py", "interpreter."): "the Interpreter the workflow builds: its journal, continuing, driven",
    ("agent_run.py", "self.conversation."): "the workflow's Conversation: transcripts carried over, a rollback",
    ("batch_run.py", "conversation."): "the batch's Conversation: the transcripts its run handed it",
    ("batch_run.py", "outcome."): "Outcome, a dataclass of the batch's own, read into its BatchResult",
    ("conversation.py", "call."): "an AgentCall, the activity input being built",
    ("local_tools.py", "box.conv."): "Conversation.saved: save_to_memory's pairs, which a graph node takes",
    ("nodes/graph_memory.py", "engine.conversation."): "Conversation.saved, taken by the graph node it was for",
    ("reuse.py", "reuse.writes"): "Reuse's own log of a taken-over step's blackboard writes, for a fork of a fork",
    ("tool_loop.py", "self.conv."): "Conversation.tool_calls_made, the count max_tool_calls is checked against",
    ("tracing.py", "EVENTS."): "the events logger, set up once when the module loads",
}


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _owned(place: ast.expr, aliases: dict[str, ast.expr]) -> bool:
    """Whether `place` (what an item write or a mutating call changes) is a local's value or one
    of self's own attributes, following items and a local bound to an attribute or an item."""
    seen: set[str] = set()
    while True:
        if isinstance(place, ast.Subscript):
            place = place.value
        elif isinstance(place, ast.Call) and isinstance(place.func, ast.Attribute):
            place = place.func.value  # setdefault(k, {})[j] writes into what setdefault was called on
        elif isinstance(place, ast.Name) and place.id in aliases and place.id not in seen:
            seen.add(place.id)
            place = aliases[place.id]
        elif isinstance(place, ast.IfExp):
            return _owned(place.body, aliases) and _owned(place.orelse, aliases)
        else:
            return isinstance(place, ast.Name) or (isinstance(place, ast.Attribute) and _is_self(place.value))


def _aliases(scope: ast.AST) -> dict[str, ast.expr]:
    """The locals of `scope` bound to an attribute or an item (`counts = self.summary.counts`)."""
    found: dict[str, ast.expr] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.Subscript):
            found.update({t.id: node.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign | ast.Delete):
        return [t for target in node.targets for t in _flat(target)]
    if isinstance(node, ast.AugAssign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
        return _flat(node.target)
    return []


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for elt in target.elts for t in _flat(elt)]
    return _flat(target.value) if isinstance(target, ast.Starred) else [target]


def _part_write(node: ast.AST, aliases: dict[str, ast.expr]) -> ast.expr | None:
    """The expression `node` writes through when it changes something other than self's own
    attributes and items or a local's: an attribute target, an item target, a mutating call."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        return None if _owned(node.func.value, aliases) else node.func
    for target in _targets(node):
        if isinstance(target, ast.Attribute) and not _is_self(target.value):
            return target
        if isinstance(target, ast.Subscript) and not _owned(target.value, aliases):
            return target
    return None


def part_writes(source: str, name: str = "<source>", exempt: tuple[str, ...] = ()) -> list[str]:
    """Each line of `source` that writes a part of something other than `self` or a local, unless
    it starts with one of `exempt`: `x.attr = v`, `self.a.b += v`, `x.attr[k] = v`, `x.a.append(v)`."""
    tree = ast.parse(source, name)
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    found: set[tuple[int, str]] = set()
    for scope in [tree, *scopes]:
        aliases = _aliases(scope) if scope is not tree else {}
        for node in ast.walk(scope):
            written = _part_write(node, aliases)
            text = ast.unparse(written) if written is not None else ""
            if written is not None and not text.startswith(exempt):
                kind = "()" if isinstance(node, ast.Call) else " written"
                found.add((node.lineno, f"{name}:{node.lineno}: {text}{kind}"))
    return [text for _, text in sorted(found)]


def _module(path: Path) -> str:
    return path.relative_to(WORKFLOWS).as_posix()


def _exempt(module: str) -> tuple[str, ...]:
    return tuple(prefix for (owner, prefix) in NOT_STATE if owner == module)


@pytest.mark.parametrize("path", WORKFLOW_CODE, ids=_module)
def test_workflow_code_writes_parts_of_the_state_only_through_their_methods(path: Path):
    assert part_writes(path.read_text(), str(path.relative_to(ROOT)), _exempt(_module(path))) == []


@pytest.mark.parametrize(("module", "prefix"), sorted(NOT_STATE))
def test_every_exemption_is_used(module: str, prefix: str):
    """An exemption no write needs would let a later write of the state through unseen."""
    others = tuple(p for p in _exempt(module) if p != prefix)
    found = part_writes((WORKFLOWS / module).read_text(), module, others)
    assert any(f": {prefix}" in line for line in found)


def test_the_check_finds_writes_to_parts_of_the_state():
    planted = """
def handler(engine, task, row, note, summary, record, b, y):
    task.iterations += 1
    row.status = "x"
    self.drive.phase = "idle"
    note.handed_to = b
    summary.counts["k"] = 1
    record.failures.append(n)
    self.waiting = {}
    x = y.attr
    self.waiting[key] = x
    results[0] = x
    results.append(x)
    self.errors.append(x)
    counts = self.summary.counts
    counts["k"] += 1
    del row.error
    engine.ran.setdefault("k", []).append(row)
    self.summary.failures[0] = x
    own = self.seen
    own["k"] = 1
    (a if y else b).add(x)
    (a if y else row.seen).add(x)
"""
    assert part_writes(planted) == [
        "<source>:3: task.iterations written",
        "<source>:4: row.status written",
        "<source>:5: self.drive.phase written",
        "<source>:6: note.handed_to written",
        "<source>:7: summary.counts['k'] written",
        "<source>:8: record.failures.append()",
        "<source>:16: counts['k'] written",
        "<source>:17: row.error written",
        "<source>:18: engine.ran.setdefault('k', []).append()",
        "<source>:18: engine.ran.setdefault()",
        "<source>:19: self.summary.failures[0] written",
        "<source>:23: (a if y else row.seen).add()",
    ]


def test_an_exemption_covers_its_module_only():
    source = "def f(run, runner):\n    run.activities_scheduled += 1\n    runner.count = 1\n"
    assert part_writes(source, "a.py", _exempt("activity_calls.py")) == ["a.py:3: runner.count written"]
    assert part_writes(source, "a.py", _exempt("driven.py")) == [
        "a.py:2: run.activities_scheduled written",
        "a.py:3: runner.count written",
    ]


def interpreter_uses(source: str, name: str = "<source>") -> list[str]:
    """Each line of a handler module that imports the Interpreter or names it in an annotation."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.ImportFrom):
            if node.module == "agentrun.workflows.interpreter" or any(a.name == "Interpreter" for a in node.names):
                found.append((node.lineno, f"{name}:{node.lineno}: imports from {node.module}"))
        elif isinstance(node, ast.Import):
            if any(a.name == "agentrun.workflows.interpreter" for a in node.names):
                found.append((node.lineno, f"{name}:{node.lineno}: imports agentrun.workflows.interpreter"))
        elif isinstance(node, ast.arg | ast.AnnAssign | ast.FunctionDef | ast.AsyncFunctionDef):
            annotation = node.returns if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else node.annotation
            if annotation is not None and "Interpreter" in ast.unparse(annotation):
                found.append((node.lineno, f"{name}:{node.lineno}: annotated {ast.unparse(annotation)}"))
    return [text for _, text in sorted(found)]


@pytest.mark.parametrize("path", HANDLER_CODE, ids=lambda p: p.name)
def test_handlers_see_the_runtime_not_the_interpreter(path: Path):
    assert interpreter_uses(path.read_text(), str(path.relative_to(ROOT))) == []


def test_the_check_finds_the_interpreter_in_a_handler():
    planted = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from agentrun.workflows.interpreter import Interpreter
import agentrun.workflows.interpreter

async def execute(engine: Interpreter, node, scope) -> None:
    held: "Interpreter | None" = None

def _engine() -> Interpreter: ...
"""
    assert interpreter_uses(planted) == [
        "<source>:4: imports from agentrun.workflows.interpreter",
        "<source>:5: imports agentrun.workflows.interpreter",
        "<source>:7: annotated Interpreter",
        "<source>:8: annotated 'Interpreter | None'",
        "<source>:10: annotated Interpreter",
    ]
