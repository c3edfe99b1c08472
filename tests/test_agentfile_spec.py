"""The Agentfile language: both forms to the IR, its errors as a user reads them, and how
inspect and dry-run show it. Spec-level only: nothing here runs a workflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun.explain.describe import dry_run_text, inspect_text
from agentrun.lang import ir
from agentrun.lang.dialects import agentfile
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from tests.specs import run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agentfile" / "Agentfile"

LINE_FORM = """\
# a review
NAME review-pr
INPUT repo
INPUT rounds DEFAULT 3
SECURITY research "our staging servers"
AGENT critic FROM critic.md -> issues REQUIRES "reasoning-heavy"
AGENT tester "You test code." -> failures UNSUPERVISED
GOAL understand "Read $repo, keep {{ braces }}" -> summary
GOAL review \"\"\"
Review $summary
carefully
\"\"\" -> verdict USING critic, tester SUPERVISED HUMAN
CONVERGE polish "Polish $verdict" WITHIN $rounds
CONVERGE tidy FROM tidy.md WITHIN 4 SUPERVISED
RUN main USING understand, review
RUN finish USING polish, tidy UNSUPERVISED
"""

DRAFT_FORM = """\
NAME deploy-service
INPUT version, environment

SUPERVISED

GOAL "Build and test"
  run tests
  build docker image

SUPERVISED HUMAN
GOAL "Deploy to {environment}"
  push image {version} to registry
"""


def write(folder: Path, text: str, name: str = "Agentfile") -> Path:
    path = folder / name
    path.write_text(text)
    (folder / "critic.md").write_text("# Code critic\nYou find bugs.\n")
    (folder / "tidy.md").write_text("Tidy the notes on $repo.\n")
    return path


def nodes(plan: ir.Plan) -> dict[str, ir.NodeBase]:
    return {n.id: n for n in plan.walk()}


def error(folder: Path, text: str, name: str = "Agentfile") -> str:
    path = write(folder, text, name)
    with pytest.raises(SpecError) as info:
        load(str(path))
    problems = [str(p) for p in info.value.problems]
    assert len(problems) == 1, "expected one clear error, got:\n" + "\n".join(problems)
    return problems[0]


def said(
    folder: Path, line: int, col: int, message: str, hint: str, form: str = "line", name: str = "Agentfile"
) -> str:
    return f"{folder / name}:{line}:{col}: error: {message} (Agentfile {form} form)\n  hint: {hint}"


# ---- the line form ---------------------------------------------------------------------------


def test_the_line_form_compiles_to_run_steps_of_checkpoint_goals(tmp_path):
    plan = load(str(write(tmp_path, LINE_FORM)))
    assert (plan.dialect, plan.name, plan.undefined) == ("agentfile", "review-pr", "error")
    assert plan.params["repo"].required and plan.params["repo"].default is None
    assert (plan.params["rounds"].required, plan.params["rounds"].default) == (False, 3)
    assert (plan.security, plan.research_scope) == ("research", "our staging servers")
    assert plan.agents["critic"] == ir.AgentInfo(name="critic", role="Code critic", requires="reasoning-heavy")
    assert plan.agents["tester"].role == "You test code."
    assert isinstance(plan.root, ir.Sequence) and plan.root.id == "review-pr"
    assert [(r.id, r.title) for r in plan.root.children] == [("main", "RUN main"), ("finish", "RUN finish")]
    got = nodes(plan)
    understand = got["main.understand"]
    assert isinstance(understand, ir.Task)
    assert understand.prompt == "Read {{ repo }}, keep {{ '{{' }} braces }}"
    assert (understand.protocol, understand.agent, understand.outputs) == ("checkpoint", "default", ["summary"])
    assert understand.supervision == "none" and "our staging servers" in (understand.system or "")
    assert understand.title == "understand" and understand.line == 8


def test_using_fans_out_to_the_agents_then_merges(tmp_path):
    got = nodes(load(str(write(tmp_path, LINE_FORM))))
    review = got["main.review"]
    assert isinstance(review, ir.Sequence)
    assert [c.id for c in review.children] == ["main.review.agents", "main.review.synthesize"]
    critic, tester = got["main.review.critic"], got["main.review.tester"]
    assert isinstance(critic, ir.Task) and isinstance(tester, ir.Task)
    assert (critic.agent, critic.prompt, critic.outputs) == ("critic", "Review {{ summary }}\ncarefully", ["issues"])
    assert critic.system is not None and critic.system.startswith("# Code critic\nYou find bugs.")
    assert (critic.supervision, tester.supervision) == ("human", "none")  # the agent's own modifier wins
    merge = got["main.review.synthesize"]
    assert isinstance(merge, ir.Task)
    assert merge.prompt == "Merge the outputs of critic, tester into one answer to: Review {{ summary }}\ncarefully"
    assert merge.input == '{{ steps["main.review.agents"].output }}'
    assert (merge.outputs, merge.supervision, merge.protocol) == (["verdict"], "human", "checkpoint")
    # The agents of a USING clause are sub-agents already, and the merge only merges: none may spawn.
    assert (critic.spawn, tester.spawn, merge.spawn) == (False, False, False)


def test_converge_loops_within_a_number_or_an_input(tmp_path):
    got = nodes(load(str(write(tmp_path, LINE_FORM))))
    polish, tidy = got["finish.polish"], got["finish.tidy"]
    assert isinstance(polish, ir.Task) and isinstance(tidy, ir.Task)
    assert polish.loop_until == ir.LoopUntil(status="CONVERGED", max_iterations_param="rounds")
    assert tidy.loop_until == ir.LoopUntil(status="CONVERGED", max_iterations=4)
    assert "4" not in tidy.prompt and tidy.prompt == "Tidy the notes on {{ repo }}."  # GOAL … FROM a file
    assert (polish.supervision, tidy.supervision) == ("none", "supervised")  # the RUN's, then its own


def test_supervision_is_inherited_from_the_global_default(tmp_path):
    text = 'SUPERVISED HUMAN\nNAME n\nGOAL a "A"\nGOAL b "B" SUPERVISED\nRUN r USING a, b\n'
    got = nodes(load(str(write(tmp_path, text))))
    assert (got["r.a"].supervision, got["r.b"].supervision) == ("human", "supervised")


# ---- the draft form --------------------------------------------------------------------------


def test_the_draft_form_runs_goals_in_file_order_with_their_sub_steps(tmp_path):
    plan = load(str(write(tmp_path, DRAFT_FORM)))
    assert isinstance(plan.root, ir.Sequence)
    assert [c.id for c in plan.root.children] == ["build-and-test", "deploy-to-environment"]
    assert all(p.required for p in plan.params.values()) and list(plan.params) == ["version", "environment"]
    build, deploy = plan.root.children
    assert isinstance(build, ir.Task) and isinstance(deploy, ir.Task)
    assert build.prompt == "Build and test\n\nDo these steps in order:\n1. run tests\n2. build docker image"
    assert deploy.title == "Deploy to {environment}"
    assert deploy.prompt.startswith("Deploy to {{ environment }}\n") and "push image {{ version }} to" in deploy.prompt
    assert (build.supervision, deploy.supervision) == ("supervised", "human")


# ---- detection -------------------------------------------------------------------------------


SPAWNING = """NAME orchestrator

