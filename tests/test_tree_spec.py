"""Loading behaviour trees (seed 003: behaviors-sh, and abtree before it): what a user sees for good
and bad files, in both layouts, YAML or JSON, with `$ref` fragments. Nothing here starts Temporal.

Every error test asserts the file:line:column, the hint and that it is the only error.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from agentrun.lang import ir
from agentrun.lang.dialects import behavior_tree
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from tests.conftest import ROOT, write_spec
from tests.specs import at, error, nodes, plan_of, run_cli, swap

DEPLOY = ROOT / "examples" / "trees" / "deploy.yaml"
RELEASE = ROOT / "examples" / "trees" / "release.json"

# The abtree layout: a wrapper around the tree, its state in local/global.
WRAPPED = """\
$schema: https://abtree.sh/schemas/tree.schema.json
name: ship
version: 1.0.0
description: Check, then ship one way or another.
state:
  local: {passed: null, tag: null}
  global: {threshold: 80}
tree:
  type: sequence
  name: Ship
  children:
    - type: parallel
      name: Checks
      children:
        - type: action
          name: Tests
          retries: 2
          steps:
            - instruct: |
                Run the tests.
                Store pass/fail at $LOCAL.passed.
            - evaluate: "  $LOCAL.passed is true  "
        - type: action
          name: Lint
          steps:
            - instruct: Run the linter.
    - type: selector
      name: Publish
      retries: 1
      children:
        - type: action
          name: Push
          steps:
            - instruct: Push the image and store its tag at $LOCAL.tag.
        - type: action
          name: Push
          steps:
            - instruct: Push to the mirror instead.
