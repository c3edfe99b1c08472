"""Every registered spec language (`lang.dialects.DIALECTS`) has what using it needs, one test per
concern, so a new language is not half done: its shipped examples are its own and compile, the loader's
hint names it, inspect and dry-run describe every node of its plans, and a run of it is recorded in
tests/histories/ for test_replay. Each failure names the file to write."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agentrun.client.explain import dry_run_text, inspect_text
from agentrun.client.views import PLAN_VIEWS, view_of
from agentrun.client.views.base import View
from agentrun.lang import ir
from agentrun.lang.dialects import DIALECTS, Dialect
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.lang.params import bind

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = ROOT / "tests" / "histories"
NAMES = [dialect.NAME for dialect in DIALECTS]
EXAMPLES = [(dialect, example) for dialect in DIALECTS for example in dialect.EXAMPLES]


def package(dialect: Dialect) -> str:
    return f"agentrun/lang/dialects/{dialect.__name__.rsplit('.', 1)[-1]}/__init__.py"  # type: ignore[attr-defined]


def ids(value: Any) -> str:
    return value.NAME if hasattr(value, "NAME") else str(value)


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_every_dialect_ships_examples(dialect: Dialect):
    assert dialect.EXAMPLES, (
        f"dialect '{dialect.NAME}' ships no example: add one under examples/ and name it in EXAMPLES in {package(dialect)}"
    )
    for example in dialect.EXAMPLES:
        assert (ROOT / example).is_file(), f"{package(dialect)} names {example} in EXAMPLES: write that file"


@pytest.mark.parametrize(("dialect", "example"), EXAMPLES, ids=ids)
def test_each_example_is_its_own_dialects_and_no_others(dialect: Dialect, example: str):
    path = str(ROOT / example)
    text = Path(path).read_text()
    claims = [other.NAME for other in DIALECTS if other.detect(path, text)]
    assert claims == [dialect.NAME], (
        f"{example} is claimed by {claims or 'no dialect'}, not by '{dialect.NAME}' alone: "
        f"make detect() in {package(dialect)} (and in the packages of {claims}) tell them apart"
    )


@pytest.mark.parametrize(("dialect", "example"), EXAMPLES, ids=ids)
def test_each_example_compiles_with_its_dialects_facts(dialect: Dialect, example: str):
    try:
        plan = load(str(ROOT / example))
    except SpecError as exc:
        pytest.fail(f"{example} does not compile: fix it or {package(dialect)}:\n{exc}")
    assert plan.dialect == dialect.NAME, f"{package(dialect)}: compile() names the plan's dialect '{plan.dialect}'"
    assert plan.facts == dialect.FACTS, f"{package(dialect)}: compile() records other facts than its FACTS"


def test_plans_recorded_before_facts_read_the_facts_their_dialect_records_now():
    recorded = {dialect.NAME: dialect.FACTS for dialect in DIALECTS if dialect.NAME in ir.LEGACY_FACTS}
    assert recorded == ir.LEGACY_FACTS, (
        "a dialect records other facts than agentrun/lang/ir.py's LEGACY_FACTS gives the plans its runs "
        "recorded before plans carried facts: say there what those old plans should read"
    )


def test_the_hint_for_a_file_no_dialect_claims_names_every_dialect(tmp_path):
    spec = tmp_path / "mystery.yaml"
    spec.write_text("hello: world\n")
    with pytest.raises(SpecError) as raised:
        load(str(spec))
    hint = raised.value.problems[0].hint
    for dialect in DIALECTS:
        assert dialect.MARKS, (
            f"dialect '{dialect.NAME}' says nothing of what marks its files: set MARKS in {package(dialect)}"
        )
        assert dialect.MARKS in hint, f"the loader's hint leaves out '{dialect.NAME}': {hint}"


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_the_plan_view_a_dialect_names_is_registered(dialect: Dialect):
    name = dialect.FACTS.view
    if not name:
        return  # each node shows by its kind's view, which test_node_kinds checks
    assert name in PLAN_VIEWS, (
        f"dialect '{dialect.NAME}' shows its plans with the view '{name}', which is not registered: "
        f"write client/views/{name}.py and register it in PLAN_VIEWS in client/views/__init__.py"
    )


def missing_view(dialect: Dialect, example: str, node: ir.NodeBase, what: str, module: str) -> str:
    return (
        f"{example}: its {node.kind} node '{node.id}' has no {what} in a {dialect.NAME} plan: "
        f"write client/views/{module}.py and register it in client/views/__init__.py"
    )


@pytest.mark.parametrize(("dialect", "example"), EXAMPLES, ids=ids)
def test_inspect_and_dry_run_describe_every_node_of_each_example(dialect: Dialect, example: str):
    plan = load(str(ROOT / example))
    for node in plan.walk_all():
        try:
            view = view_of(node, plan.facts)  # type: ignore[arg-type]
        except KeyError as exc:  # the view of its kind, or the one its dialect's facts name
            pytest.fail(missing_view(dialect, example, node, "view", exc.args[0]))
        module = type(view).__module__.rsplit(".", 1)[-1]
        for method, what in (("describe", "inspect description"), ("dry_run", "dry-run description")):
            assert getattr(type(view), method) is not getattr(View, method), missing_view(
                dialect, example, node, what, module
            )
    assert "Steps" in inspect_text(plan)
    values = bind(plan, {p.name: _example_value(p) for p in plan.params.values() if p.required})
    assert dry_run_text(plan, values, ("http://127.0.0.1:1", {})).endswith("No agent was called.")


def _example_value(param: ir.Param) -> Any:
    if param.examples:
        return param.examples[0]
    values = {"integer": 1, "number": 1, "boolean": True, "json": "{}", "object": {}, "array": []}
    return values.get(param.type.lower(), "an example value")


def _recorded_dialects() -> dict[str, list[str]]:
    """The dialect of each recorded run's plan (its first event's input), by history file."""
    found: dict[str, list[str]] = {}
    for path in sorted(HISTORIES.glob("*.json")):
        started = json.loads(path.read_text())["events"][0].get("workflowExecutionStartedEventAttributes", {})
        for payload in started.get("input", {}).get("payloads", []):
            data = json.loads(base64.b64decode(payload["data"]))
            plan = data.get("plan") if isinstance(data, dict) else None
            if isinstance(plan, dict):
                found.setdefault(plan.get("dialect", ""), []).append(path.name)
    return found


@pytest.mark.parametrize("dialect", DIALECTS, ids=NAMES)
def test_every_dialect_has_a_recorded_history(dialect: Dialect):
    assert dialect.NAME in _recorded_dialects(), (
        f"no run of a {dialect.NAME} plan is recorded: write tests/histories/{dialect.NAME}.json "
        "(record it as tests/test_replay.py records the others)"
    )
