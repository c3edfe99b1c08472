"""Humans in the loop, compensations and budgets in both spec languages: the IR each key compiles
to, and the one clear error (exact file:line:column and hint) a user gets for each likely mistake.
Pure: no Temporal, no agents.
"""

from __future__ import annotations

import pytest

from agentrun.explain.describe import dry_run_text, inspect_text
from agentrun.explain.graph import draw
from agentrun.lang import ir
from agentrun.lang.check import agent_ids, check
from agentrun.lang.errors import SpecError
from tests.specs import at, error, nodes, plan_of, swap

# ---- task tree ---------------------------------------------------------------------------------

TREE = """\
name: ship
description: Ship the release
budget: {tokens: 200000, on_exceeded: pause}
subtasks:
  region:
    human:
      prompt: "Which region?"
      choices: [eu, us]
      timeout: 1h
      on_timeout: eu
  build:
    instructions: "Build for {{ human.region }}"
    agent: builder
    compensate: "Delete the build {{ output }}"
  deploy:
    approval: {prompt: "Deploy to {{ human.region }}?", on_reject: skip}
    budget: {usd: 2}
    subtasks:
      push:
        provider_call: {provider: shell, method: run, params: {command: push}}
        compensate:
          provider_call: {provider: shell, method: run, params: {command: "unpush {{ output }}"}}
      notes:
        instructions: "Write notes: {{ human.why }}"
        human: {id: why, prompt: "Why ship now?"}
"""


def test_tree_human_alone_is_a_human_node(tmp_path):
    region = plan_of(tmp_path, TREE).root.children[0]
    # A task with no subtasks is its work: here the question, under the task's id.
    assert region == ir.Human(
        id="region",
        title="region",
        prompt="Which region?",
        choices=["eu", "us"],
        timeout_s=3600,
        on_timeout="eu",
        line=6,
    )


def test_tree_human_before_instructions_is_a_gate_the_instructions_read(tmp_path):
    plan = plan_of(tmp_path, TREE)
    notes = next(leaf for leaf in plan.leaves() if leaf.id == "deploy.notes")
    assert isinstance(notes, ir.Task) and notes.prompt == "Write notes: {{ human.why }}"
    assert notes.gate == ir.Human(id="why", title="notes", prompt="Why ship now?", line=25)
    assert [g.id for g in plan.gates()] == ["region", "deploy", "why"]


def test_tree_approval_guards_a_leaf_on_its_work_and_a_group_on_its_sequence(tmp_path):
    text = swap(TREE, "    agent: builder\n", "    agent: builder\n    approval: true\n")
    by_id = {n.id: n for n in plan_of(tmp_path, text).walk() if n.gate}
    build, deploy = by_id["build"], by_id["deploy"]
    assert isinstance(build, ir.Task) and build.gate == ir.Human(
        id="build", title="build", approval=True, choices=["approve", "reject"], prompt="Approve 'build'?", line=14
    )
    assert isinstance(deploy, ir.Sequence) and deploy.gate.on_reject == "skip"
    assert deploy.gate.prompt == "Deploy to {{ human.region }}?" and deploy.gate.approval
    assert deploy.budget == ir.Budget(usd=2)


def test_tree_compensate_forms(tmp_path):
    plan = plan_of(tmp_path, TREE)
    leaves = {leaf.id: leaf for leaf in plan.leaves()}
    assert leaves["build"].compensation == ir.Task(
        id="build.compensate",
        title="undo build",
        agent="builder",
        prompt="Delete the build {{ output }}",
        protocol="status",
        retry=ir.Retry(attempts=3, backoff="exponential", delay_s=1.0),
        line=14,
    )
    push = leaves["deploy.push"].compensation
    assert isinstance(push, ir.Provider) and push.id == "deploy.push.compensate"
    assert push.call.params == {"command": "unpush {{ output }}"} and push.retry.attempts == 3
    text = swap(
        TREE,
        '    compensate: "Delete the build {{ output }}"',
        '    compensate: {instructions: "Undo", agent: janitor, max_attempts: 5}',
    )
    undo = nodes(plan_of(tmp_path, text))["build"].compensation  # the task, after its sequence
    assert undo.agent == "janitor" and undo.retry.attempts == 5