GOAL "Analyze multiple repos"
  spawn_agents:
    - task: "Analyze repo A"
      agent: code-reviewer
    - task: "Analyze repo B"
      agent: code-reviewer

  collect results
  generate combined report
"""


def test_a_sub_step_list_stays_one_step_and_a_goal_may_spawn_agents(tmp_path):
    [goal] = load(str(write(tmp_path, SPAWNING))).leaves()
    assert isinstance(goal, ir.Task) and goal.spawn
    assert goal.prompt.split("Do these steps in order:\n")[1] == (
        "1. spawn_agents:\n"
        '     - task: "Analyze repo A"\n'
        "       agent: code-reviewer\n"
        '     - task: "Analyze repo B"\n'
        "       agent: code-reviewer\n"
        "2. collect results\n"
        "3. generate combined report"
    )


@pytest.mark.parametrize(
    ("name", "text", "taken"),
    [
        ("Agentfile", "anything", True),
        ("review.agent", "anything", True),
        ("spec.txt", "\n# a comment\n\nNAME x\n", True),
        ("spec.yaml", "name: x\nsubtasks: {}\n", False),
    ],
)
def test_detection_by_name_extension_or_first_keyword(name, text, taken):
    assert agentfile.detect(name, text) is taken


def test_a_file_found_by_its_first_keyword_loads(tmp_path):
    assert load(str(write(tmp_path, DRAFT_FORM, "deploy.txt"))).dialect == "agentfile"


# ---- errors ----------------------------------------------------------------------------------


def test_name_and_a_run_step_are_required(tmp_path):
    assert error(tmp_path, 'GOAL a "A"\nRUN r USING a\n') == said(
        tmp_path, 1, 1, "NAME is required", "add a line NAME <workflow-name>, e.g. NAME deploy-service"
    )
    assert error(tmp_path, 'NAME n\nGOAL a "A"\n') == said(
        tmp_path,
        1,
        1,
        "at least one RUN step is required",
        "add RUN main USING <goal>, <goal>: goals run in that order",
    )


def test_undefined_agent_and_goal_suggest_the_nearest(tmp_path):
    text = 'NAME n\nAGENT critic "C"\nGOAL a "A" USING critc\nRUN r USING a\n'
    assert error(tmp_path, text) == said(
        tmp_path, 3, 18, 'undefined agent "critc" in USING clause', "did you mean 'critic'?"
    )
    assert error(tmp_path, 'NAME n\nGOAL build "A"\nRUN r USING biuld\n') == said(
        tmp_path, 3, 13, 'undefined goal "biuld" in RUN step', "did you mean 'build'?"
    )


def test_unsupervised_under_a_global_supervised_human(tmp_path):
    text = 'NAME n\nSUPERVISED HUMAN\nGOAL a "A" UNSUPERVISED\nRUN r USING a\n'
    hint = (
        "the global SUPERVISED HUMAN (line 2) puts a person over every step; "
        "drop UNSUPERVISED, or write SUPERVISED for a supervisor without a person"
    )
    assert error(tmp_path, text) == said(
        tmp_path, 3, 12, 'GOAL "a" cannot be UNSUPERVISED under a global SUPERVISED HUMAN', hint
    )


def test_an_undefined_reference_names_its_place_and_the_nearest(tmp_path):
    text = 'NAME n\nINPUT version\nGOAL a "Ship $versoin now"\nRUN r USING a\n'
    assert error(tmp_path, text) == said(tmp_path, 3, 14, "undefined reference $versoin", "did you mean 'version'?")
    later = 'NAME n\nGOAL a "Use $plan"\nGOAL b "Plan" -> plan\nRUN r USING a, b\n'
    assert error(tmp_path, later) == said(
        tmp_path, 2, 13, "undefined reference $plan", "'plan' is an output of goal \"b\", which runs after this one"
    )
    draft = 'NAME n\nINPUT a, b\nGOAL "Go to {c}"\n'
    hint = "declare it (INPUT c), or give an earlier goal the output: -> c"
    assert error(tmp_path, draft) == said(tmp_path, 3, 13, "undefined reference {c}", hint, "draft")


def test_a_reference_in_a_file_read_is_a_warning_placed_in_that_file(tmp_path):
    # The real system never checks a prompt it reads FROM a file, and leaves a name it cannot fill
    # as written (its example 40's prompt files quote Agentfiles): a warning, where it stands.
    text = "NAME n\nCONVERGE t FROM tidy.md WITHIN 2\nRUN r USING t\n"
    hint = "the prompt keeps it as written, as the Agentfile's real system does; declare it to fill it in"
    plan = load(str(write(tmp_path, text)))
    assert plan.warnings == [f"{tmp_path / 'tidy.md'}:1:19: warning: undefined reference $repo\n  hint: {hint}"]


def test_a_missing_from_file_is_an_error_before_the_run(tmp_path):
    text = 'NAME n\nAGENT x FROM nowhere.md\nGOAL a "A" USING x\nRUN r USING a\n'
    assert error(tmp_path, text) == said(
        tmp_path,
        2,
        14,
        'cannot read "nowhere.md": No such file or directory',
        "the path is relative to the Agentfile's folder",
    )


def test_bad_strings(tmp_path):
    hint = 'close it with " on the same line; for text over several lines use """ … """'
    assert error(tmp_path, 'NAME n\nGOAL a "A\nRUN r USING a\n') == said(tmp_path, 2, 8, "unclosed string", hint)
    assert error(tmp_path, 'NAME n\nGOAL a """A\nRUN r USING a\n') == said(
        tmp_path, 2, 8, 'unclosed """ string', 'end the text with """'
    )


