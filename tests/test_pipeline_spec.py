"""Loading `workflow:` pipeline specs (seed 004): what a user sees for good and bad files.

Every error test asserts the exact file:line:column and the hint, and that it is the only error:
bad input gets one clear error, before anything runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrun.explain import prepare
from agentrun.lang import expressions, ir, params
from agentrun.lang.check import check
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from agentrun.lang.render import render
from tests.conftest import write_spec
from tests.specs import at, error, nodes, plan_of, swap

ROOT = Path(__file__).resolve().parent.parent
PROPOSAL = str(ROOT / "examples" / "pipelines" / "research-to-proposal.yaml")
SCORING = str(ROOT / "examples" / "pipelines" / "lead-scoring.yaml")

# A small pipeline the error tests change one mistake at a time.
BASE = """\
workflow:
  name: brief
  timeout: "10m"
  inputs:
    - name: topic
      type: string
      required: true
  agents:
    writer:
      prompt: |
        Write about {{inputs.topic}}.
        Keep it short.
    editor:
      prompt: "Edit this."
    critic:
      prompt: "Critique {{ input }}"
  steps:
    - id: draft
      agent: writer
      type: sequential
      input: "{{inputs.topic}}"
      output:
        store_as: first_draft
    - id: edit
      agent: editor
      type: sequential
      input: "{{steps.draft.output}}"
"""

# Conditional routing as in the seed's diagram: hot / warm / cold, chained.
ROUTING = """\
workflow:
  name: route
  inputs:
    - name: lead
      type: json
      required: true
  agents:
    scorer:
      prompt: "Score {{inputs.lead}}; return {score: number}"
    hot_handler:
      prompt: "Draft a proposal for {{inputs.lead}}"
    warm_handler:
      prompt: "Book a call"
    cold_handler:
      prompt: "Add to nurture"
    reporter:
      prompt: "Report on {{steps.route_hot.output}}"
  steps:
    - id: score
      agent: scorer
      output: {store_as: scored, format: json}
    - id: route_hot
      type: conditional
      input: "{{steps.score.output}}"
      condition:
        eval: "{{steps.score.output.score}} >= 80"
        true: hot_handler
        false: route_warm
    - id: route_warm
      type: conditional
      condition:
        eval: "{{ scored.score }} >= 40"
        true: warm
        false: cold_handler
    - id: warm
      agent: warm_handler
    - id: report
      agent: reporter
"""

# Loop and map, the two patterns the seed's examples do not cover together.
LOOP_MAP = """\
workflow:
  name: summarise
  inputs:
    - name: doc
      type: file_path
      required: true
  agents:
    splitter:
      prompt: "Split {{inputs.doc}}; return {chunks: [...]}"
      validation:
        schema: {type: object, required: [chunks]}
    summarizer:
      prompt: "Summarize {{ item }}"
      timeout: 90s
    reducer:
      prompt: "Combine {{ input }}"
    writer:
      prompt: "Write from {{ steps.summaries.output }}"
    critic:
      prompt: "Critique {{ input }}; return {passed, feedback}"
  steps:
    - id: split
      agent: splitter
      output: {format: json}
    - id: summaries
      type: map
      map:
        over: "{{steps.split.output.chunks}}"
        agent: summarizer
        reduce: reducer
        concurrency: 4
      output: {store_as: summary, format: markdown}
    - id: polish
      type: loop
      loop:
        agent: writer
        validator: critic
        max_iterations: 4
        feedback_path: "{{steps.polish.output.feedback}}"
      timeout: 10m