"""

# The same tree in the behaviors-sh layout: the file's root is the node, state var/const on it.
BARE = {
    **yaml.safe_load(WRAPPED)["tree"],
    "state": {"var": {"passed": None, "tag": None}, "const": {"threshold": 80}},
}


def shape(plan: ir.Plan) -> list[tuple]:
    """What a run sees of each node, lines and files aside."""
    return [
        (n.kind, n.id, n.title, n.retry.attempts, getattr(n, "protocol", None), getattr(n, "tree_step", None))
        for n in plan.walk()
    ]


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def problems_of(path: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load(path)
    return [str(p) for p in info.value.problems]


def one_problem(path: str) -> str:
    found = problems_of(path)
    assert len(found) == 1, "expected one clear error, got:\n" + "\n".join(found)
    return found[0]


# ---- compiling ---------------------------------------------------------------------------------


def test_the_abtree_layout_compiles_to_the_ir(tmp_path):
    plan = plan_of(tmp_path, WRAPPED)
    assert (plan.name, plan.version, plan.dialect) == ("ship", "1.0.0", "behavior_tree")
    assert plan.description == "Check, then ship one way or another."
    assert plan.memory == {"passed": None, "tag": None} and plan.constants == {"threshold": 80}
    assert plan.source == str(tmp_path / "spec.yaml") and plan.spec_dir == str(tmp_path)
    assert plan.warnings == [] and plan.running == ir.Running()
    assert shape(plan) == [
        ("sequence", "Ship", "Ship", 1, None, None),
        ("parallel", "Ship/Checks", "Checks", 1, None, None),
        ("sequence", "Ship/Checks/Tests", "Tests", 3, None, None),
        (
            "task",
            "Ship/Checks/Tests@1",
            "Tests: instruct 1",
            1,
            "instruct",
            ir.TreeStep(action="Tests", path=[0, 0], index=0, last=False),
        ),
        (
            "task",
            "Ship/Checks/Tests@2",
            "Tests: evaluate 2",
            1,
            "evaluate",
            ir.TreeStep(action="Tests", path=[0, 0], index=1),
        ),
        ("sequence", "Ship/Checks/Lint", "Lint", 1, None, None),
        ("task", "Ship/Checks/Lint@1", "Lint: instruct 1", 1, "instruct", ir.TreeStep(action="Lint", path=[0, 1])),
        ("selector", "Ship/Publish", "Publish", 2, None, None),
        ("sequence", "Ship/Publish/Push", "Push", 1, None, None),
        ("task", "Ship/Publish/Push@1", "Push: instruct 1", 1, "instruct", ir.TreeStep(action="Push", path=[1, 0])),
        # A second sibling of the same name gets -2 on its id; its steps' ids follow it.
        ("sequence", "Ship/Publish/Push-2", "Push", 1, None, None),
        ("task", "Ship/Publish/Push-2@1", "Push: instruct 1", 1, "instruct", ir.TreeStep(action="Push", path=[1, 1])),
    ]
    step = nodes(plan)["Ship/Checks/Tests@1"]
    assert step.agent == "default" and step.line == WRAPPED.splitlines().index("            - instruct: |") + 1
    # The text as written, trimmed: never a template, never rewritten.
    assert step.prompt == "Run the tests.\nStore pass/fail at $LOCAL.passed."
    assert nodes(plan)["Ship/Checks/Tests@2"].prompt == "$LOCAL.passed is true"
    assert nodes(plan)["Ship/Checks/Tests"].retry == ir.Retry(attempts=3, backoff="none", delay_s=0)
    assert nodes(plan)["Ship/Checks"].wait == "all"
    assert nodes(plan)["Ship/Publish"].line == WRAPPED.splitlines().index("    - type: selector") + 1


@pytest.mark.parametrize("form", ["wrapped.yaml", "wrapped.json", "bare.yaml", "bare.json"])
def test_both_layouts_in_yaml_and_json_compile_alike(tmp_path, form):
    data = yaml.safe_load(WRAPPED) if form.startswith("wrapped") else BARE
    text = json.dumps(data, indent="\t") if form.endswith(".json") else yaml.safe_dump(data, sort_keys=False)
    plan = load(write(tmp_path, form, text))
    assert shape(plan) == shape(plan_of(tmp_path, WRAPPED))
    assert plan.memory == {"passed": None, "tag": None} and plan.constants == {"threshold": 80}
    assert plan.name == ("ship" if form.startswith("wrapped") else "Ship")


def test_a_tree_whose_top_node_is_an_action(tmp_path):
    plan = plan_of(tmp_path, "type: action\nname: Greet\nsteps:\n  - instruct: Say hello.\n")
    assert plan.name == "Greet" and plan.root.id == "Greet" and plan.root.title == "Greet"
    assert plan.leaves()[0].id == "Greet@1" and plan.leaves()[0].tree_step == ir.TreeStep(action="Greet")


def test_the_examples(tmp_path):
    deploy = load(str(DEPLOY))
    assert deploy.name == "deploy" and deploy.constants == {"threshold": 80, "registry": "ghcr.io/my-app"}
    kinds = {n.kind for n in deploy.walk()}
    assert {"selector", "parallel"} <= kinds and any(n.retry.attempts > 1 for n in deploy.walk())
    # The $ref fragment is in place, under the ids of the tree that holds it.
    assert nodes(deploy)["Deploy_Service/Checks/Run_Tests@2"].prompt.startswith("$VAR.tests_passed is true.")
    release = load(str(RELEASE))
    assert release.name == "Release" and release.memory == {"version": None, "notes": None}
    assert release.running == ir.Running(wait_s=30, max_wait_s=600, max_asks=20)
    assert nodes(release)["Release/Tag"].gate.id == "Release/Tag"


def test_engine_keys_on_nodes_and_at_the_top(tmp_path):
    text = """\
        type: sequence
        name: Release
        budget: {tokens: 50000}
        running: {wait: 10s, max_wait: 2m, max_asks: 5}
        children:
          - type: action
            name: Tag
            approval: {prompt: "Tag it?", timeout: 1h, on_timeout: reject}
            budget: {usd: 2}
            compensate: "  Delete the tag.  "
            steps:
              - instruct: Tag the release.
        """
    plan = plan_of(tmp_path, textwrap.dedent(text))
    assert plan.budget == ir.Budget(tokens=50000) and plan.root.budget is None  # the top's is the run's
    assert plan.running == ir.Running(wait_s=10, max_wait_s=120, max_asks=5)
    tag = nodes(plan)["Release/Tag"]
    assert tag.gate.id == "Release/Tag" and tag.gate.prompt == "Tag it?" and tag.gate.timeout_s == 3600
    assert tag.gate.on_timeout == "reject" and tag.budget == ir.Budget(usd=2)
    undo = tag.compensation
    assert (undo.id, undo.title, undo.protocol, undo.prompt) == (
        "Release/Tag.compensate",
        "undo Tag",
        "instruct",
        "Delete the tag.",
    )
    assert undo.tree_step == ir.TreeStep(action="undo Tag", path=[0], index=0, last=True)


def test_a_constant_no_state_declares_is_a_warning(tmp_path):
    plan = plan_of(
        tmp_path,
        "name: w\nversion: '1'\nstate: {global: {threshold: 3}}\ntree:\n  type: action\n  name: A\n  steps:\n"
        "    - evaluate: |\n        $VAR.n is a number.\n        $VAR.n is above $GLOBAL.treshold.\n"
        "    - instruct: Read $CONST.threshold and $CONST.registry.\n",
    )
    assert plan.warnings == [
        f"{tmp_path / 'spec.yaml'}:10:1: warning: $GLOBAL.treshold is not declared in the tree's state: "
        "it can never have a value\n  hint: did you mean 'threshold'?",
        f"{tmp_path / 'spec.yaml'}:11:7: warning: $CONST.registry is not declared in the tree's state: "
        "it can never have a value\n  hint: declare it under state: const: (registry: <value>)",
    ]


# ---- $ref --------------------------------------------------------------------------------------


def test_refs_resolve_relative_to_the_file_holding_them(tmp_path):
    root = write(
        tmp_path,
        "tree.yaml",
        """\
        name: split
        version: 1.0.0
        tree:
          type: sequence
          name: Outer
          children:
            - $ref: ./parts/inner.yaml
            - $ref: "parts/inner.yaml#/children/1"
            - $ref: "#/tree/children/1"
        """,
    )
    write(
        tmp_path,
        "parts/inner.yaml",
        """\
        type: selector
        name: Inner
        children:
          - $ref: deeper/leaf.yaml
          - type: action
            name: Other
            steps:
              - instruct: Other step.
        """,
    )
    write(tmp_path, "parts/deeper/leaf.yaml", "type: action\nname: Leaf\nsteps:\n  - instruct: Leaf step.\n")
    plan = load(root)
    assert [n.id for n in plan.leaves()] == [
        "Outer/Inner/Leaf@1",  # a ref in a fragment, relative to the fragment's folder
        "Outer/Inner/Other@1",
        "Outer/Other@1",  # a pointer into a fragment
        "Outer/Other-2@1",  # a pointer into the tree's own file, to a ref, followed on
    ]
    assert nodes(plan)["Outer/Inner/Leaf@1"].tree_step.path == [0, 0]
    assert nodes(plan)["Outer/Other-2@1"].tree_step == ir.TreeStep(action="Other", path=[2])


def test_a_pointer_into_the_same_fragment(tmp_path):
    root = write(tmp_path, "tree.yaml", "type: sequence\nname: Top\nchildren:\n  - $ref: lib.yaml#/definitions/check\n")
    write(
        tmp_path,
        "lib.yaml",
        """\
        definitions:
          check: {$ref: "#/definitions/real"}
          real: {type: action, name: Check, steps: [{evaluate: It holds.}]}
        """,
    )
    assert [n.id for n in load(root).leaves()] == ["Top/Check@1"]


def test_a_problem_in_a_fragment_points_into_the_fragment(tmp_path):
    root = write(tmp_path, "tree.yaml", "type: sequence\nname: Top\nchildren:\n  - $ref: parts/bad.yaml\n")
    bad = write(tmp_path, "parts/bad.yaml", "type: action\nname: Bad\nretries: 0\nsteps:\n  - instruct: x\n")
    assert one_problem(root).startswith(f"{bad}:3:1: error: retries: must be at least 1, not 0\n")
    (tmp_path / "parts" / "bad.yaml").write_text("type: action\nname: Bad\n steps: []\n")
    assert one_problem(root).startswith(f"{bad}:3:")
    assert "YAML syntax" in one_problem(root)


@pytest.mark.parametrize(
    "files, where, chain",
    [
        (
            {
                "tree.yaml": "name: c\nversion: '1'\ntree:\n  type: sequence\n  name: Root\n  children:\n    - $ref: '#/tree'\n"
            },
            "tree.yaml:7:7",
            "cyclic $ref '#/tree': tree.yaml#/tree → tree.yaml#/tree",
        ),
        (
            {
                "tree.yaml": "type: sequence\nname: Top\nchildren:\n  - $ref: a.yaml\n",
                "a.yaml": "type: sequence\nname: A\nchildren:\n  - $ref: b.yaml\n",
                "b.yaml": "type: selector\nname: B\nchildren:\n  - $ref: ./a.yaml\n",
            },
            "b.yaml:4:5",
            "cyclic $ref './a.yaml': a.yaml → b.yaml → a.yaml",
        ),
        (
            {"tree.yaml": "type: sequence\nname: Top\nchildren:\n  - $ref: a.yaml\n", "a.yaml": "$ref: tree.yaml\n"},
            "a.yaml:1:1",
            "cyclic $ref 'tree.yaml': tree.yaml → a.yaml → tree.yaml",
        ),
    ],
)
def test_a_cyclic_ref_is_one_error_naming_the_cycle(tmp_path, files, where, chain):
    for name, text in files.items():
        write(tmp_path, name, text)
    problem = one_problem(str(tmp_path / "tree.yaml"))
    assert problem.startswith(f"{tmp_path / where}: error: {chain}\n")
    assert "hint: a tree cannot hold itself" in problem


def test_a_cyclic_ref_ends_the_command_at_once_with_exit_code_2(tmp_path):
    write(tmp_path, "a.yaml", "type: sequence\nname: A\nchildren:\n  - $ref: b.yaml\n")
    write(tmp_path, "b.yaml", "type: sequence\nname: B\nchildren:\n  - $ref: a.yaml\n")
    result = run_cli("validate", str(tmp_path / "a.yaml"))  # a hang would time the subprocess out
    assert result.returncode == 2 and "cyclic $ref 'a.yaml': a.yaml → b.yaml → a.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_refs_that_cannot_be_followed(tmp_path):
    def ref(target: str) -> str:
        return write(tmp_path, "tree.yaml", f"type: sequence\nname: Top\nchildren:\n  - $ref: '{target}'\n")

    write(tmp_path, "parts/checks.yaml", "type: action\nname: C\nsteps: [{instruct: x}]\n")
    where = f"{tmp_path / 'tree.yaml'}:4:5: error: "
    assert one_problem(ref("parts/chekcs.yaml")) == (
        f"{where}$ref 'parts/chekcs.yaml': no such file {tmp_path / 'parts' / 'chekcs.yaml'}\n"
        "  hint: did you mean 'checks.yaml'? The path is relative to the folder of tree.yaml"
    )
    assert one_problem(ref("https://example.com/checks.yaml")) == (
        f"{where}$ref 'https://example.com/checks.yaml' is a URL: refs to URLs are not fetched\n"
        "  hint: save the fragment beside the tree and refer to it by its relative path (fragments/checks.yaml)"
    )
    assert one_problem(ref("parts/checks.yaml#/stesp")) == (
        f"{where}$ref 'parts/checks.yaml#/stesp' points at nothing: there is no 'stesp'\n  hint: did you mean 'steps'?"
    )
    write(tmp_path, "parts/empty.yaml", "")
    assert one_problem(ref("parts/empty.yaml")) == (
        f"{where}$ref 'parts/empty.yaml' points at nothing, not at a node\n"
        "  hint: point it at a mapping with type: and name:"
    )
    assert one_problem(ref("parts/checks.yaml#/steps")) == (
        f"{where}$ref 'parts/checks.yaml#/steps' points at a list, not at a node\n"
        "  hint: point it at a mapping with type: and name:"
    )


# ---- mistakes ----------------------------------------------------------------------------------

BASE = """\
name: t
version: 1.0.0
tree:
  type: sequence
  name: Root
  children:
    - type: action
      name: Build
      steps:
        - instruct: Build it.
        - evaluate: It built.