def test_a_statement_missing_its_parts(tmp_path):
    assert error(tmp_path, "NAME n\nGOAL a\nRUN r USING a\n") == said(
        tmp_path,
        2,
        7,
        'GOAL needs its text: a "string" or FROM path',
        'GOAL build "Build the service", or GOAL build FROM goals/build.md',
    )
    assert error(tmp_path, 'NAME n\nCONVERGE a "A"\nRUN r USING a\n') == said(
        tmp_path, 2, 15, "CONVERGE needs WITHIN and the most rounds it may take", "… WITHIN 5, or WITHIN $rounds"
    )
    assert error(tmp_path, 'NAME n\nGOAL a "A"\nRUN r\n') == said(
        tmp_path, 3, 6, "RUN needs USING and the goals it runs", "RUN main USING build, deploy"
    )


def test_unknown_and_misplaced_keywords_suggest_the_nearest(tmp_path):
    assert error(tmp_path, 'NAME n\nGOLA a "A"\nRUN r USING a\n') == said(
        tmp_path, 2, 1, 'unknown statement "GOLA"', "did you mean 'GOAL'?"
    )
    assert error(tmp_path, 'NAME n\nGOAL a "A" USNG x\nRUN r USING a\n') == said(
        tmp_path, 2, 12, 'unexpected "USNG"', "did you mean 'USING'?"
    )