"""


# ---- the seed's examples -------------------------------------------------------------------------


def test_research_to_proposal_loads_in_order_with_its_outputs():
    plan = load(PROPOSAL)
    check(plan)
    assert plan.dialect == "pipeline" and plan.name == "research-to-proposal"
    assert plan.order == ["research", "identify_pains", "pricing", "draft", "review"]
    assert [n.id for n in plan.root.children] == plan.order
    assert [leaf.id for leaf in plan.leaves()] == [
        "research",
        "identify_pains",
        "pricing",
        "draft",
        "review.proposal_writer",
        "review.reviewer",
    ]
    by_id = nodes(plan)
    assert {i: by_id[i].store_as for i in plan.order} == {
        "research": "research_data",
        "identify_pains": "pain_points",
        "pricing": "pricing_tiers",
        "draft": "proposal_draft",
        "review": "final_proposal",
    }
    assert {i: by_id[i].output_format for i in ("research", "identify_pains", "pricing", "draft")} == {
        "research": "json",
        "identify_pains": "json",
        "pricing": "json",
        "draft": "markdown",
    }
    assert by_id["draft"].input == ir.ALL_PRIOR
    assert by_id["research"].input == "{{inputs.company_name}}"


def test_research_to_proposal_timeouts_retry_and_rules():
    plan = load(PROPOSAL)
    by_id = nodes(plan)
    assert plan.timeout_s == 15 * 60
    assert {i: by_id[i].timeout_s for i in ("research", "identify_pains", "pricing", "draft")} == {
        "research": 180,
        "identify_pains": 120,
        "pricing": 120,
        "draft": 240,
    }
    research = by_id["research"]
    assert research.retry.attempts == 2 and research.on_failure == "skip" and research.fallback is None
    assert research.rules == ["Output must include company_overview field", "Output must include key_challenges array"]
    assert by_id["identify_pains"].retry.attempts == 1 and by_id["identify_pains"].on_failure == "abort"
    assert by_id["identify_pains"].rules[0] == "Must identify exactly 3 pain points"
    assert by_id["research"].line == 156  # the step (after the 3 header lines), for reports


def test_research_to_proposal_review_is_a_loop_with_validator_and_feedback():
    review = nodes(load(PROPOSAL))["review"]
    assert isinstance(review, ir.Loop) and review.max_iterations == 2
    assert review.feedback == "{{steps.review.output.feedback}}"
    assert review.body.agent == "proposal_writer" and review.body.output_format == "markdown"
    assert review.validator.id == "review.reviewer" and review.validator.output_format == "json"
    assert review.validator.rules == ["Must include overall_score field", "Must include passed boolean"]
    assert review.store_as == "final_proposal"


def test_research_to_proposal_inputs_are_params():
    plan = load(PROPOSAL)
    assert list(plan.params) == ["company_name", "contact_name", "our_services", "rough_scope"]
    assert [p.required for p in plan.params.values()] == [True, True, True, False]
    assert plan.params["rough_scope"].default == ""
    assert plan.params["company_name"].line == 11  # "- name: company_name"


def test_lead_scoring_fans_out_with_keyed_outputs_and_aggregates():
    plan = load(SCORING)
    check(plan)
    assert plan.order == ["parallel_scoring", "aggregate"]
    assert [leaf.id for leaf in plan.leaves()] == [
        "parallel_scoring.firmographic",
        "parallel_scoring.technographic",
        "parallel_scoring.intent",
        "aggregate",
    ]
    fan = plan.root.children[0]
    assert isinstance(fan, ir.Parallel) and fan.wait == "all" and fan.store_as == "parallel_scores"
    assert [c.output_key for c in fan.children] == ["firmographic", "technographic", "intent"]
    assert [c.agent for c in fan.children] == ["firmographic_scorer", "technographic_scorer", "intent_scorer"]
    assert all(c.input == "{{inputs.lead_data}}" and c.output_format == "json" for c in fan.children)
    assert all(c.timeout_s == 60 for c in fan.children)
    aggregate = plan.root.children[1]
    assert aggregate.store_as == "final_score" and aggregate.output_format == "json"
    assert aggregate.input == "{{steps.parallel_scoring.outputs}}"
    assert plan.timeout_s == 300
    assert [p.type for p in plan.params.values()] == ["json", "json"]


# ---- compiling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("backoff", "delay"), [("none", 0.0), ("linear", 5.0), ("exponential", 1.0)])
def test_backoff_maps_to_retry_delay(tmp_path, backoff, delay):
    text = swap(
        BASE,
        '      prompt: "Edit this."',
        f'      prompt: "Edit this."\n      retry: {{max_attempts: 3, backoff: {backoff}}}',
    )
    edit = nodes(plan_of(tmp_path, text))["edit"]
    assert edit.retry == ir.Retry(attempts=3, backoff=backoff, delay_s=delay)
    assert edit.on_failure == "abort"


def test_fallback_agent_becomes_a_fallback_node_with_the_same_input(tmp_path):
    text = swap(
        BASE, '      prompt: "Edit this."', '      prompt: "Edit this."\n      retry: {on_failure: "fallback:critic"}'
    )
    text = swap(
        text,
        '      prompt: "Critique {{ input }}"',
        '      prompt: "Critique {{ input }}"\n      retry: {on_failure: skip}',
    )
    edit = nodes(plan_of(tmp_path, text))["edit"]
    assert edit.on_failure == "fallback"
    backup = edit.fallback
    assert backup.id == "edit.fallback.critic" and backup.agent == "critic"
    assert backup.input == edit.input == "{{steps.draft.output}}"
    assert backup.on_failure == "abort"  # the seed: a failing fallback aborts the step


def test_validation_schema_makes_json_output_and_is_carried(tmp_path):
    plan = plan_of(tmp_path, LOOP_MAP)
    split = nodes(plan)["split"]
    assert split.output_schema == {"type": "object", "required": ["chunks"]} and split.output_format == "json"


def test_step_timeout_overrides_agent_timeout_and_global_timeout_is_kept(tmp_path):
    text = swap(BASE, '      prompt: "Edit this."', '      prompt: "Edit this."\n      timeout: 2m')
    plan = plan_of(tmp_path, text)
    assert plan.timeout_s == 600 and nodes(plan)["edit"].timeout_s == 120
    plan = plan_of(
        tmp_path,
        swap(
            text,
            '      type: sequential\n      input: "{{steps',
            '      type: sequential\n      timeout: 30s\n      input: "{{steps',
        ),
    )
    assert nodes(plan)["edit"].timeout_s == 30


def test_forward_reference_runs_the_later_step_first(tmp_path):
    text = swap(BASE, '      input: "{{inputs.topic}}"', '      input: "{{steps.edit.output}}"')
    text = swap(text, '      input: "{{steps.draft.output}}"', '      input: "{{inputs.topic}}"')
    plan = plan_of(tmp_path, text)
    assert plan.order == ["edit", "draft"]
    assert [n.id for n in plan.root.children] == ["edit", "draft"]


def test_forward_reference_in_an_agent_prompt_counts_too(tmp_path):
    text = swap(BASE, "Keep it short.", "Keep it short. Critic said: {{ steps.review.output }}")
    text += "    - id: review\n      agent: critic\n"
    assert plan_of(tmp_path, text).order == ["review", "draft", "edit"]


def test_all_prior_context_depends_on_every_earlier_step(tmp_path):
    text = swap(BASE, '      input: "{{inputs.topic}}"', '      input: "{{steps.late.output}}"')
    text = swap(text, '      input: "{{steps.draft.output}}"', '      input: "All prior context"')
    text += "    - id: late\n      agent: critic\n"
    plan = plan_of(tmp_path, text)
    assert plan.order == ["late", "draft", "edit"]
    assert nodes(plan)["edit"].input == ir.ALL_PRIOR


def test_conditional_branches_name_steps_or_agents_and_chain(tmp_path):
    plan = plan_of(tmp_path, ROUTING)
    check(plan)
    # Steps named by a condition run only inside it.
    assert plan.order == ["score", "route_hot", "report"]
    assert plan.branches == {"route_warm": "route_hot", "warm": "route_warm"}
    hot = plan.root.children[1]
    assert isinstance(hot, ir.Switch) and [c.when for c in hot.cases] == ["{{steps.score.output.score}} >= 80"]
    agent_branch = hot.cases[0].node
    assert agent_branch.id == "route_hot.true.hot_handler" and agent_branch.agent == "hot_handler"
    assert agent_branch.input == "{{steps.score.output}}"  # the conditional's input
    warm = hot.default
    assert isinstance(warm, ir.Switch) and warm.id == "route_warm"
    assert warm.cases[0].node.id == "warm" and warm.cases[0].node.agent == "warm_handler"
    assert warm.default.id == "route_warm.false.cold_handler"
    assert [leaf.id for leaf in plan.leaves()] == [
        "score",
        "route_hot.true.hot_handler",
        "warm",
        "route_warm.false.cold_handler",
        "report",
    ]


def test_quoted_true_false_keys_mean_the_same(tmp_path):
    text = swap(
        ROUTING,
        "        true: hot_handler\n        false: route_warm",
        '        "true": hot_handler\n        "false": route_warm',
    )
    assert plan_of(tmp_path, text).branches == plan_of(tmp_path, ROUTING).branches


def test_loop_and_map_compile(tmp_path):
    plan = plan_of(tmp_path, LOOP_MAP)
    check(plan)
    by_id = nodes(plan)
    summaries = by_id["summaries"]
    assert isinstance(summaries, ir.Map) and summaries.over == "{{steps.split.output.chunks}}"
    assert summaries.concurrency == 4 and summaries.store_as == "summary"
    assert summaries.body.id == "summaries.summarizer" and summaries.body.timeout_s == 90
    assert summaries.reduce.id == "summaries.reducer" and summaries.reduce.output_format == "markdown"
    polish = by_id["polish"]
    assert isinstance(polish, ir.Loop) and polish.max_iterations == 4 and polish.timeout_s == 600
    assert polish.body.agent == "writer" and polish.validator.agent == "critic"
    assert plan.order == ["split", "summaries", "polish"]


# ---- errors ------------------------------------------------------------------------------------


def test_wrong_indentation_is_a_yaml_error_at_its_line(tmp_path):
    text = swap(BASE, "      agent: editor\n", "     agent: editor\n")
    message = error(tmp_path, text)
    assert message.startswith(at(tmp_path, text, "     agent: editor", 6) + "YAML syntax")
    assert message.endswith("hint: check the indentation of this line against the lines above it")


def test_steps_dedented_out_of_workflow_is_one_error(tmp_path):
    text = swap(BASE, "  steps:", "steps:")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "steps:") + "unknown key 'steps'\n"
        "  hint: 'steps:' belongs under 'workflow:'; check its indentation"
    )


def test_misspelled_key_is_one_error_with_did_you_mean(tmp_path):
    text = swap(BASE, '      prompt: "Edit this."', '      promt: "Edit this."')
    assert error(tmp_path, text) == at(tmp_path, text, "promt:") + "unknown key 'promt'\n  hint: did you mean 'prompt'?"


def test_unknown_step_type(tmp_path):
    text = swap(BASE, "      agent: editor\n      type: sequential", "      agent: editor\n      type: seqential")
    message = error(tmp_path, text)
    assert message.startswith(at(tmp_path, text, "type: seqential") + "workflow.steps.1.type: Input should be")
    assert message.endswith("hint: did you mean 'sequential'?")


def test_sequential_step_without_agent(tmp_path):
    text = swap(BASE, "      agent: editor\n", "")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "- id: edit", 7) + "step 'edit' is of type sequential but has no 'agent:'\n"
        "  hint: name the agent that runs it: agent: <agent_id>"
    )


def test_parallel_key_on_a_sequential_step(tmp_path):
    text = swap(BASE, "      agent: editor\n", "      agent: editor\n      parallel:\n        - agent: critic\n")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "parallel:")
        + "'parallel:' only applies to steps of type parallel, and 'edit' is sequential\n"
        "  hint: set type: parallel, or remove 'parallel:'"
    )


def test_shape_key_without_type_says_which_type(tmp_path):
    text = swap(Path(SCORING).read_text(), "      type: parallel\n", "")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "parallel:")
        + "step 'parallel_scoring' has 'parallel:' but no type:\n  hint: add type: parallel"
    )


def test_key_the_step_type_ignores_is_an_error(tmp_path):
    text = swap(Path(SCORING).read_text(), "      type: parallel\n", "      type: parallel\n      agent: aggregator\n")
    message = error(tmp_path, text)
    assert message.startswith(
        at(tmp_path, text, "agent: aggregator") + "'agent:' is not used by a parallel step ('parallel_scoring')"
    )


def test_undefined_agent_in_a_step(tmp_path):
    text = swap(BASE, "agent: editor", "agent: edtor")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "agent: edtor")
        + "agent 'edtor' is not defined under agents:\n  hint: did you mean 'editor'?"
    )


def test_undefined_agent_in_fallback(tmp_path):
    text = swap(
        BASE, '      prompt: "Edit this."', '      prompt: "Edit this."\n      retry: {on_failure: "fallback:critc"}'
    )
    assert error(tmp_path, text) == (
        at(tmp_path, text, "on_failure") + "agent 'critc' is not defined under agents:\n  hint: did you mean 'critic'?"
    )


def test_agent_cannot_be_its_own_fallback(tmp_path):
    text = swap(
        BASE, '      prompt: "Edit this."', '      prompt: "Edit this."\n      retry: {on_failure: "fallback:editor"}'
    )
    assert error(tmp_path, text).startswith(at(tmp_path, text, "on_failure") + "agent 'editor' is its own fallback")


def test_undefined_condition_target(tmp_path):
    text = swap(ROUTING, "true: hot_handler", "true: hot_handlr")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "true: hot_handlr") + "'hot_handlr' is neither a step id nor an agent id\n"
        "  hint: did you mean 'hot_handler'?"
    )


def test_condition_naming_its_own_step(tmp_path):
    text = swap(ROUTING, "true: hot_handler", "true: route_hot")
    assert error(tmp_path, text).startswith(
        at(tmp_path, text, "true: route_hot") + "the condition of 'route_hot' names its own step"
    )


def test_condition_with_no_branch(tmp_path):
    text = swap(ROUTING, "        true: warm\n        false: cold_handler\n", "")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "condition:", nth=1) + "the condition of 'route_warm' names nothing to run\n"
        "  hint: add true: and/or false:, each a step id or an agent id"
    )


def test_undefined_input_in_an_agent_prompt_points_at_its_line_in_the_block(tmp_path):
    text = swap(BASE, "        Keep it short.", "        Keep it {{inputs.nope}} short.")
    # The line of the reference inside the `|` block, not the line of `prompt:`.
    assert error(tmp_path, text) == (
        at(tmp_path, text, "Keep it {{inputs.nope}}", 1) + "undefined reference 'inputs.nope': no input 'nope'\n"
        "  hint: declare it under inputs:"
    )


def test_misspelled_input_suggests_the_declared_one(tmp_path):
    text = swap(BASE, 'input: "{{inputs.topic}}"', 'input: "{{inputs.topc}}"')
    assert error(tmp_path, text) == (
        at(tmp_path, text, 'input: "{{inputs.topc}}"')
        + "undefined reference 'inputs.topc': no input 'topc'\n  hint: did you mean 'topic'?"
    )


def test_undefined_step_reference(tmp_path):
    text = swap(BASE, "{{steps.draft.output}}", "{{steps.nope.output}}")
    assert error(tmp_path, text) == (
        at(tmp_path, text, 'input: "{{steps.nope') + "undefined reference 'steps.nope.output': no step 'nope'\n"
        "  hint: steps: draft, edit"
    )


def test_step_reference_without_output(tmp_path):
    text = swap(BASE, "{{steps.draft.output}}", "{{steps.draft.bogus}}")
    assert error(tmp_path, text) == (
        at(tmp_path, text, 'input: "{{steps.draft.bogus')
        + "undefined reference 'steps.draft.bogus'\n  hint: write steps.draft.output"
    )


def test_undefined_parallel_output_key(tmp_path):
    text = swap(Path(SCORING).read_text(), "outputs.intent}}", "outputs.nokey}}")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "{{steps.parallel_scoring.outputs.nokey}}", 1)
        + "undefined reference 'steps.parallel_scoring.outputs.nokey': "
        "step 'parallel_scoring' has no output_key 'nokey'\n"
        "  hint: its keys: firmographic, intent, technographic"
    )


def test_undefined_bare_name(tmp_path):
    text = swap(BASE, "{{steps.draft.output}}", "{{ frist_draft }}")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "{{ frist_draft }}", 7)
        + "undefined reference 'frist_draft'\n  hint: did you mean 'first_draft'?"
    )


def test_bare_input_name_points_to_inputs(tmp_path):
    text = swap(BASE, "{{steps.draft.output}}", "{{ topic }}")
    assert error(tmp_path, text).endswith("undefined reference 'topic'\n  hint: did you mean 'inputs.topic'?")


def test_store_as_name_is_a_reference_and_a_dependency(tmp_path):
    text = swap(BASE, '      input: "{{inputs.topic}}"', '      input: "{{ edited }}"')
    text = swap(
        text,
        '      input: "{{steps.draft.output}}"',
        '      input: "{{inputs.topic}}"\n      output: {store_as: edited}',
    )
    assert plan_of(tmp_path, text).order == ["edit", "draft"]


def test_two_step_cycle_is_named(tmp_path):
    text = swap(BASE, 'input: "{{inputs.topic}}"', 'input: "{{steps.edit.output}}"')
    assert error(tmp_path, text) == (
        at(tmp_path, text, "- id: draft", 7) + "circular dependency between steps: draft → edit → draft\n"
        "  hint: a step can only read the output of steps that do not read its own"
    )


def test_three_step_cycle_through_an_agent_prompt_is_named(tmp_path):
    text = swap(BASE, "Keep it short.", "Keep it short, unlike {{ steps.review.output }}.")
    text += '    - id: review\n      agent: critic\n      input: "{{steps.edit.output}}"\n'
    assert error(tmp_path, text).startswith(
        at(tmp_path, text, "- id: draft", 7) + "circular dependency between steps: draft → review → edit → draft"
    )


def test_step_reading_its_own_output(tmp_path):
    text = swap(BASE, "{{steps.draft.output}}", "{{steps.edit.output}}")
    assert error(tmp_path, text).startswith(
        at(tmp_path, text, "- id: edit", 7) + "step 'edit' reads its own output (steps.edit)"
    )


def test_duplicate_step_ids(tmp_path):
    text = swap(BASE, "- id: edit", "- id: draft")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "id: draft", nth=1) + "two steps are both named 'draft'\n"
        "  hint: the other is step 1; step ids must be unique"
    )


def test_duplicate_store_as(tmp_path):
    text = swap(
        BASE,
        '      input: "{{steps.draft.output}}"',
        '      input: "{{steps.draft.output}}"\n      output:\n        store_as: first_draft',
    )
    assert error(tmp_path, text) == (
        at(tmp_path, text, "store_as: first_draft", nth=1) + "steps 'draft' and 'edit' both store_as 'first_draft'\n"
        "  hint: each stored name must be unique"
    )


@pytest.mark.parametrize("name", ["workdir", "steps", "input", "feedback", "agent_type", "output"])
def test_a_memory_key_may_not_hide_a_built_in_name_in_a_pipeline(tmp_path, name):
    text = (
        "workflow:\n  name: p\n  agents:\n    a: {prompt: go}\n  steps:\n"
        f"    - id: s\n      agent: a\n      output: {{store_as: {name}}}\n"
    )
    message = error(tmp_path, text)
    assert message.startswith(at(tmp_path, text, "store_as"))
    assert f"store_as '{name}' would hide a name templates read: '{name}' is a built-in name" in message
    assert message.endswith("hint: pick another name")


def test_wait_more_than_the_agents(tmp_path):
    text = swap(Path(SCORING).read_text(), "wait: all", "wait: 5")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "wait: 5")
        + "wait: 5 but the step has 3 agents\n  hint: use all, any, or a number from 1 to 3"
    )


@pytest.mark.parametrize("value", ["some", "yes"])
def test_wait_that_is_no_policy_is_one_error(tmp_path, value):
    text = swap(Path(SCORING).read_text(), "wait: all", f"wait: {value}")
    message = error(tmp_path, text)
    assert message.startswith(at(tmp_path, text, f"wait: {value}") + "workflow.steps.0.wait:")
    assert message.endswith("hint: use all, any, or how many agents must finish (a number)")


def test_wait_any_and_a_count(tmp_path):
    for value, expected in (("any", "any"), ("2", 2), ('"2"', 2)):
        text = swap(Path(SCORING).read_text(), "wait: all", f"wait: {value}")
        assert plan_of(tmp_path, text).root.children[0].wait == expected


@pytest.mark.parametrize(
    ("where", "old", "new"),
    [
        ("global", 'timeout: "10m"', 'timeout: "10 minutes"'),
        ("agent", '      prompt: "Edit this."', '      prompt: "Edit this."\n      timeout: soon'),
    ],
)
def test_bad_durations(tmp_path, where, old, new):
    text = swap(BASE, old, new)
    bad = "10 minutes" if where == "global" else "soon"
    assert error(tmp_path, text) == (
        at(tmp_path, text, "timeout:" if where == "global" else "timeout: soon")
        + f"'{bad}' is not a duration; write 90, '90s', '30m' or '2h'\n"
        "  hint: write a duration like '90s', '5m' or '2h'"
    )


def test_on_failure_retry_is_not_a_policy(tmp_path):
    text = swap(
        BASE, '      prompt: "Edit this."', '      prompt: "Edit this."\n      retry:\n        on_failure: retry'
    )
    message = error(tmp_path, text)
    assert message.startswith(
        at(tmp_path, text, "on_failure: retry")
        + "workflow.agents.editor.retry.on_failure: must be skip, abort or fallback:<agent_id>"
    )
    assert "hint: retries are set with max_attempts" in message


def test_function_call_in_a_condition_is_refused(tmp_path):
    text = swap(ROUTING, '"{{steps.score.output.score}} >= 80"', '"len({{steps.score.output.score}}) >= 80"')
    assert error(tmp_path, text) == (
        at(tmp_path, text, 'eval: "len') + "function calls are not allowed in conditions: len()\n"
        "  hint: conditions use ==, !=, <, <=, >, >=, and, or, not, in and literals"
    )


def test_map_over_must_be_one_reference(tmp_path):
    text = swap(LOOP_MAP, '"{{steps.split.output.chunks}}"', '"[1, 2]"')
    assert error(tmp_path, text) == (
        at(tmp_path, text, "over:") + "'[1, 2]' must be a single reference\n"
        "  hint: write one reference, like {{ steps.split.output.chunks }}"
    )


def test_map_item_in_an_agent_that_also_runs_outside_the_map(tmp_path):
    text = swap(LOOP_MAP, "reduce: reducer", "reduce: summarizer")
    assert error(tmp_path, text).startswith(
        at(tmp_path, text, 'prompt: "Summarize') + "'item' is not set here: only a map's agent (map: agent:) gets it"
    )


def test_loop_feedback_in_an_agent_that_also_runs_as_a_plain_step(tmp_path):
    text = swap(
        Path(PROPOSAL).read_text(), "        Format: Markdown.\n", "        Format: Markdown.\n        {{ feedback }}\n"
    )
    assert error(tmp_path, text).startswith(
        at(tmp_path, text, "{{ feedback }}", 1)
        + "'feedback' is not set here: only a loop's agent (loop: agent:) gets it"
    )


def test_bad_input_default_is_found_at_load(tmp_path):
    text = swap(BASE, "  agents:", "    - name: count\n      type: number\n      default: many\n  agents:")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "default: many") + "default of input 'count': 'many' is not a number\n"
        "  hint: write a number value, or leave default: out"
    )


def test_duplicate_input_names(tmp_path):
    text = swap(BASE, "  agents:", "    - name: topic\n  agents:")
    assert error(tmp_path, text) == (
        at(tmp_path, text, "name: topic", nth=1) + "two inputs are both named 'topic'\n"
        "  hint: input names must be unique; rename or remove one"
    )


# ---- inputs ------------------------------------------------------------------------------------

TYPED = """\
workflow:
  name: typed
  inputs:
    - {name: count, type: number, required: true}
    - {name: flag, type: boolean, required: true}
    - {name: data, type: json, required: true}
    - {name: brief, type: file_path, required: true}
    - {name: note, type: string, default: "none given"}
  agents:
    a: {prompt: "{{inputs.count}} {{inputs.flag}} {{inputs.data}} {{inputs.brief}} {{inputs.note}}"}
  steps:
    - {id: only, agent: a}