"""


@pytest.mark.parametrize(
    "old, new, needle, column, message, hint",
    [
        (
            "      steps:\n",
            "     steps:\n",
            "     steps:",
            6,
            "YAML syntax: while parsing a block collection expected <block end>, but found '<block mapping start>'",
            "check the indentation of this line against the lines above it",
        ),
        (
            "type: sequence",
            "type: selecter",
            "type: selecter",
            3,
            "unknown node type 'selecter'",
            "did you mean 'selector'?",
        ),
        (
            "      name: Build\n",
            "      name: Build\n      retries: 0\n",
            "retries:",
            None,
            "retries: must be at least 1, not 0",
            "retries: N gives the node N more attempts after it fails; write a whole number, at least 1 "
            "(retries: 2), or leave it out",
        ),
        (
            "      name: Build\n",
            "      name: Build\n      retries: true\n",
            "retries:",
            None,
            "retries: true is a boolean, not a whole number",
            "retries: N gives the node N more attempts after it fails; write a whole number, at least 1 "
            "(retries: 2), or leave it out",
        ),
        (
            "name: Build",
            "name: a/b",
            "name: a/b",
            None,
            "name: 'a/b' contains '/'",
            "names make the node's id (Deploy_Service/Run_Tests, a step Run_Tests@1), so they cannot hold "
            "'/' or '@'; write it with '_' or '-' instead",
        ),
        (
            "name: Build",
            "name: Build@2",
            "name: Build@2",
            None,
            "name: 'Build@2' contains '@'",
            "names make the node's id (Deploy_Service/Run_Tests, a step Run_Tests@1), so they cannot hold "
            "'/' or '@'; write it with '_' or '-' instead",
        ),
        (
            "      steps:\n        - instruct: Build it.\n        - evaluate: It built.\n",
            "      steps: []\n",
            "steps: []",
            None,
            "action 'Build' has no steps: the list is empty",
            "list at least one step: - evaluate: <what must hold> or - instruct: <what to do>",
        ),
        (
            "      steps:\n        - instruct: Build it.\n        - evaluate: It built.\n",
            "      steps:\n",
            "steps:",
            None,
            "action 'Build' has no steps: the list is empty",
            "list at least one step: - evaluate: <what must hold> or - instruct: <what to do>",
        ),
        ("  children:", "  childern:", "childern:", None, "unknown key 'childern'", "did you mean 'children'?"),
        ("      name: Build\n", "      nmae: Build\n", "nmae:", None, "unknown key 'nmae'", "did you mean 'name'?"),
        ("version: 1.0.0", "verison: 1.0.0", "verison:", None, "unknown key 'verison'", "did you mean 'version'?"),
        (
            "      name: Build\n",
            "",
            "    - type: action",
            7,
            "this action has no name:",
            "add name: — a name like Run_Tests, which identifies the node in the run and its trace",
        ),
        (
            "version: 1.0.0\n",
            "",
            "name: t",
            1,
            "the tree file has no version:",
            "add version: 1.0.0",
        ),
        (
            "      steps:",
            "      children:",
            "      children:",
            7,
            "unknown key 'children'",
            "'children:' belongs to sequence, selector and parallel nodes; check this node's type: 'action', "
            "or the indentation",
        ),
        (
            "- instruct: Build it.",
            "- instrcut: Build it.",
            "instrcut:",
            None,
            "unknown key 'instrcut' in step 1",
            "did you mean 'instruct'?",
        ),
        (
            "- evaluate: It built.",
            "- evaluate: ''",
            "evaluate: ''",
            None,
            "the evaluate text of step 2 is empty",
            "write the condition the agent judges true or false: - evaluate: $VAR.tests_passed is true",
        ),
        (
            "- evaluate: It built.",
            "- {evaluate: It built., instruct: Ship it.}",
            "instruct: Ship",
            None,
            "step 2 has both evaluate: and instruct:",
            "a step is one or the other; give each its own step: - evaluate: … then - instruct: …",
        ),
        (
            "    - type: action\n",
            "    - $ref: fragments/build.yaml\n    - type: action\n",
            "$ref:",
            None,
            "$ref 'fragments/build.yaml': no such file {dir}/fragments/build.yaml",
            "a $ref path is relative to the folder of spec.yaml",
        ),
        (
            "      name: Build\n",
            "      name: Build\n      state: {var: {x: 1}}\n",
            "state:",
            None,
            "'state:' applies to the whole tree, not to node 'Build'",
            "put it at the top level, beside tree:",
        ),
        (
            "tree:\n",
            "running: {max_asks: 0}\ntree:\n",
            "max_asks:",
            None,
            "running.max_asks: must be at least 1, not 0",
            "how many times in all a step that is still running is asked; a whole number, at least 1",
        ),
        (
            "tree:\n",
            "state: {var: {x: 1}, local: {y: 2}}\ntree:\n",
            "local:",
            None,
            "state has both var: and local:",
            "local: is abtree's name for var: (the same scope); keep one",
        ),
        (
            "      name: Build\n",
            "      name: Build\n      approval: {on_timeout: maybe}\n",
            "on_timeout:",
            None,
            "on_timeout 'maybe' is not fail, continue or one of the choices",
            "write fail, continue or one of: approve, reject",
        ),
        (
            "      name: Build\n",
            "      name: Build\n      compensate: {prompt: Undo it.}\n",
            "compensate:",
            None,
            "compensate: must be the text of an instruct step",
            'write compensate: "Remove the tag $VAR.image_tag." — an instruct step asked when the run rolls back',
        ),
    ],
)
def test_each_mistake_is_one_clear_error(tmp_path, old, new, needle, column, message, hint):
    text = swap(BASE, old, new)
    assert error(tmp_path, text) == at(tmp_path, text, needle, column) + message.format(dir=tmp_path) + (
        f"\n  hint: {hint}"
    )


def test_every_mistake_is_said_not_only_the_first(tmp_path):
    text = swap(swap(BASE, "type: sequence", "type: sequence\n  retries: 0"), "name: Build", "name: a@b")
    assert plan_problems(tmp_path, text) == [
        at(tmp_path, text, "retries:") + "retries: must be at least 1, not 0",
        at(tmp_path, text, "name: a@b") + "name: 'a@b' contains '@'",
    ]


def plan_problems(tmp_path: Path, text: str) -> list[str]:
    """Each problem's first line."""
    return [p.splitlines()[0] for p in problems_of(str(write_spec(tmp_path, text)))]