def test_tree_run_budget_goal_constraints_and_prices(tmp_path):
    plan = plan_of(tmp_path, TREE)
    assert plan.budget == ir.Budget(tokens=200000, on_exceeded="pause") and plan.root.budget is None
    assert plan.goal == "Ship the release" and plan.constraints == [] and plan.prices == {}
    text = TREE.replace(
        "budget: {tokens",
        'goal: "Ship without downtime"\nconstraints: [no friday deploys]\n'
        "prices:\n  gpt-4o: {input: 2.5, output: 10}\nbudget: {tokens",
        1,
    )
    plan = plan_of(tmp_path, text)
    assert plan.goal == "Ship without downtime" and plan.constraints == ["no friday deploys"]
    assert plan.prices == {"gpt-4o": ir.Price(input=2.5, output=10)}


TREE_MISTAKES = [
    # (what the user wrote instead, the text that gets the error, message, hint)
    (
        '      prompt: "Which region?"',
        '      promt: "Which region?"',
        "promt",
        "unknown key 'promt'",
        "did you mean 'prompt'?",
    ),
    ("on_reject: skip}", "on_rejct: skip}", "on_rejct", "unknown key 'on_rejct'", "did you mean 'on_reject'?"),
    ("budget: {usd: 2}", "budget: {uds: 2}", "uds", "unknown key 'uds'", "did you mean 'usd'?"),
    (
        "budget: {usd: 2}",
        "budget: {on_exceeded: pause}",
        "budget: {on",
        "subtasks.deploy.budget: a budget needs tokens: or usd:",
        "give a limit: budget: {tokens: 200000}",
    ),
    (
        "budget: {usd: 2}",
        "budget: {usd: -1}",
        "usd:",
        "subtasks.deploy.budget.usd: must be more than 0",
        "a budget is a positive number of US dollars",
    ),
    (
        '    compensate: "Delete the build {{ output }}"',
        '    compensate: {instrutions: "Delete"}',
        "instrutions",
        "unknown key 'instrutions'",
        "did you mean 'instructions'?",
    ),
    (
        "      on_timeout: eu",
        "      on_timeout: asia",
        "on_timeout",
        "on_timeout 'asia' is not fail, continue or one of the choices",
        "write fail, continue or one of: eu, us",
    ),
    (
        "on_reject: skip}",
        "on_reject: skip, on_timeout: maybe}",
        "on_timeout: maybe",
        "on_timeout 'maybe' is not fail, continue or one of the choices",
        "write fail, continue or one of: approve, reject",
    ),
    (
        "      choices: [eu, us]",
        "      choices: [yes, no]",
        "choices",
        "subtasks.region.human.choices: YAML reads yes, no, on, off, true and false as booleans",
        'quote them: choices: ["yes", "no"]',
    ),
    (
        "      notes:\n",
        "      region: {instructions: Check, approval: true}\n      notes:\n",
        "approval: true",
        "two gates are both named 'region'",
        "the other is at line 6; give this one its own id: under approval:",
    ),
    (
        'prompt: "Why ship now?"}\n',
        'prompt: "Why ship now?"}\n        approval: true\n',
        "approval: true",
        "task 'notes' has both human: and approval:",
        "use one: approval: asks approve or reject",
    ),
    (
        "    budget: {usd: 2}\n",
        "    budget: {usd: 2}\n    compensate: Roll back\n",
        "compensate: Roll",
        "task 'deploy' has compensate: but no work of its own to undo",
        "compensate undoes a task's instructions or provider_call; put it on the subtask whose effect it undoes",
    ),
    ("{{ human.why }}", "{{ human.wyh }}", 'instructions: "Write notes', "undefined gate 'wyh'", "did you mean 'why'?"),
    (
        "{{ human.why }}",
        "{{ human.nosuch }}",
        'instructions: "Write notes',
        "undefined gate 'nosuch'",
        "gates: region, deploy, why",
    ),
    (
        "    agent: builder\n",
        "    agent: builder\n    goal: win\n",
        "goal:",
        "'goal:' applies to the whole run, not to task 'build'",
        "move it to the top level of the spec",
    ),
]