"""


def test_missing_required_inputs_are_named_in_one_error(tmp_path):
    plan = plan_of(tmp_path, TYPED)
    with pytest.raises(SpecError) as info:
        params.bind(plan, {"flag": True})
    missing = [p.message for p in info.value.problems]
    assert missing == [
        "missing required param 'count'",
        "missing required param 'data'",
        "missing required param 'brief'",
    ]
    assert info.value.problems[0].line == 4 and "hint: pass it with -p count=VALUE" in str(info.value)


def test_inputs_are_typed_and_defaulted(tmp_path):
    plan = plan_of(tmp_path, TYPED)
    brief = tmp_path / "brief.txt"
    brief.write_text("hello")
    values = params.bind(plan, {"count": "42", "flag": "yes", "data": '{"name": "Ada"}', "brief": str(brief)})
    assert values == {"count": 42, "flag": True, "data": {"name": "Ada"}, "brief": str(brief), "note": "none given"}
    assert params.bind(plan, {"count": 1.5, "flag": "false", "data": "[1]", "brief": str(brief)})["count"] == 1.5


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("count", "many", "'many' is not a number"),
        ("flag", "maybe", "'maybe' is not a boolean"),
        ("data", "{oops", "not valid JSON"),
        ("brief", "no/such/file.txt", "no file at 'no/such/file.txt'"),
    ],
)
def test_badly_typed_inputs(tmp_path, name, value, says):
    plan = plan_of(tmp_path, TYPED)
    (tmp_path / "b.txt").write_text("x")
    given = {"count": 1, "flag": True, "data": "{}", "brief": str(tmp_path / "b.txt"), name: value}
    with pytest.raises(SpecError) as info:
        params.bind(plan, given)
    [problem] = info.value.problems
    assert problem.message.startswith(f"param '{name}': {says}")


def test_cli_params_from_values_and_files(tmp_path):
    (tmp_path / "lead.json").write_text('{"name": "Ada"}')
    plan = plan_of(tmp_path, TYPED)
    given = dict(
        prepare.cli_params(
            ["count=42", "flag=true", f"data=@{tmp_path / 'lead.json'}", f"brief={tmp_path / 'lead.json'}"]
        )
    )
    values = params.bind(plan, given)
    assert values["count"] == 42 and values["flag"] is True and values["data"] == {"name": "Ada"}
    with pytest.raises(SpecError, match="KEY=VALUE"):
        prepare.cli_params(["count"])


def test_ask_missing_prompts_on_a_terminal_only(tmp_path, monkeypatch):
    plan = plan_of(tmp_path, TYPED)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    assert prepare.ask_missing(plan, {"count": 1}) == {"count": 1}
    asked = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(prepare.Prompt, "ask", lambda text: asked.append(text) or "7")
    answers = prepare.ask_missing(plan, {"count": 1})
    assert answers == {"count": 1, "flag": "7", "data": "7", "brief": "7"}
    assert asked == ["flag [boolean]", "data [json]", "brief [file_path]"]


def test_prepare_checks_the_spec_and_inputs_before_temporal(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    args = argparse.Namespace(
        param=["company_name=Acme"],
        spec=PROPOSAL,
        agent=[],
        workdir=str(tmp_path),
        resume_from=None,
        max_iterations=None,
        lenient=False,
    )
    with pytest.raises(SpecError) as info:
        prepare.prepare(args)
    assert [p.message for p in info.value.problems] == [
        "missing required param 'contact_name'",
        "missing required param 'our_services'",
    ]


# ---- agent output stays data -------------------------------------------------------------------


def test_agent_output_is_never_rendered_as_a_template():
    assert (
        render("Research: {{ steps.research.output }}", {"steps": {"research": {"output": "{{ 7*7 }}"}}})
        == "Research: {{ 7*7 }}"
    )
    assert (
        render("{{ research_data }}", {"research_data": "{% for x in range(3) %}x{% endfor %}"})
        == "{% for x in range(3) %}x{% endfor %}"
    )


def test_agent_output_cannot_rewrite_a_condition():
    context = {"steps": {"classify": {"output": {"category": "cold' or 'x"}}}}
    assert expressions.condition("{{steps.classify.output.category}} == 'hot'", context) == (False, None)


# ---- the validate command ----------------------------------------------------------------------


def _validate(path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentrun.client", "validate", path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1"},
    )


def test_validate_command_accepts_a_good_pipeline():
    result = _validate(PROPOSAL)
    assert result.returncode == 0, result.stderr
    assert "valid pipeline spec 'research-to-proposal' with 6 task(s)" in result.stdout
    assert "review.reviewer (task)" in result.stdout


def test_validate_command_rejects_a_bad_pipeline_with_file_and_line(tmp_path):
    text = swap(BASE, "agent: editor", "agent: edtor")
    path = write_spec(tmp_path, text)
    result = _validate(str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        at(tmp_path, text, "agent: edtor")
        + "agent 'edtor' is not defined under agents:\n  hint: did you mean 'editor'?"
    )
    assert result.stdout == ""