# ---- which language --------------------------------------------------------------------------


def test_other_languages_are_not_taken_for_trees():
    for path in [
        ROOT / "examples" / "quickstart.yaml",
        ROOT / "examples" / "pipelines" / "lead-scoring.yaml",
        ROOT / "examples" / "agentfile" / "Agentfile",
    ]:
        assert not behavior_tree.detect(str(path), path.read_text()), path
    assert not behavior_tree.detect("t.yaml", "name: x\nversion: 1\nsubtasks: {a: {instructions: go}}\n")
    assert not behavior_tree.detect("t.yaml", "workflow: {name: x}\ntree: {}\n")


def test_an_unknown_language_hint_names_trees_too(tmp_path):
    assert "a behaviour tree has 'tree:'" in error(tmp_path, "hello: world\n")


# ---- the command line --------------------------------------------------------------------------


def test_validate_a_good_tree_and_a_bad_one(tmp_path):
    good = run_cli("validate", str(DEPLOY))
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"{DEPLOY}: valid behavior_tree spec 'deploy' with 6 task(s)\n")
    assert "  Deploy_Service/Checks/Run_Tests@1 (task)" in good.stdout
    bad = write_spec(tmp_path, swap(BASE, "type: sequence", "type: selecter"))
    result = run_cli("validate", str(bad))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{bad}:4:3: error: unknown node type 'selecter'\n  hint: did you mean 'selector'?")


