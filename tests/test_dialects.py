"""Every registered language is complete: its examples are its own, they compile, inspect and dry-run
show them, the "which language" hint names it, and a recorded history replays it. A failure names the
file to write, as test_node_kinds.py does for node kinds."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from agentrun.lang import ir
from agentrun.lang.check import check
from agentrun.lang.dialects import DIALECTS, Dialect
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.lang.source import read_text
from agentrun.lang.yamlpos import yaml_text
from tests.conftest import HISTORIES, ROOT

EXAMPLES = ROOT / "examples"
VIEWS = ROOT / "agentrun" / "explain" / "views"
NAMES = [d.NAME for d in DIALECTS]


def package(dialect: Dialect) -> str:
    return f"agentrun/lang/dialects/{dialect.__name__.rsplit('.', 1)[-1]}/__init__.py"  # type: ignore[attr-defined]


def examples(dialect: Dialect) -> list[Path]:
    return sorted({path for pattern in dialect.EXAMPLES for path in EXAMPLES.glob(pattern)})


def recorded_dialects() -> dict[str, str]:
    """The language of each recorded history, read from its run's input."""
    found = {}
    for path in sorted(HISTORIES.glob("*.json")):
        started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
        data = base64.b64decode(started["input"]["payloads"][0]["data"]).decode()
        match = re.search(r'"dialect":\s*"([^"]+)"', data)
        if match:
            found[path.name] = match.group(1)
    return found


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_a_dialect_says_what_marks_its_files_and_what_its_plans_are_like(dialect: Dialect):
    assert dialect.NAME, f"{package(dialect)}: give it NAME, the language's name people see"
    assert dialect.MARKS, f"{package(dialect)}: give it MARKS, what marks a file as this language's"
    assert isinstance(dialect.TRAITS, ir.Traits), f"{package(dialect)}: give it TRAITS = ir.Traits(...)"
    recorded = ir.RECORDED_TRAITS.get(dialect.NAME, dialect.TRAITS)
    assert recorded == dialect.TRAITS, f"agentrun/lang/ir.py: RECORDED_TRAITS['{dialect.NAME}'] differs from TRAITS"


def test_the_which_language_hint_names_every_dialect(tmp_path):
    stray = tmp_path / "stray.yaml"
    stray.write_text("colour: blue\n")
    with pytest.raises(SpecError) as refused:
        load(str(stray))
    said = str(refused.value)
    assert "cannot tell which spec language this file is in" in said
    for dialect in DIALECTS:
        assert dialect.MARKS in said, f"the hint leaves out {dialect.NAME}: its MARKS in {package(dialect)}"


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_each_example_is_claimed_by_its_dialect_alone(dialect: Dialect):
    shipped = examples(dialect)
    assert shipped, (
        f"{dialect.NAME} ships no example: write one under examples/ and name it in EXAMPLES in {package(dialect)}"
    )
    for path in shipped:
        text = yaml_text(str(path), read_text(str(path)))
        claims = [d.NAME for d in DIALECTS if d.detect(str(path), text)]
        assert claims == [dialect.NAME], f"{path.relative_to(ROOT)} is claimed by {claims}, not {dialect.NAME} alone"


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_each_example_compiles_with_the_dialects_traits(dialect: Dialect):
    for path in examples(dialect):
        plan = load(str(path))
        check(plan)
        assert (plan.dialect, plan.traits) == (dialect.NAME, dialect.TRAITS), path


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_inspect_and_dry_run_show_each_example(dialect: Dialect):
    plans = [(path, load(str(path))) for path in examples(dialect)]
    needed = {f"{node.kind}.py" for _, plan in plans for node in plan.walk_all()}
    if any(plan.traits.tree for _, plan in plans):
        needed.add("tree.py")  # a tree's nodes are drawn in the tree's words
    missing = sorted(name for name in needed if not (VIEWS / name).exists())
    assert not missing, f"{dialect.NAME} needs views: write " + ", ".join(
        f"agentrun/explain/views/{m}" for m in missing
    )

    from agentrun.explain import describe as explain  # after the check above: a missing view fails this import

    for path, plan in plans:
        shown = _inspect(explain, path)
        assert f"Workflow: {plan.name}" in shown and "\nSteps\n" in shown, f"inspect {path.relative_to(ROOT)}"
        assert _dry_run(explain, path, plan).strip(), f"dry-run {path.relative_to(ROOT)} shows nothing"


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_a_recorded_history_replays_the_dialect(dialect: Dialect):
    assert dialect.NAME in recorded_dialects().values(), (
        f"no recorded history of a {dialect.NAME} run: record tests/histories/{dialect.NAME}.json "
        "(see tests/test_replay.py: a spec and the way it is run)"
    )


def _inspect(explain, path: Path) -> str:
    console = Console(file=io.StringIO(), width=200)
    assert explain.inspect_command(str(path), console, "text") == 0
    return console.file.getvalue()  # type: ignore[attr-defined]


SAMPLE = {"integer": "1", "number": "1", "boolean": "true", "array": "[]", "object": "{}", "json": "{}"}


def _dry_run(explain, path: Path, plan: ir.Plan) -> str:
    import argparse

    console = Console(file=io.StringIO(), width=200)
    given = [f"{p.name}={SAMPLE.get(p.type, 'an example')}" for p in plan.params.values() if p.required]
    args = argparse.Namespace(spec=str(path), param=given, agent=[])
    assert explain.dry_run_command(args, console) == 0
    return console.file.getvalue()  # type: ignore[attr-defined]
