"""The checkpoint protocol (an Agentfile goal's phases) on the real AgentRun workflow: COMMIT →
EXECUTE, RECONCILE's flags, a supervisor's verdicts, a person at the goal's gate, structured
outputs kept as memory keys, CONVERGE rounds, and the `--no-human` pre-flight refusal. Plans are
built as IR; every agent is a model of the fake OpenAI server, scripted by what its prompt asks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentrun.cli import client as main
from agentrun.explain import report
from agentrun.lang import ir
from agentrun.models.contract import RunInput, RunState
from agentrun.workflows.protocols import reconcile
from tests.conftest import TEST_QUEUE, run_id
from tests.fakes.openai_server import FakeOpenAI, Messages
from tests.runs import answer, finish, open_gate, plan

pytestmark = pytest.mark.usefixtures("worker")

PRE = {
    "interpretation": "build the thing",
    "scope_in": ["the thing"],
    "scope_out": ["other things"],
    "approach": "carefully",
    "predictions": ["it builds"],
    "assumptions": [],
    "confidence": 0.9,
}


def goal(gid: str, prompt: str, **extra: Any) -> ir.Task:
    return ir.Task(id=gid, agent=gid, prompt=prompt, protocol="checkpoint", **extra)


def post(output: Any, **more: Any) -> str:
    """A post-checkpoint as a model writes one: prose, then a fenced JSON block."""
    body = {"output": output, "tools_used": [], "commitment_met": "yes", "scope_changed": False, **more}
    return f"Done.\n```json\n{json.dumps(body)}\n```"


def verdict(word: str, correction: str = "", reason: str = "") -> str:
    return json.dumps({"verdict": word, "correction": correction, "reason": reason})


def agent(posts: list[str], pre: dict[str, Any] = PRE, supervise: str = "") -> Callable[[Messages], str]:
    """A goal's agent: its pre-checkpoint to COMMIT, the next of `posts` to each EXECUTE, and
    `supervise` when it is asked to supervise itself."""
    given = [0]

    def reply(messages: Messages) -> str:
        prompt = messages[-1]["content"]
        if "Phase COMMIT" in prompt:
            return json.dumps(pre)
        if "You supervise" in prompt:
            return supervise
        given[0] += 1
        return posts[min(given[0], len(posts)) - 1]

    return reply


async def start(client: Client, the_plan: ir.Plan, *extra_agents: str, **params: Any) -> WorkflowHandle:
    ids = [n.agent for n in the_plan.walk() if isinstance(n, ir.Task)] + list(extra_agents)
    inp = RunInput(
        plan=the_plan,
        params=params,
        workdir=".",
        default_agent="openai:default",
        agents={i: f"openai:{i}" for i in ids},
        heartbeat_s=5,
    )
    return await client.start_workflow("AgentRun", inp, id=run_id("cp"), task_queue=TEST_QUEUE)


async def run(client: Client, the_plan: ir.Plan, *extra_agents: str, **params: Any) -> RunState:
    return await finish(client, await start(client, the_plan, *extra_agents, **params))


async def summaries(handle: WorkflowHandle) -> list[str]:
    """The summaries of the run's activities, as Temporal Web shows them."""
    found = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            found.append(json.loads(event.user_metadata.summary.data))
    return found


async def test_an_unsupervised_goal_commits_then_executes(client, llm: FakeOpenAI):
    llm.by_model["build"] = agent([post("the result")])
    handle = await start(client, plan(goal("build", "Build the thing.")))
    final = await finish(client, handle)
    assert final.status == "completed", final.errors
    commit, execute = llm.prompts_for("build")
    assert "Build the thing." in commit and "Phase COMMIT" in commit and "Phase EXECUTE" not in commit
    assert "Phase EXECUTE" in execute and '"approach": "carefully"' in execute
    assert final.outputs["build"] == "the result"
    record = final.supervision["build"]
    assert record.supervision == "none" and record.pre == PRE
    assert [a.flags for a in record.attempts] == [[]] and record.attempts[0].verdicts == []
    assert await summaries(handle) == ["build: COMMIT", "build: EXECUTE"]


async def test_an_unreadable_pre_checkpoint_gets_one_reminder_then_fails_the_goal(client, llm):
    llm.by_model["build"] = "I will just do it."
    final = await run(client, plan(goal("build", "Build.")))
    assert final.status == "failed"
    first, again = llm.prompts_for("build")
    assert again.startswith("Your last reply could not be read: no JSON object or array found in the reply")
    assert first in again
    assert final.errors[0].startswith("build: its COMMIT checkpoint could not be read, even after a reminder")