def test_inspect_draws_the_tree():
    result = run_cli("inspect", str(DEPLOY))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "State\n  $VAR.tests_passed = null\n" in out
    assert '  $CONST.registry = "ghcr.io/my-app" (read-only)\n' in out
    assert "  1. sequence Deploy_Service — children in order, until one fails:\n" in out
    assert "     1a. parallel Checks — children at once, all must succeed:\n" in out
    assert "              1a1a. instruct: Run tests. …\n" in out
    assert "              1a1b. evaluate: $VAR.tests_passed is true. …\n" in out
    assert (
        "     1b. action Build_And_Push (retries 2) — steps in order:\n"
        "         undo: default, prompt: Delete the tag $VAR.image_tag from $CONST.registry.\n"
        "         1b1. instruct: Build and push image to $CONST.registry. …\n"
    ) in out
    assert "     1c. selector Announce — children in order, until one succeeds:\n" in out
    assert (
        "Graph\n"
        "  1. sequence Deploy_Service\n"
        "  ├── 1a. parallel Checks\n"
        "  │   ├── 1a1. action Run_Tests: instruct → evaluate\n"
        "  │   └── 1a2. action Lint: instruct\n"
        "  ├── 1b. action Build_And_Push (retries 2; undo: default): instruct\n"
        "  └── 1c. selector Announce\n"
        "      ├── 1c1. action Post_To_Chat: instruct\n"
        "      └── 1c2. action Write_Changelog: instruct\n"
    ) in out