def test_tree_gate_id_clashing_with_a_task_or_a_budget_gate_is_found_by_check(tmp_path):
    text = swap(TREE, "      notes:\n", '      confirm:\n        human: {id: build, prompt: "Sure?"}\n      notes:\n')
    with pytest.raises(SpecError) as info:
        check(plan_of(tmp_path, text))
    [problem] = info.value.problems
    assert (problem.line, problem.message) == (24, "two tasks are both named 'build'")
    assert problem.hint == "the other one is at line 11; rename one, or give the gate its own id:"
    with pytest.raises(SpecError, match="gate id 'budget' is kept for paused budgets"):
        check(plan_of(tmp_path, swap(swap(TREE, "{id: why,", "{id: budget,"), "human.why", "human.budget")))


def test_agent_ids_include_compensation_and_fallback_agents(tmp_path):
    plan = plan_of(tmp_path, TREE.replace('"Delete the build {{ output }}"', "{instructions: Undo, agent: janitor}"))
    check(plan)
    assert agent_ids(plan) == {"builder", "janitor", "default"}


# ---- pipeline ----------------------------------------------------------------------------------

PIPE = """\
workflow:
  name: publish
  description: Write and publish a post
  constraints: [no profanity]
  budget: {usd: 3, on_exceeded: pause}
  prices:
    gpt-4o-mini: {input: 0.15, output: 0.6}
  agents:
    writer:
      prompt: "Write about {{ human.topic }}"
    publisher:
      prompt: "Publish {{ input }}"
    cleaner:
      prompt: "Clean up"
  steps:
    - id: draft
      agent: writer
      compensate: "Delete the draft {{ output }}"
      budget: {tokens: 5000}
    - id: topic
      type: human
      prompt: "Which topic?"
      choices: [cats, dogs]
      timeout: 1h
      on_timeout: cats
      output: {store_as: chosen}
    - id: publish
      agent: publisher
      input: "{{ steps.draft.output }}"
      approval: {prompt: "Publish {{ steps.draft.output }}?", timeout: 2h, on_reject: skip}
    - id: fan
      type: parallel
      parallel: [{agent: writer}, {agent: publisher}]
      compensate: {agent: cleaner, prompt: "Retract {{ output }}"}
"""


def test_pipeline_human_step_is_a_human_node_ordered_before_its_readers(tmp_path):
    plan = plan_of(tmp_path, PIPE)
    check(plan)
    # draft's agent reads human.topic, so the question is asked first.
    assert plan.order == ["topic", "draft", "publish", "fan"]
    assert plan.root.children[0] == ir.Human(
        id="topic",
        title="topic",
        step=True,
        store_as="chosen",
        prompt="Which topic?",
        choices=["cats", "dogs"],
        timeout_s=3600,
        on_timeout="cats",
        line=20,
    )


def test_pipeline_human_output_is_a_step_output_for_later_steps(tmp_path):
    text = swap(PIPE, 'input: "{{ steps.draft.output }}"', 'input: "{{ steps.topic.output }} {{ chosen }}"')
    text = swap(text, "Write about {{ human.topic }}", "Write")
    assert plan_of(tmp_path, text).order == ["draft", "topic", "publish", "fan"]


