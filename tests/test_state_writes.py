"""Only RunState's own methods write a run's state, and node handlers see the narrow Runtime.

A run's state is what its queries show and what a continued or replayed run carries on from: when
every change to it is a named RunState method, what a step may change is read in one place. The
workflow modules are read here as text, the way test_determinism reads them, so a write slipped
in anywhere fails this test whatever the rest of the suite happens to run. Each check also runs
on a planted slip, so a checker that finds nothing cannot pass unnoticed.
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