def test_inspect_shows_a_gate_on_a_tree_node():
    out = run_cli("inspect", str(RELEASE)).stdout
    assert (
        "     1b. action Tag — steps in order:\n"
        "         needs approval (gate Release/Tag): Approve 'Release/Tag'?; on reject: the run fails\n"
    ) in out
    assert "  └── 1b. action Tag (needs approval): instruct\n" in out


def test_dry_run_shows_each_step_prompt_with_the_values_it_names():
    result = run_cli("dry-run", str(DEPLOY), "--agent", "scripted:replies.json")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (
        "              1a1b. Run_Tests: evaluate 2, asked of default via scripted:replies.json\n"
        "                    prompt (13 lines):\n"
        "                      | Behaviour tree action Run_Tests, step 2.\n"
        "                      |\n"
        "                      | Judge whether this precondition holds:\n"
        "                      |\n"
        "                      | $VAR.tests_passed is true.\n"
        "                      | $VAR.coverage is greater than $CONST.threshold.\n"
        "                      |\n"
        "                      | Current values:\n"
        "                      | - $VAR.tests_passed = null\n"
        "                      | - $VAR.coverage = null\n"
        "                      | - $CONST.threshold = 80\n"
    ) in out
    assert '| - $CONST.registry = "ghcr.io/my-app"\n' in out
    assert "expected answer: a JSON verdict {result: true | false}; false fails the action" in out
    assert "running is asked again after 30s, the wait doubling up to 10m, 20 asks at most" in out
    assert "No agent was called." in out


