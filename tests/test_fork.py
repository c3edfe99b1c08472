"""`fork` and `diff` through the command line, against the fake OpenAI-compatible server: what the
agents are (not) asked again, what the fork's report and status say, its parent in the memo and the
search attribute, and the bad inputs refused before anything starts."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from temporalio.service import RPCError

from agentrun.client.runs import fetch_state
from agentrun.lang.load import load
from agentrun.models.contract import PARENT_MEMO, STEP_LOG, RunInput, StepRecord
from tests.conftest import TEST_QUEUE, run_id, write_spec
from tests.runs import open_gate
from tests.trees import Brain, action, composite, tree_file

CHAIN = """workflow:
  name: chain
  agents:
    researcher: {prompt: "Research tea."}
    writer: {prompt: "Write from {{ input }}."}
    checker: {prompt: "Check it as JSON."}
    editor: {prompt: "Edit for {{ input }}."}
  steps:
    - {id: research, agent: researcher}
    - {id: write, agent: writer, input: "{{ steps.research.output }}"}
    - {id: check, agent: checker, input: "{{ steps.write.output }}", output: {format: json}}
    - {id: edit, agent: editor, input: "{{ steps.check.output.verdict }}"}
"""
AGENTS = [f for a in ("researcher", "writer", "checker", "editor") for f in ("--agent", f"{a}=openai:{a}")]


def checker(messages) -> str:
    """Prose unless asked for JSON by name: the chain's check fails until its prompt is changed."""
    return '{"verdict": "fine"}' if "Return JSON" in messages[-1]["content"] else "Looks fine to me."


def failed_chain(cli, llm, tmp_path) -> str:
    llm.by_model.update({"researcher": "tea is green", "writer": "an essay", "checker": checker, "editor": "edited"})
    parent = run_id("chain")
    spec = write_spec(tmp_path, CHAIN)
    result = cli("start", str(spec), *AGENTS, "--id", parent, "--task-queue", run_id("q"))
    assert result.code == 1, result.out + result.err
    return parent


async def test_a_failed_pipeline_forked_at_its_failure_with_a_new_prompt_sends_only_what_changed(
    cli, llm, tmp_path, client
):
    parent = failed_chain(cli, llm, tmp_path)
    fork = run_id("fork")
    result = cli("fork", parent, "--at", "failure", "--prompt", "check=Check it. Return JSON.", "--id", fork)
    assert result.code == 0, result.out + result.err
    # The parent asked three agents; the fork asked only the changed step and the one after it.
    assert [r.model for r in llm.requests] == ["researcher", "writer", "checker", "checker", "editor"]
    assert llm.prompts_for("checker")[1] == "Check it. Return JSON.\n\nInput:\nan essay"
    assert llm.prompts_for("editor") == ["Edit for fine."]
    assert f"forking {parent} at check: 2 step run(s) taken over" in result.out
    assert f"↷ research reused from {parent}" in result.out
    assert f"- Forked from: {parent} at check; 2 step run(s) reused from {parent}" in result.out
    assert "- Total agents deployed: 2" in result.out
    assert "- Changes: prompt of check replaced" in result.out
    assert f"| 1 | research | researcher | SUCCESS (reused from {parent}) |" in result.out
    assert "| 3 | check | checker | SUCCESS |" in result.out and "## Final Output\n\nedited" in result.out

    status = cli("status", fork)
    assert f"  Forked from: {parent} at check; 2 step run(s) reused" in status.out
    assert f"write                          completed  attempts=0 iterations=0 0.0s reused from {parent}" in status.out

    state = await fetch_state(client, fork)
    assert state.parent == parent and state.tasks["research"].usage.input_tokens == 0
    assert state.usage.input_tokens == sum(r.reported[0] for r in llm.requests[3:] if r.reported)
    described = await client.get_workflow_handle(fork).describe()
    assert await described.memo_value(PARENT_MEMO) == parent
    # The step log grows with the run: the state people read leaves it out, the memo keeps it apart.
    assert state.step_log == []
    logged = await described.memo_value(STEP_LOG, type_hint=list[StepRecord])
    assert [(r.key, r.status) for r in logged] == [
        ("research", "completed"),
        ("write", "completed"),
        ("check", "completed"),
        ("edit", "completed"),
    ]
    assert await described.static_summary() == f"chain (pipeline, 4 tasks, forked from {parent} at check)"
    assert await children(client, parent) == [fork]

    diff = cli("diff", parent, fork, "--json")
    assert diff.code == 0, diff.err
    assert sorted({(d["step"], d["what"]) for d in json.loads(diff.out)}) == [
        ("check", "cost"),
        ("check", "output"),
        ("check", "status"),
        ("edit", "cost"),
        ("edit", "output"),
        ("edit", "status"),
    ]
    text = cli("diff", parent, fork).out
    assert f"2 step(s) differ between {parent} and {fork}:" in text and "  check  status  failed → completed" in text
    same = cli("diff", fork, fork)
    assert same.code == 0 and same.out.strip() == f"no step differs between {fork} and {fork}"