async def test_reorient_runs_execute_again_with_the_correction_then_continue(client, llm):
    llm.by_model["build"] = agent([post("v1", concerns=["tests are slow"]), post("v2", concerns=["still slow"])])
    llm.by_model["supervisor"] = [
        verdict("REORIENT", "Use the cache.", "slow tests"),
        verdict("CONTINUE", reason="good now"),
    ]
    final = await run(client, plan(goal("build", "Build.", supervision="supervised")), "supervisor")
    assert final.status == "completed", final.errors
    _, first, second = llm.prompts_for("build")
    assert "Use the cache." not in first and "Use the cache." in second
    assert first in second.replace(
        "Your supervisor corrects your last attempt; follow this now:\nUse the cache.\n\n", ""
    )
    assert final.outputs["build"] == "v2"
    judged = llm.prompts_for("supervisor")
    assert len(judged) == 2 and "Flags raised when the two were compared: concerns_raised" in judged[0]
    attempts = final.supervision["build"].attempts
    assert [a.flags for a in attempts] == [["concerns_raised"], ["concerns_raised"]]
    assert [(v.verdict, v.by, v.correction, v.reason) for a in attempts for v in a.verdicts] == [
        ("REORIENT", "agent supervisor", "Use the cache.", "slow tests"),
        ("CONTINUE", "agent supervisor", "", "good now"),
    ]
    text = report.to_markdown(final)
    assert "## Supervision" in text and "REORIENT by agent supervisor; correction: Use the cache." in text


async def test_a_goal_still_reoriented_after_three_corrections_fails(client, llm):
    llm.by_model["build"] = agent([post("v", concerns=["c"])])
    llm.by_model["supervisor"] = verdict("REORIENT", "Again.")
    final = await run(client, plan(goal("build", "Build.", supervision="supervised")), "supervisor")
    assert final.status == "failed"
    assert len(llm.prompts_for("build")) == 1 + 4 and len(final.supervision["build"].attempts) == 4
    assert final.errors[0] == "build: still reoriented after 3 corrections; the last: Again."


async def test_a_goal_without_flags_is_not_supervised(client, llm):
    llm.by_model["build"] = agent([post("clean")])
    final = await run(client, plan(goal("build", "Build.", supervision="supervised")), "supervisor")
    assert final.status == "completed" and llm.prompts_for("supervisor") == []


async def test_pause_waits_for_a_person_whose_answer_becomes_the_correction(client, llm):
    llm.by_model["build"] = agent([post("half", commitment_met="partial"), post("whole")])
    llm.by_model["supervisor"] = verdict("PAUSE", reason="a person should look")
    handle = await start(client, plan(goal("build", "Build.", supervision="supervised")), "supervisor")
    state = await open_gate(handle, "build.supervise")
    gate = state.gates["build.supervise"]
    assert gate.kind == "approval" and "the supervisor says PAUSE (a person should look)" in gate.prompt
    assert state.status == "waiting" and state.waiting_for == "human_approval"
    await answer(handle, "build.supervise", "Finish the other half.")
    final = await finish(client, handle)
    assert final.status == "completed", final.errors
    assert "Finish the other half." in llm.prompts_for("build")[-1]
    assert final.outputs["build"] == "whole"
    first, second = final.supervision["build"].attempts
    assert first.flags == ["commitment_not_met"] and second.flags == []
    assert [(v.verdict, v.by, v.gate, v.correction) for v in first.verdicts] == [
        ("PAUSE", "agent supervisor", "", ""),
        ("REORIENT", "ana", "build.supervise", "Finish the other half."),
    ]


async def test_a_human_supervised_goal_asks_a_person_after_the_supervisor_and_a_rejection_fails_it(client, llm):
    llm.by_model["build"] = agent([post("done")])
    llm.by_model["supervisor"] = verdict("CONTINUE", reason="fine")
    handle = await start(client, plan(goal("build", "Build.", supervision="human")), "supervisor")
    await open_gate(handle, "build.supervise")
    await answer(handle, "build.supervise", "reject", "not what we need")
    final = await finish(client, handle)
    assert final.status == "failed"
    assert final.errors[0] == "build: rejected at gate 'build.supervise' by ana: not what we need"
    assert [v.verdict for v in final.supervision["build"].attempts[0].verdicts] == ["CONTINUE", "REJECT"]


async def test_outputs_are_validated_and_kept_as_memory_keys_a_later_goal_reads(client, llm):
    llm.by_model["research"] = agent([post({"a": "alpha"}), post({"a": "alpha", "b": 2})])
    llm.by_model["write"] = agent([post("written")])
    final = await run(
        client,
        plan(goal("research", "Research.", outputs=["a", "b"]), goal("write", "Write from {{ a }} and {{ b }}.")),
    )
    assert final.status == "completed", final.errors
    reminded = llm.prompts_for("research")[-1]
    assert reminded.startswith("Your last reply could not be read: output must be a JSON object with the fields a, b")
    assert final.memory == {"a": "alpha", "b": 2}
    assert "Write from alpha and 2." in llm.prompts_for("write")[0]