def test_a_tree_that_grows_without_bound_through_refs_is_refused(tmp_path):
    # Each level holds the next twice: 2^20 nodes if it were expanded.
    for level in range(20):
        write(
            tmp_path,
            f"l{level}.yaml",
            f"type: parallel\nname: L{level}\nchildren:\n  - $ref: l{level + 1}.yaml\n  - $ref: l{level + 1}.yaml\n",
        )
    write(tmp_path, "l20.yaml", "type: action\nname: Leaf\nsteps: [{instruct: x}]\n")
    problem = one_problem(str(tmp_path / "l0.yaml"))
    assert "error: the tree grows to more than 10,000 nodes" in problem
    assert "hint: a $ref used in many places repeats its nodes each time" in problem


def test_a_tree_deeper_than_the_limit_is_refused(tmp_path):
    for level in range(70):
        write(tmp_path, f"d{level}.yaml", f"type: sequence\nname: D{level}\nchildren:\n  - $ref: d{level + 1}.yaml\n")
    write(tmp_path, "d70.yaml", "type: action\nname: Leaf\nsteps: [{instruct: x}]\n")
    assert one_problem(str(tmp_path / "d0.yaml")).startswith(
        f"{tmp_path / 'd64.yaml'}:4:5: error: the tree is nested more than 64 levels deep\n"
    )


def test_a_json_tree_with_a_missing_comma(tmp_path):
    path = write(tmp_path, "tree.json", '{\n\t"type": "action",\n\t"name": "A"\n\t"steps": [{"instruct": "x"}]\n}\n')
    assert one_problem(path) == (
        f"{path}:4:2: error: YAML syntax: while parsing a flow mapping expected ',' or '}}', but got '<scalar>'\n"
        "  hint: a ',' is missing between two entries before here, or a '{' or '[' is not closed"
    )
