"""How an evaluate step (a precondition) reads in `inspect` and `dry-run` and looks in the graph.

No dialect writes evaluate steps yet, so the plans here are built from the IR directly.
"""

from __future__ import annotations

from typing import Any

from agentrun.explain.describe import dry_run_text, inspect_text
from agentrun.explain.graph import draw
from agentrun.lang import ir

CONDITION = "{{ steps.score.output.score }} > 50"


def task(tid: str) -> ir.Task:
    return ir.Task(id=tid, agent=tid, prompt=f"Do {tid}.", protocol="plain", step=True)


def pipeline(*steps: ir.Node) -> ir.Plan:
    return ir.Plan(
        name="leads",
        dialect="pipeline",
        source="leads.yaml",
        spec_dir=".",
        root=ir.Sequence(id="workflow:leads", children=list(steps)),
    )


def scored(**options: Any) -> ir.Plan:
    """Score a lead, go on only when the score is high enough, then write to the lead."""
    check = ir.Evaluate(id="enough", condition=CONDITION, step=True, **options)
    return pipeline(task("score"), check, task("write"))


def test_inspect_says_what_is_checked_and_that_the_run_fails_when_it_is_false():
    lines = inspect_text(scored()).splitlines()
    assert "  2. enough — check: steps.score.output.score > 50 (the run fails here when it is false)" in lines


def test_dry_run_shows_the_same_check_and_that_no_agent_runs():
    text = dry_run_text(scored(), {}, ("openai:gpt-4o-mini", {}))
    check = "  2. enough — check: steps.score.output.score > 50 (the run fails here when it is false; no agent)"
    assert check in text.splitlines()
    assert "  3. write — write (write) via openai:gpt-4o-mini" in text.splitlines()
    assert "Problems a run would meet" not in text


def test_graph_draws_the_check_as_a_box_in_the_chain():
    assert draw(scored()) == "[1. score] --> [2. check: steps.score.output.score > 50] --> [3. write]"


def test_a_skipped_check_says_the_run_goes_on():
    lines = inspect_text(scored(on_failure="skip")).splitlines()
    at = lines.index("  2. enough — check: steps.score.output.score > 50 (fails when it is false)")
    assert lines[at + 1] == "     on failure: skipped, the run goes on"


def test_a_check_keeps_its_gate_in_its_box_and_under_its_line():
    gate = ir.Human(id="go", prompt="Check the score?", approval=True, choices=[ir.APPROVE, ir.REJECT])
    plan = scored(gate=gate)
    assert "[2. check: steps.score.output.score > 50 (needs approval)]" in draw(plan)
    lines = inspect_text(plan).splitlines()
    at = lines.index("  2. enough — check: steps.score.output.score > 50 (the run fails here when it is false)")
    assert lines[at + 1] == "     needs approval (gate go): Check the score?; on reject: the run fails"


def test_a_check_inside_a_parallel_step_is_one_of_its_branches():
    check = ir.Evaluate(id="enough", condition=CONDITION)
    plan = pipeline(task("score"), ir.Parallel(id="both", step=True, children=[check, task("notify")]))
    lines = inspect_text(plan).splitlines()
    assert "     2a. check: steps.score.output.score > 50 (the run fails here when it is false)" in lines
    assert "[2a. check: steps.score.output.score > 50]" in draw(plan)