def test_run_is_not_part_of_the_draft_form(tmp_path):
    hint = 'draft-form goals run in file order; to use RUN steps, name every goal: GOAL build "…"'
    assert error(tmp_path, 'NAME n\nGOAL "A"\nRUN r USING a\n') == said(
        tmp_path, 3, 1, "RUN is not part of the draft form", hint, "draft"
    )


# ---- inspect, dry-run and the example --------------------------------------------------------


SMALL = """\
NAME small
INPUT topic DEFAULT "tides"
GOAL notes "Take notes on $topic" -> notes SUPERVISED HUMAN
CONVERGE essay "Write an essay from $notes" WITHIN 3
RUN main USING notes, essay
"""


def test_inspect_of_a_small_agentfile(tmp_path):
    text = inspect_text(load(str(write(tmp_path, SMALL))))
    steps = text.split("\nSteps\n")[1].split("\n\nGraph\n")[0]
    assert steps.splitlines() == [
        "  1. RUN main, in order:",
        "     1a. goal: notes (supervised, human), by the default agent; outputs notes",
        "     1b. goal: essay (unsupervised), by the default agent",
        "         repeats until CONVERGED, at most 3 rounds",
    ]
    assert "  [1a. notes] --> [1b. essay]" in text


def test_dry_run_of_a_small_agentfile_lists_each_goals_phases_and_prompt(tmp_path):
    text = dry_run_text(load(str(write(tmp_path, SMALL))), {"topic": "tides"}, ("openai:m", {}))
    plan, legend = text.split("\nPlan\n")[1].split("\n\nNo agent was called.")[0].split("\n\n")
    assert legend == "<…> stands for a value only the run has: an output, a person's answer, the run id."
    lines = plan.splitlines()
    # The first prompt each goal sends is its COMMIT (workflows.protocols.checkpoint).
    commit = [line for line in lines if "| Phase COMMIT." in line]
    assert len(commit) == 2 and all("Do not do the work yet." in line for line in commit)
    assert [line for line in lines if "| Phase COMMIT." not in line and '| {"interpretation"' not in line] == [
        "  1. RUN main, in order",
        "     1a. notes (default) via openai:m",
        "         supervision: human — its own agent (default; --agent supervisor=URI names another) judges every "
        "attempt, then a person answers at gate main.notes.supervise",
        "         phases: COMMIT → EXECUTE → RECONCILE → SUPERVISE → a person; EXECUTE may start sub-agents (spawn_agents)",
        "         prompt (5 lines):",
        "           | Goal main.notes:",
        "           | Take notes on tides",
        "           |",
        "         expected output: a pre-checkpoint, then a JSON object with notes and a post-checkpoint",
        "     1b. essay (default) via openai:m",
        "         supervision: none",
        "         phases: COMMIT → EXECUTE; EXECUTE may start sub-agents (spawn_agents)",
        "         prompt (5 lines):",
        "           | Goal main.essay:",
        "           | Write an essay from <notes from main.notes>",
        "           |",
        "         expected output: a pre-checkpoint, then the work and a post-checkpoint",
        "           repeats until CONVERGED, at most 3 rounds",
    ]


