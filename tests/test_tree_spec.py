"""Behaviour-tree files as a user writes them: both layouts in YAML and JSON, `$ref` fragments,
and each mistake said once with file:line:column and a hint. Spec-level: nothing here runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spec import ir
from spec.errors import SpecError
from spec.load import load
from tests.conftest import write_spec
from tests.specs import run_cli

ABTREE = """\
name: deploy
version: 1.0.0
description: Test, then push.
state:
  local: {tests_passed: null, coverage: null}
  global: {threshold: 80}
tree:
  type: sequence
  name: Deploy_Service
  children:
    - type: action
      name: Run_Tests
      retries: 2
      steps:
        - instruct: |
            Run tests. Store coverage at $VAR.coverage.
        - evaluate: $LOCAL.coverage is above $GLOBAL.threshold.
    - type: selector
      name: Push
      children:
        - {type: action, name: Fast, steps: [{instruct: push fast}]}
        - {type: action, name: Fast, steps: [{instruct: push again}]}
"""

BEHAVIORS_SH = {
    "type": "parallel",
    "name": "Checks",
    "state": {"var": {"n": 0}, "const": {"limit": 3}},
    "children": [
        {"type": "action", "name": "Lint", "steps": [{"instruct": "lint"}]},
        {"type": "action", "name": "Unit", "steps": [{"evaluate": "$VAR.n < $CONST.limit"}], "retries": 1},
    ],
}


def one_problem(path: Path) -> str:
    with pytest.raises(SpecError) as caught:
        load(str(path))
    assert len(caught.value.problems) == 1, str(caught.value)
    return str(caught.value)


def test_the_abtree_layout_compiles_to_sequences_of_step_tasks(tmp_path):
    plan = load(str(write_spec(tmp_path, ABTREE, "deploy.yaml")))
    assert (plan.name, plan.version, plan.dialect) == ("deploy", "1.0.0", "behavior_tree")
    assert plan.memory == {"tests_passed": None, "coverage": None} and plan.constants == {"threshold": 80}
    root = plan.root
    assert isinstance(root, ir.Sequence) and root.id == "Deploy_Service"
    tests, push = root.children
    assert isinstance(tests, ir.Sequence) and tests.id == "Deploy_Service/Run_Tests" and tests.retry.attempts == 3
    first, second = tests.children
    assert isinstance(first, ir.Task) and isinstance(second, ir.Task)
    assert (first.id, first.protocol, first.prompt) == (
        "Deploy_Service/Run_Tests@1",
        "instruct",
        "Run tests. Store coverage at $VAR.coverage.",
    )
    assert first.tree_step == ir.TreeStep(action="Run_Tests", path=[0], index=0, last=False)
    assert second.protocol == "evaluate" and second.tree_step and second.tree_step.last
    assert isinstance(push, ir.Selector)
    assert [c.id for c in push.children] == ["Deploy_Service/Push/Fast", "Deploy_Service/Push/Fast-2"]
    fast = push.children[1]
    assert isinstance(fast, ir.Sequence) and fast.children[0].tree_step == ir.TreeStep(action="Fast", path=[1, 1])


def test_the_behaviors_sh_layout_loads_from_json(tmp_path):
    plan = load(str(write_spec(tmp_path, json.dumps(BEHAVIORS_SH), "checks.json")))
    assert plan.name == "Checks" and isinstance(plan.root, ir.Parallel) and plan.root.wait == "all"
    assert plan.memory == {"n": 0} and plan.constants == {"limit": 3}
    assert [leaf.id for leaf in plan.leaves()] == ["Checks/Lint@1", "Checks/Unit@1"]


def test_refs_are_pasted_in_relative_to_the_file_that_holds_them(tmp_path):
    (tmp_path / "parts").mkdir()
    write_spec(tmp_path / "parts", "type: sequence\nname: Checks\nchildren:\n  - $ref: lint.yaml\n", "checks.yaml")
    write_spec(tmp_path / "parts", "type: action\nname: Lint\nsteps: [{instruct: lint}]\n", "lint.yaml")
    library = {"nodes": {"unit": {"type": "action", "name": "Unit", "steps": [{"instruct": "unit"}]}}}
    write_spec(tmp_path, json.dumps(library), "library.json")
    tree = "name: t\nversion: '1'\ntree:\n  type: sequence\n  name: Root\n  children:\n"
    tree += "    - $ref: ./parts/checks.yaml\n    - $ref: library.json#/nodes/unit\n"
    plan = load(str(write_spec(tmp_path, tree)))
    assert [leaf.id for leaf in plan.leaves()] == ["Root/Checks/Lint@1", "Root/Unit@1"]


def test_a_cyclic_ref_is_an_error_naming_the_cycle_not_a_hang(tmp_path):
    write_spec(tmp_path, "type: sequence\nname: A\nchildren:\n  - $ref: b.yaml\n", "a.yaml")
    write_spec(tmp_path, "type: sequence\nname: B\nchildren:\n  - $ref: a.yaml\n", "b.yaml")
    tree = write_spec(tmp_path, "name: t\nversion: '1'\ntree:\n  $ref: a.yaml\n")
    began = time.monotonic()
    message = one_problem(tree)
    assert time.monotonic() - began < 5
    assert "b.yaml:4:5: error: cyclic $ref: a.yaml -> b.yaml -> a.yaml" in message
    self_ref = write_spec(
        tmp_path,
        "name: s\nversion: '1'\ntree:\n  type: sequence\n  name: S\n  children:\n    - $ref: '#/tree'\n",
        "self.yaml",
    )
    assert "cyclic $ref: self.yaml#/tree -> self.yaml#/tree" in one_problem(self_ref)


TREE_HEAD = "name: t\nversion: '1'\ntree:\n  type: sequence\n  name: Root\n  children:\n"


@pytest.mark.parametrize(
    ("child", "where", "message", "hint"),
    [
        (
            "    - type: selecter\n      name: A\n      children: [x]\n",
            "7:7",
            "unknown node type 'selecter'",
            "did you mean 'selector'?",
        ),
        (
            "    - type: action\n      name: A\n      retries: 0\n      steps: [{instruct: a}]\n",
            "9:7",
            "retries must be an integer of at least 1, not 0",
            "N more attempts",
        ),
        (
            "    - type: action\n      name: A\n      retries: true\n      steps: [{instruct: a}]\n",
            "9:7",
            "not True",
            "whole number",
        ),
        (
            "    - type: action\n      name: a/b\n      steps: [{instruct: a}]\n",
            "8:7",
            "the name 'a/b' contains '/' or '@'",
            "use _ or -",
        ),
        ("    - type: action\n      name: A\n      steps: []\n", "9:7", "steps: is empty", "{instruct: ...}"),
        (
            "    - type: sequence\n      name: A\n      childern: []\n",
            "9:7",
            "unknown key 'childern'",
            "did you mean 'children'?",
        ),
        (
            "    - type: action\n      name: A\n      steps: [{instrukt: a}]\n",
            "9:15",
            "a step is exactly one of evaluate: or instruct:",
            "did you mean 'instruct'?",
        ),
        (
            "    - type: action\n      name: A\n      steps: [{instruct: a}]\n     - type: action\n",
            "10:6",
            "YAML syntax",
            "indentation",
        ),
    ],
    ids=["type", "retries-0", "retries-bool", "name", "steps", "key", "step", "indent"],
)
def test_each_mistake_is_one_problem_with_its_place_and_a_hint(tmp_path, child, where, message, hint):
    said = one_problem(write_spec(tmp_path, TREE_HEAD + child))
    assert f"spec.yaml:{where}: error: " in said and message in said and hint in said, said


def test_a_mistake_in_a_fragment_points_into_the_fragment(tmp_path):
    write_spec(tmp_path, "type: action\nname: Frag\nsteps:\n  - evaluate: ''\n", "frag.yaml")
    said = one_problem(write_spec(tmp_path, TREE_HEAD + "    - $ref: frag.yaml\n"))
    assert "frag.yaml:4:5: error: the evaluate step's text is empty" in said


def test_validate_inspect_and_dry_run_show_a_tree(tmp_path):
    tree = write_spec(tmp_path, ABTREE, "deploy.yaml")
    valid = run_cli("validate", str(tree))
    assert valid.returncode == 0 and "valid behavior_tree spec 'deploy' with 4 task(s)" in valid.stdout
    drawn = run_cli("inspect", str(tree)).stdout
    assert "  sequence Deploy_Service\n  ├─ action Run_Tests (retries 2)\n" in drawn
    assert "  │     2. evaluate: $LOCAL.coverage is above $GLOBAL.threshold." in drawn
    assert "  $CONST.threshold = 80 (read-only)" in drawn
    dry = run_cli("dry-run", str(tree), "--agent", "openai:m").stdout
    assert "- $LOCAL.coverage = null\n" in dry.replace("       | ", "") and "- $GLOBAL.threshold = 80" in dry
    bad = write_spec(tmp_path, TREE_HEAD + "    - {type: action, name: A, steps: []}\n")
    refused = run_cli("validate", str(bad))
    assert refused.returncode == 2 and f"{bad}:7:" in refused.stderr


def test_a_const_no_state_declares_is_warned_about(tmp_path):
    tree = TREE_HEAD + "    - {type: action, name: A, steps: [{evaluate: $CONST.limit is 3}]}\n"
    plan = load(str(write_spec(tmp_path, tree)))
    assert any("$CONST.limit is not declared in state" in w for w in plan.warnings)