def test_pipeline_approval_compensate_budget_and_workflow_keys(tmp_path):
    plan = plan_of(tmp_path, PIPE)
    by_id = nodes(plan)
    assert by_id["publish"].gate == ir.Human(
        id="publish",
        title="publish",
        approval=True,
        choices=["approve", "reject"],
        prompt="Publish {{ steps.draft.output }}?",
        timeout_s=7200,
        on_reject="skip",
        line=30,
    )
    assert by_id["draft"].compensation == ir.Task(
        id="draft.compensate",
        title="undo draft",
        agent="writer",
        prompt="Delete the draft {{ output }}",
        protocol="plain",
        retry=ir.Retry(attempts=3, backoff="exponential", delay_s=1.0),
        line=18,
    )
    assert by_id["fan"].compensation.agent == "cleaner" and by_id["fan"].compensation.prompt == "Retract {{ output }}"
    assert by_id["draft"].budget == ir.Budget(tokens=5000)
    assert plan.budget == ir.Budget(usd=3, on_exceeded="pause") and plan.goal == "Write and publish a post"
    assert plan.constraints == ["no profanity"] and plan.prices["gpt-4o-mini"] == ir.Price(input=0.15, output=0.6)
    assert agent_ids(plan) == {"writer", "publisher", "cleaner"}
    assert plan_of(tmp_path, PIPE.replace("  constraints:", '  goal: "Sell more"\n  constraints:')).goal == "Sell more"


def test_pipeline_step_may_read_its_own_approval(tmp_path):
    text = swap(PIPE, 'prompt: "Publish {{ input }}"', 'prompt: "Publish {{ input }} ({{ human.publish }})"')
    assert plan_of(tmp_path, text).order == ["topic", "draft", "publish", "fan"]


PIPE_MISTAKES = [
    (
        "      type: human\n",
        "      type: human\n      agent: cleaner\n",
        "agent: cleaner",
        "'agent:' is not used by a human step ('topic')",
        "remove it; a human step asks a person",
    ),
    ("      type: human\n", "", 'prompt: "Which topic?"', "step 'topic' has 'prompt:' but no type:", "add type: human"),
    (
        "      on_timeout: cats",
        "      on_timeout: cat",
        "on_timeout",
        "on_timeout 'cat' is not fail, continue or one of the choices",
        "did you mean 'cats'?",
    ),
    (
        "timeout: 2h, on_reject: skip}",
        "timeout: 2h, on_rejekt: skip}",
        "on_rejekt",
        "unknown key 'on_rejekt'",
        "did you mean 'on_reject'?",
    ),
    (
        "      on_timeout: cats\n",
        "      on_timeout: cats\n      approval: true\n",
        "approval: true",
        "'approval:' is not used by a human step ('topic')",
        "remove it; a human step asks a person",
    ),
    (
        'compensate: {agent: cleaner, prompt: "Retract {{ output }}"}',
        'compensate: "Retract {{ output }}"',
        'compensate: "Retract',
        "compensate: on the parallel step 'fan' must name the agent that undoes it",
        'write compensate: {agent: <agent id>, prompt: "..."}',
    ),
    (
        "{agent: cleaner, prompt:",
        "{agent: cleanr, prompt:",
        "agent: cleanr",
        "agent 'cleanr' is not defined under agents:",
        "did you mean 'cleaner'?",
    ),
    ("{agent: cleaner, prompt:", "{agent: cleaner, promt:", "promt", "unknown key 'promt'", "did you mean 'prompt'?"),
    ("budget: {tokens: 5000}", "budget: {tokns: 5000}", "tokns", "unknown key 'tokns'", "did you mean 'tokens'?"),
    (
        "budget: {tokens: 5000}",
        "budget: {on_exceeded: pause}",
        "budget: {on",
        "workflow.steps.0.budget: a budget needs tokens: or usd:",
        "give a limit",
    ),
    ("{{ human.topic }}", "{{ human.nosuch }}", 'prompt: "Write', "undefined gate 'nosuch'", "gates: topic, publish"),
    ("{{ human.topic }}", "{{ human.draft }}", 'prompt: "Write', "undefined gate 'draft'", "gates: topic, publish"),
    (
        "Publish {{ input }}",
        "Publish {{ output }}",
        'prompt: "Publish',
        "undefined reference 'output'",
        "'output' is set only in compensate:",
    ),
    ("  constraints:", "  constrains:", "constrains", "unknown key 'constrains'", "did you mean 'constraints'?"),
]