async def test_converge_repeats_execute_with_the_last_output_until_converged(client, llm):
    llm.by_model["draft"] = agent([post("draft one"), "Nothing left to change: CONVERGED\n" + post("draft two")])
    loop = ir.LoopUntil(status="CONVERGED", max_iterations=5)
    final = await run(client, plan(goal("draft", "Draft it.", loop_until=loop)))
    assert final.status == "completed", final.errors
    _, first, second = llm.prompts_for("draft")
    assert "say CONVERGED" in first and "draft one" not in first
    assert "Your output from the last round:\ndraft one" in second
    assert final.outputs["draft"] == "draft two" and final.warnings == []
    assert final.tasks["draft"].iterations == 2


async def test_converge_stops_at_the_limit_its_param_gives_with_a_warning(client, llm):
    llm.by_model["draft"] = agent([post("not yet converged")])
    loop = ir.LoopUntil(status="CONVERGED", max_iterations_param="rounds")
    handle = await start(client, plan(goal("draft", "Draft it.", loop_until=loop)), rounds=2)
    final = await finish(client, handle)
    assert final.status == "completed", final.errors
    assert len(llm.prompts_for("draft")) == 3
    assert final.warnings == ["draft: stopped after 2 rounds without CONVERGED"]
    assert await summaries(handle) == ["draft: COMMIT", "draft: EXECUTE round 1", "draft: EXECUTE round 2"]


async def test_an_unreadable_verdict_is_continue_with_a_warning_from_the_goals_own_agent(client, llm):
    llm.by_model["build"] = agent([post("done", deviations=["used make"])], supervise="Looks fine to me.")
    final = await run(client, plan(goal("build", "Build.", supervision="supervised")))
    assert final.status == "completed", final.errors
    assert "You supervise the agent working on goal build" in llm.prompts_for("build")[-1]
    assert final.warnings == ["build: the supervisor's verdict could not be read, taken as CONTINUE: Looks fine to me."]
    assert final.supervision["build"].attempts[0].verdicts[0].by == "agent build"


async def test_paranoid_quotes_earlier_outputs_as_untrusted_and_research_scopes_every_prompt(client, llm):
    llm.by_model["build"] = agent([post("x", concerns=["c"])], supervise=verdict("CONTINUE"))
    final = await run(client, plan(goal("build", "Build.", supervision="supervised"), security="paranoid"))
    assert final.status == "completed", final.errors
    _, execute, judge = llm.prompts_for("build")
    assert "<<<UNTRUSTED DATA" in execute and "<<<UNTRUSTED DATA" in judge
    llm.by_model["scoped"] = agent([post("y")])
    the_plan = plan(goal("scoped", "Look."), security="research", research_scope="public papers only")
    assert (await run(client, the_plan)).status == "completed"
    assert all("Research scope (stay within it): public papers only" in p for p in llm.prompts_for("scoped"))
    # An Agentfile's goals carry the scope in their own system text already: it is said once.
    llm.by_model["told"] = agent([post("z")])
    told = goal("told", "Look.", system="Authorized in this scope only: public papers only.")
    assert (
        await run(client, plan(told, security="research", research_scope="public papers only"))
    ).status == "completed"
    assert all(p.count("public papers only") == 1 for p in llm.prompts_for("told"))


def test_reconcile_flags_by_rule():
    pre = {**PRE, "confidence": "low", "assumptions": ["a", "b", "c", "d"]}
    post_ = {"commitment_met": "partial", "scope_changed": True, "concerns": "none", "unexpected_results": ["x"]}
    assert reconcile.flags(pre, post_) == [
        "commitment_not_met",
        "scope_deviation",
        "unexpected_results",
        "low_confidence",
        "excess_assumptions",
    ]
    assert reconcile.flags({**PRE, "confidence": 45}, {"commitment_met": "yes"}) == ["low_confidence"]


# Draft form: each goal's id is its title, and the modifier on the line before it is its own.
HUMAN_GOALS = """NAME goals
SUPERVISED HUMAN
GOAL "a"
  do A
SUPERVISED
GOAL "mid"
  do M
SUPERVISED HUMAN
GOAL "b"
  do B
"""


def test_start_no_human_refuses_a_plan_with_human_supervised_goals(tmp_path: Path, monkeypatch, capsys):
    spec = tmp_path / "Agentfile"
    spec.write_text(HUMAN_GOALS)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:9")  # nothing may be started, or even reached
    code = main(["start", str(spec), "--no-human", "--agent", "openai:m"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "error: workflow requires human supervision for steps [a, b] but no human connection is available"
    )