async def children(client, parent: str) -> list[str]:
    """The runs listed under `parent` by its search attribute (visibility lags a little)."""
    for _ in range(100):
        listed = [w.id async for w in client.list_workflows(f'AgentRunParent = "{parent}"')]
        if listed:
            return listed
        await asyncio.sleep(0.1)
    return []


POLISH = """workflow:
  name: polish
  agents:
    writer: {prompt: "Write about tea."}
    critic: {prompt: "Review the draft."}
  steps:
    - id: review
      type: loop
      loop: {agent: writer, validator: critic, max_iterations: 3, feedback_path: "{{ steps.review.output.feedback }}"}
"""


def test_a_fork_onto_a_changed_spec_maps_steps_by_id_and_refuses_where_ids_vanished(cli, llm, tmp_path):
    parent = failed_chain(cli, llm, tmp_path)
    renamed = write_spec(
        tmp_path, CHAIN.replace("id: write", "id: draft").replace("steps.write", "steps.draft"), "renamed.yaml"
    )
    refused = cli("fork", parent, "--at", "failure", "--spec", str(renamed))
    assert refused.code == 2, refused.out + refused.err
    assert "would take over step(s) write of chain" in refused.err and "steps are matched by id" in refused.err
    assert len(llm.requests) == 3  # nothing started
    fixed = write_spec(tmp_path, CHAIN.replace("Check it as JSON.", "Check it. Return JSON."), "fixed.yaml")
    result = cli("fork", parent, "--at", "failure", "--spec", str(fixed), "--id", run_id("fork"))
    assert result.code == 0, result.out + result.err
    # The steps before check are taken over by id; check runs as the changed spec says.
    assert [r.model for r in llm.requests] == ["researcher", "writer", "checker", "checker", "editor"]
    assert llm.prompts_for("checker")[1] == "Check it. Return JSON.\n\nInput:\nan essay"


def test_a_fork_in_a_later_round_of_a_loop_reuses_the_rounds_before_it(cli, llm, tmp_path):
    llm.by_model["writer"] = lambda m: "a poem" if "poem" in m[-1]["content"] else "a draft"
    llm.by_model["critic"] = lambda m: (
        '{"passed": true}' if "poem" in m[-1]["content"] else '{"passed": false, "feedback": "rhyme"}'
    )
    parent = run_id("polish")
    spec = write_spec(tmp_path, POLISH)
    agents = ["--agent", "writer=openai:writer", "--agent", "critic=openai:critic"]
    assert cli("start", str(spec), *agents, "--id", parent, "--task-queue", run_id("q")).code == 0
    assert len(llm.prompts_for("writer")) == 3  # every round failed its review
    result = cli("fork", parent, "--at", "review.writer#2", "--prompt", "review.writer=Write a poem about tea.")
    assert result.code == 0, result.out + result.err
    writer, critic = llm.prompts_for("writer"), llm.prompts_for("critic")
    # Round 1 and its review are taken over; round 2 gets the new prompt and round 1's feedback.
    assert len(writer) == 4 and len(critic) == 4
    assert writer[3] == "Write a poem about tea.\n\nFeedback on your previous output:\nrhyme"
    assert critic[3] == "Review the draft.\n\nInput:\na poem"
    assert f"forking {parent} at review.writer#2: 2 step run(s) taken over" in result.out
    assert "## Final Output\n\na poem" in result.out