def test_output_outside_a_compensation_is_a_warning_in_a_task_tree(tmp_path):
    """A name no value is given for renders empty in a task tree, as in cyberian: said, not refused."""
    text = swap(TREE, '"Build for {{ human.region }}"', '"Build for {{ output }}"')
    warnings = plan_of(tmp_path, text).warnings
    [warning] = [w for w in warnings if "undeclared" in w]
    assert any("this shell command reads 'output'" in w for w in warnings)  # the undo's command
    place = at(tmp_path, text, 'instructions: "Build').replace("error: ", "warning: ")
    assert warning.startswith(place + "undeclared template variable 'output': renders empty unless given with -p")
    assert warning.endswith("hint: 'output' is set only in compensate: (the output of the task being undone)")


@pytest.mark.parametrize(
    ("spec", "old", "new", "needle", "message", "hint"),
    [(TREE, *m) for m in TREE_MISTAKES] + [(PIPE, *m) for m in PIPE_MISTAKES],
)
def test_mistakes_get_one_clear_error(tmp_path, spec, old, new, needle, message, hint):
    text = swap(spec, old, new)
    problem = error(tmp_path, text)
    assert problem.startswith(at(tmp_path, text, needle) + message), problem
    assert f"\n  hint: {hint}" in problem


# ---- inspect, dry-run and the graph ------------------------------------------------------------


def test_inspect_and_graph_show_questions_gates_undo_and_budgets(tmp_path):
    plan = plan_of(tmp_path, PIPE)
    text = inspect_text(plan)
    assert "Budget for the whole run: $3; over it the run pauses for a person to raise it\n" in text
    assert "Prices per million tokens: gpt-4o-mini $0.15 in, $0.6 out\n" in text
    assert (
        "  1. topic — human: Which topic? [cats, dogs]; waits at most 1h, then takes 'cats'; output stored as chosen\n"
    ) in text
    assert (
        "     undo: writer, prompt: Delete the draft {{ output }}\n     budget: 5000 tokens; over it the run fails\n"
    ) in text
    assert (
        "     needs approval (gate publish): Publish {{ steps.draft.output }}?; waits at most 2h, then the "
        "run fails; on reject: skipped, the run goes on\n"
    ) in text
    assert draw(plan).splitlines()[0] == "[1. human: topic] --> [2. writer (undo: writer; budget 5000 tokens)] -->"
    assert "--> [3. publisher (needs approval)] --> (undo: cleaner) -|" in draw(plan)


def test_task_tree_groups_show_their_gate_on_their_first_task(tmp_path):
    plan = plan_of(tmp_path, TREE)
    text = inspect_text(plan)
    assert (
        "  3. push: provider shell.run\n"
        "     deploy and its subtasks: needs approval (gate deploy): Deploy to {{ human.region }}?; "
        "on reject: skipped, the run goes on\n"
        "     deploy and its subtasks: budget: $2; over it the run fails\n"
        "     undo: provider shell.run\n"
    ) in text
    assert "  4. notes (default)\n     asks a person first (gate why): Why ship now?\n" in text
    assert "--> (deploy: needs approval; budget $2) --> [3. push (undo: provider shell.run)] -->" in draw(plan)


def test_dry_run_asks_without_anyone_answering(tmp_path):
    text = dry_run_text(plan_of(tmp_path, PIPE), {}, ("", {"writer": "openai:a", "publisher": "openai:b"}))
    assert (
        "  1. topic — asks a person (gate topic; no agent)\n"
        "     prompt (1 line):\n"
        "       | Which topic?\n"
        "     expected answer: one of cats, dogs, stored as chosen\n"
        "     waits at most 1h, then takes 'cats'\n"
    ) in text
    assert "       | Write about <answer to topic>\n" in text
    assert "Problems a run would meet\n  agent 'cleaner' has no URI: pass --agent cleaner=URI\n" in text