def test_the_example_validates_and_inspects():
    plan = load(str(EXAMPLE))
    assert plan.agents["critic"].role == "Code critic" and plan.params["focus"].default == "correctness"
    assert any(isinstance(n, ir.Task) and n.supervision == "human" for n in plan.walk())
    validated = run_cli("validate", str(EXAMPLE))
    assert validated.returncode == 0, validated.stderr
    inspected = run_cli("inspect", str(EXAMPLE))
    assert inspected.returncode == 0, inspected.stderr
    assert "1. RUN main, in order:" in inspected.stdout and "critic: critic — Code critic" in inspected.stdout


CAPABLE = """NAME cap
INPUT change
AGENT critic "You find bugs." REQUIRES "reasoning-heavy"
AGENT tester "You test." REQUIRES "fast"
GOAL review "Review $change" USING critic, tester
RUN main USING review
"""


def test_requires_picks_the_uri_agentrun_yaml_gives_the_capability(tmp_path):
    spec = write(tmp_path, CAPABLE)
    (tmp_path / "agentrun.yaml").write_text(
        'agents: {default: "openai:small"}\ncapabilities: {reasoning-heavy: "openai:big"}\n'
    )
    shown = run_cli("dry-run", str(spec), "-p", "change=x")
    via = [line.strip() for line in shown.stdout.splitlines() if " via " in line]
    # tester's capability is not listed: it runs on the default agent.
    assert via == [
        "1a1a. critic (critic) via openai:big",
        "1a1b. tester (tester) via openai:small",
        "1a2. review: synthesize (default) via openai:small",
    ]
    flagged = run_cli("dry-run", str(spec), "-p", "change=x", "--agent", "critic=openai:mine")
    assert "critic (critic) via openai:mine" in flagged.stdout  # --agent wins


def test_a_missing_input_is_the_real_parsers_error_and_exit_2(tmp_path):
    shown = run_cli("start", str(write(tmp_path, CAPABLE)), "--agent", "openai:m")
    assert shown.returncode == 2
    assert shown.stderr.splitlines()[0].endswith("Agentfile:2:1: error: required input missing: change")


# ---- skills: AGENT x FROM a folder holding SKILL.md, as the real examples 31, 33 and 34 have them ----

SKILLED = """NAME skilled
AGENT git-helper FROM skills/git-workflow
GOAL commit "Prepare a commit message." USING git-helper
RUN main USING commit
"""
SKILL_MD = """---
name: git-workflow
description: Manage git operations. Use when the user mentions commits.
license: MIT
metadata:
  author: someone
---

# Git Workflow Instructions

Write commit messages in the imperative.
"""


def skill_folder(root: Path, skill_md: str | None = SKILL_MD) -> Path:
    folder = root / "skills" / "git-workflow"
    (folder / "scripts").mkdir(parents=True)
    (folder / "scripts" / "create-branch.sh").write_text("git switch -c $1\n")
    (folder / "scripts" / "amend.sh").write_text("git commit --amend\n")
    if skill_md is not None:
        (folder / "SKILL.md").write_text(skill_md)
    return folder


def test_an_agent_from_a_skill_folder_is_prompted_with_its_description_instructions_and_scripts(tmp_path):
    skill_folder(tmp_path)
    plan = load(str(write(tmp_path, SKILLED)))
    [agent_step, _] = plan.leaves()
    assert isinstance(agent_step, ir.Task)
    assert agent_step.system == (
        "Manage git operations. Use when the user mentions commits.\n\n"
        "# Git Workflow Instructions\n\nWrite commit messages in the imperative.\n\n"
        "## Available Scripts\n- amend.sh\n- create-branch.sh"
    )
    assert plan.agents["git-helper"].role == "Manage git operations. Use when the user mentions commits."


@pytest.mark.parametrize(
    ("skill_md", "said"),
    [
        (None, r"2:23: error: directory .*skills/git-workflow is not a valid skill \(missing SKILL\.md\)"),
        ("# no front matter\n", "2:23: error: missing frontmatter delimiter"),
        (SKILL_MD.replace("name: git-workflow", "name: git"), '2:23: error: skill name "git" does not match directory'),
        (
            SKILL_MD.replace("description: Manage", "summary: Manage"),
            "2:23: error: missing required field: description",
        ),
    ],
)
def test_a_folder_that_is_not_a_skill_is_said_as_the_real_parser_says_it(tmp_path, skill_md, said):
    skill_folder(tmp_path, skill_md)
    with pytest.raises(SpecError, match=said):
        load(str(write(tmp_path, SKILLED)))