def test_a_behaviour_tree_forked_with_a_blackboard_value_keeps_what_earlier_steps_wrote(cli, llm, tmp_path):
    root = composite(
        "sequence",
        "Root",
        action("Fetch", "instruct: Fetch the numbers into $VAR.data."),
        action("Report", "instruct: Report $VAR.data to $VAR.audience."),
    )
    tree = tree_file(tmp_path, root, var={"audience": "team"}, const={"limit": 3})
    brain = Brain(
        [
            ("instruct", "Fetch", "success", {"data": [1, 2]}),
            ("instruct", "Report", "success"),
            ("instruct", "Report", "success"),
        ]
    )
    llm.reply = brain
    parent = run_id("tree")
    assert cli("start", str(tree), "--agent", "openai:tree", "--id", parent, "--task-queue", run_id("q")).code == 0
    fork = cli("fork", parent, "--at", "Report", "--set", "memory.audience=board", "--id", run_id("fork"))
    assert fork.code == 0, fork.out + fork.err
    assert brain.asked == [("instruct", "Fetch"), ("instruct", "Report"), ("instruct", "Report")]
    before, after = brain.prompts[1], brain.prompts[2]
    assert '$VAR.audience = "team"' in before and '$VAR.audience = "board"' in after
    assert "$VAR.data = [1, 2]" in after  # Fetch's write, taken over from the parent
    assert f"| 1 | Root/Fetch@1 | default | SUCCESS (reused from {parent}) |" in fork.out
    assert "- Changes: memory.audience = 'board'" in fork.out
    assert '| $VAR | audience | "board" |' in fork.out


def test_bad_fork_inputs_are_refused_before_anything_starts(cli, llm, tmp_path):
    parent = failed_chain(cli, llm, tmp_path)
    asked = len(llm.requests)
    cases = [
        (["no-such-run", "--at", "check"], "error: no run with id 'no-such-run'"),
        ([parent, "--at", "chek"], "--at: error: no step 'chek' in chain\n  hint: did you mean 'check'?"),
        ([parent, "--at", "edit"], f"--at: error: step 'edit' did not run in {parent}"),
        ([parent, "--at", "check", "--set", "audience=board"], "error: cannot set 'audience'"),
        ([parent, "--at", "check", "--set", "memory.audience=board"], "keeps no memory"),
        ([parent, "--at", "check", "--prompt", "chekc=Hi"], "--prompt chekc: error: no step 'chekc' in chain"),
    ]
    for n, (args, said) in enumerate(cases):
        bad = f"{parent}-bad-{n}"
        result = cli("fork", *args, "--id", bad)
        assert result.code == 2 and said in result.err, (args, result.err)
        assert len(result.err.strip().splitlines()) <= 2, result.err  # the error and its hint
        assert cli("status", bad).code == 2  # nothing started
    done = run_id("chain")
    llm.by_model["checker"] = '{"verdict": "fine"}'
    assert cli("start", str(tmp_path / "spec.yaml"), *AGENTS, "--id", done, "--task-queue", run_id("q")).code == 0
    result = cli("fork", done, "--at", "failure")
    assert result.code == 2 and f"--at: error: run {done} did not fail (it is completed)" in result.err
    assert len(llm.requests) == asked + 4  # only the completed run's own prompts


GATED = """name: gated
subtasks:
  research:
    instructions: "Research tea."
  write:
    instructions: "Write about tea."
  ship:
    approval: true
    instructions: "Ship it."
"""


@pytest.mark.usefixtures("worker")
async def test_a_run_waiting_at_a_gate_is_forked_from_the_step_log_its_worker_answers(cli, llm, tmp_path, client):
    llm.reply = lambda messages: f"{messages[-1]['content'].splitlines()[0]} done\nCOMPLETION_STATUS: COMPLETE"
    spec = write_spec(tmp_path, GATED)
    plan = load(str(spec))
    inp = RunInput(plan=plan, params={}, workdir=str(tmp_path), default_agent="openai:agent", heartbeat_s=5)
    parent = await client.start_workflow("AgentRun", inp, id=run_id("gated"), task_queue=TEST_QUEUE)
    fork = run_id("fork")
    try:
        waiting = await open_gate(parent, "ship")
        assert waiting.step_log == [], "the state leaves the step log out; the fork asks for it apart"
        # In a thread: the worker that must answer for the parent runs on this test's event loop.
        result = await asyncio.to_thread(cli, "fork", parent.id, "--at", "write", "--id", fork, "--detach")
        assert result.code == 0, result.out + result.err
        assert f"forking {parent.id} at write: 1 step run(s) taken over" in result.out
        forked = await open_gate(client.get_workflow_handle(fork), "ship")
        assert forked.tasks["research"].reused_from == parent.id and not forked.tasks["write"].reused_from
        asked = [p.splitlines()[0] for p in llm.prompts_for("agent")]
        assert asked == ["Research tea.", "Write about tea.", "Write about tea."], "research asked once, by the parent"
    finally:
        for handle in (parent, client.get_workflow_handle(fork)):
            with contextlib.suppress(RPCError):
                await handle.terminate("test over")
