"""Loading task-tree specs: order, inheritance, params, and the errors users get for bad input."""

from __future__ import annotations

import pytest

from agentrun.lang import ir, params
from agentrun.lang.check import resolve_task
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from tests.conftest import write_spec
from tests.specs import at, error, plan_of

TREE = """\
name: build-project
params:
  target: {range: string, required: true, examples: [prod]}
  retries: {range: integer}
system_instructions: "Be brief."
subtasks:
  A:
    instructions: "A for {{ target }}"
    subtasks:
      B:
        instructions: "B"
        system_instructions: "Be thorough."
        subtasks:
          D: {instructions: "D"}
          E: {instructions: "E"}
      C:
        subtasks:
          F: {instructions: "F"}
"""


def problems(tmp_path, text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load(str(write_spec(tmp_path, text)))
    return [str(p) for p in info.value.problems]


def test_depth_first_order_and_system_inheritance(tmp_path):
    plan = load(str(write_spec(tmp_path, TREE)))
    leaves = plan.leaves()
    assert [leaf.id for leaf in leaves] == ["A", "A.B", "A.B.D", "A.B.E", "A.C.F"]
    systems = {leaf.id: leaf.system for leaf in leaves}
    assert systems == {
        "A": "Be brief.",
        "A.B": "Be thorough.",
        "A.B.D": "Be thorough.",
        "A.B.E": "Be thorough.",
        "A.C.F": "Be brief.",
    }
    assert plan.params["target"].required and plan.params["retries"].type == "integer"


def test_misspelled_key_names_line_and_suggests(tmp_path):
    text = TREE.replace('D: {instructions: "D"}', 'D: {instructions: "D", sucess_criteria: {python: "result=1"}}')
    [message] = problems(tmp_path, text)
    assert "spec.yaml:14:" in message and "unknown key 'sucess_criteria'" in message
    assert "did you mean 'success_criteria'?" in message


def test_wrong_indentation_is_a_syntax_error_with_position(tmp_path):
    text = "name: x\nsubtasks:\n  a:\n    instructions: hi\n   b:\n    instructions: there\n"
    [message] = problems(tmp_path, text)
    assert message.startswith(str(tmp_path / "spec.yaml") + ":5:") and "YAML syntax" in message
    assert "hint: check the indentation" in message


def test_an_undeclared_template_variable_is_a_warning_before_any_run(tmp_path):
    """cyberian renders a name nothing gives as empty; the run goes on, but validate says so."""
    text = TREE.replace('"B"', '"B for {{ targte }}"')
    [warning] = plan_of(tmp_path, text).warnings
    assert (
        ":11:9: warning: undeclared template variable 'targte': renders empty unless given with -p targte=…" in warning
    )
    assert "did you mean 'target'?" in warning


def test_template_syntax_error(tmp_path):
    [message] = problems(tmp_path, 'subtasks:\n  a:\n    instructions: "{{ broken"\n')
    assert ":3:" in message and "template syntax" in message


def test_duplicate_key_and_success_criteria_forms(tmp_path):
    dup = problems(tmp_path, "subtasks:\n  a: {instructions: x}\n  a: {instructions: y}\n")
    assert "duplicate key 'a'" in dup[0]
    both = problems(tmp_path, "subtasks:\n  a:\n    instructions: x\n    success_criteria: {max_retries: 1}\n")
    assert "exactly one of 'python' or 'script'" in both[0]
    missing = problems(tmp_path, "subtasks:\n  a:\n    instructions: x\n    success_criteria: {script: nope.py}\n")
    assert "'nope.py' does not exist" in missing[0] and ":4:" in missing[0]


def test_unknown_language_and_not_a_mapping(tmp_path):
    assert "cannot tell which spec language" in problems(tmp_path, "hello: world\n")[0]
    assert "YAML mapping" in problems(tmp_path, "- a\n- b\n")[0]


def test_loop_until_needs_status_and_provider_keys_are_strict(tmp_path):
    msg = problems(tmp_path, "subtasks:\n  a:\n    instructions: x\n    loop_until: {message: m}\n")[0]
    assert "'subtasks.a.loop_until.status' is required" in msg
    msg = problems(tmp_path, "subtasks:\n  a:\n    provider_call: {provider: shell, method: run, param: {}}\n")[0]
    assert "unknown key 'param'" in msg and "did you mean 'params'?" in msg


def test_provider_call_wins_over_instructions_and_lifecycle(tmp_path):
    text = "agent_lifecycle: refresh\nsubtasks:\n  a:\n    instructions: x\n    provider_call: {provider: shell, method: run}\n"
    plan = load(str(write_spec(tmp_path, text)))
    assert plan.lifecycle == "refresh" and isinstance(plan.leaves()[0], ir.Provider)


def test_params_are_typed_required_and_defaulted(tmp_path):
    plan = load(str(write_spec(tmp_path, TREE)))
    with pytest.raises(SpecError) as info:
        params.bind(plan, {})
    assert "missing required param 'target'" in str(info.value) and "-p target=prod" in str(info.value)
    assert params.bind(plan, {"target": "x", "retries": "3"}) == {"target": "x", "retries": 3}
    with pytest.raises(SpecError, match="is not an integer"):
        params.bind(plan, {"target": "x", "retries": "many"})


def test_cli_params_are_yaml_scalars_or_files(tmp_path):
    assert params.parse_cli_param("n=42") == ("n", 42)
    assert params.parse_cli_param("flag=true") == ("flag", True)
    assert params.parse_cli_param("name=hello world") == ("name", "hello world")
    (tmp_path / "brief.txt").write_text("line one\nline two\n")
    assert params.parse_cli_param(f"brief=@{tmp_path / 'brief.txt'}") == ("brief", "line one\nline two\n")
    with pytest.raises(ValueError):
        params.parse_cli_param("novalue")


def test_resume_target_by_name_or_path(tmp_path):
    plan = load(str(write_spec(tmp_path, TREE)))
    assert resolve_task(plan, "E") == "A.B.E" and resolve_task(plan, "A.C.F") == "A.C.F"
    with pytest.raises(SpecError, match="no single task named 'Z'"):
        resolve_task(plan, "Z")


@pytest.mark.quick
def test_quickstart_is_valid():
    plan = load("examples/quickstart.yaml")
    assert [leaf.id for leaf in plan.leaves()] == ["scaffold", "build", "test", "package"]


@pytest.mark.parametrize("name", ["workdir", "iteration", "input", "item", "human"])
def test_a_memory_key_may_not_hide_a_built_in_name_in_a_task_tree(tmp_path, name):
    text = f"subtasks:\n  a:\n    instructions: go\n    store_as: {name}\n"
    message = error(tmp_path, text)
    assert message.startswith(at(tmp_path, text, "store_as"))
    assert f"store_as '{name}' would hide a name templates read: '{name}' is a built-in name" in message
    assert message.endswith("hint: pick another name")


def test_a_task_without_subtasks_is_its_work(tmp_path):
    text = "subtasks:\n  a:\n    instructions: go\n    budget: {tokens: 100}\n    store_as: result\n"
    [a] = load(str(write_spec(tmp_path, text))).root.children
    assert isinstance(a, ir.Task) and a.id == "a" and a.budget == ir.Budget(tokens=100) and a.store_as == "result"


def test_a_task_with_work_and_subtasks_is_a_sequence_of_both_under_its_id_and_star(tmp_path):
    plan = load(str(write_spec(tmp_path, TREE)))
    # The work keeps the task's id (rows, outputs, --resume-from); the task with its subtasks is `<id>.*`.
    walked = [(n.kind, n.id) for n in plan.walk()]
    assert walked == [
        ("sequence", "build-project"),
        ("sequence", "A.*"),
        ("task", "A"),
        ("sequence", "A.B.*"),
        ("task", "A.B"),
        ("task", "A.B.D"),
        ("task", "A.B.E"),
        ("sequence", "A.C"),
        ("task", "A.C.F"),
    ]


def test_the_root_follows_the_same_rule_and_its_budget_is_the_runs(tmp_path):
    alone = load(str(write_spec(tmp_path, "name: r\nbudget: {usd: 1}\ninstructions: go\n")))
    assert isinstance(alone.root, ir.Task) and alone.root.id == "r" and alone.root.budget is None
    assert alone.budget == ir.Budget(usd=1)
    both = load(str(write_spec(tmp_path, "name: r\ninstructions: go\nsubtasks:\n  a: {instructions: x}\n")))
    assert [(n.kind, n.id) for n in both.walk()] == [("sequence", "r.*"), ("task", "r"), ("task", "a")]


def test_an_approval_or_budget_over_subtasks_stays_on_the_sequence(tmp_path):
    text = (
        "subtasks:\n  a:\n    instructions: go\n    approval: true\n    budget: {usd: 2}\n"
        "    subtasks:\n      b: {instructions: x}\n"
    )
    [group] = load(str(write_spec(tmp_path, text))).root.children
    assert isinstance(group, ir.Sequence) and group.id == "a.*" and group.gate and group.budget
    work = group.children[0]
    assert work.id == "a" and work.gate is None and work.budget is None


def test_a_task_with_neither_work_nor_subtasks_is_an_empty_sequence(tmp_path):
    a, b = load(str(write_spec(tmp_path, "subtasks:\n  a:\n  b: {instructions: x}\n"))).root.children
    assert a == ir.Sequence(id="a", title="a", line=2) and isinstance(b, ir.Task)
