"""Long runs continue as new before their history nears Temporal's limits: the workflow id stays,
nothing is asked twice, and gates, budgets, feedback and the compensation stack go on."""

from __future__ import annotations

import json

import pytest
from temporalio.client import Client

from agentrun.lang import ir
from agentrun.models.contract import VISITED_KEPT
from tests.conftest import write_spec
from tests.fakes.openai_server import FakeOpenAI
from tests.runs import answer, finish, open_gate, plan, run_spec
from tests.test_humans import start, undo
from tests.test_pipeline import LOOP, spec

pytestmark = pytest.mark.usefixtures("worker")

LIMIT = 300  # events per execution in these tests; Temporal warns at 10,240
SLACK = 60  # what one node adds between the checks that come before work nodes


async def executions(client: Client, workflow_id: str) -> list[int]:
    """The history length of each execution of the run, oldest first."""
    lengths = []
    async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        lengths.append((execution.start_time, len([e async for e in handle.fetch_history_events()])))
    return [length for _, length in sorted(lengths)]


async def test_a_loop_of_150_rounds_continues_as_new_and_asks_nothing_twice(client, tmp_path, llm: FakeOpenAI):
    rounds = 150
    drafts = iter(range(1, rounds + 1))
    verdicts = iter(range(1, rounds + 1))
    llm.by_model["writer"] = lambda messages: f"draft {next(drafts)}"
    llm.by_model["critic"] = lambda messages: json.dumps(
        {"passed": (n := next(verdicts)) == rounds, "feedback": f"after round {n}"}
    )
    text = spec(
        f"""
        - id: review
          type: loop
          loop: {{agent: writer, validator: critic, max_iterations: {rounds + 10},
                 feedback_path: "{{{{steps.review.output.feedback}}}}"}}
    """,
        LOOP,
    )
    state = await run_spec(
        client,
        write_spec(tmp_path, text),
        "openai:default",
        params={"topic": "tea"},
        agents={"writer": "openai:writer", "critic": "openai:critic"},
        history_limit=LIMIT,
    )
    assert state.status == "completed", state.errors
    assert state.steps["review"]["output"] == f"draft {rounds}"
    writer = llm.prompts_for("writer")
    assert len(writer) == rounds and len(llm.prompts_for("critic")) == rounds
    # Every round saw the verdict on the round before it, across every execution.
    wrong = [(i, writer[i][-60:]) for i in range(1, rounds) if not writer[i].endswith(f"after round {i}")]
    assert not wrong, wrong[:3]
    lengths = await executions(client, state.run_id)
    assert len(lengths) >= 4, lengths
    assert max(lengths) <= LIMIT + SLACK, lengths
    assert len(state.visited_nodes) == min(VISITED_KEPT, sum(state.node_runs.values()))  # the last ones only


async def test_a_gate_a_budget_and_the_compensation_stack_survive_continuing_as_new(client, llm: FakeOpenAI):
    rounds = 60
    grind_replies = iter([*["more. COMPLETION_STATUS: CONTINUE"] * (rounds - 1), "COMPLETION_STATUS: DONE"])
    llm.by_model.update(
        {
            "tag": "tagged COMPLETION_STATUS: COMPLETE",
            "grind": lambda messages: next(grind_replies),
            "publish": "COMPLETION_STATUS: ERROR",
            "undo": "untagged",
        }
    )
    the_plan = plan(
        ir.Task(id="tag", agent="tag", prompt="Tag.", step=True, compensation=undo("tag", "Remove the tag.")),
        ir.Task(
            id="grind",
            agent="grind",
            prompt="Grind.",
            step=True,
            loop_until=ir.LoopUntil(status="DONE", max_iterations=rounds + 5),
            gate=ir.Human(id="grind", prompt="Grind?", approval=True, choices=[ir.APPROVE, ir.REJECT]),
        ),
        ir.Task(id="publish", agent="publish", prompt="Publish.", step=True),
        budget=ir.Budget(iterations=rounds + 10),
    )
    handle = await start(client, the_plan.model_copy(update={"name": "long"}), history_limit=LIMIT)
    await open_gate(handle, "grind")
    await answer(handle, "grind", ir.APPROVE)
    final = await finish(client, handle)

    assert final.status == "compensated", final.errors
    assert len(llm.prompts_for("grind")) == rounds  # the gate was not asked again, no round twice
    assert llm.prompts_for("undo") == ["Remove the tag."]  # the stack crossed every execution
    assert [g.status for g in final.gates.values()] == ["answered"]
    assert final.iteration_count == 1 + rounds + 1 + 1  # tag, the rounds, publish, the undo
    assert len(await executions(client, handle.id)) >= 2


async def test_a_run_whose_history_stays_short_is_one_execution(client, tmp_path, llm: FakeOpenAI):
    llm.by_model.update({"writer": "draft", "critic": '{"passed": true}'})
    state = await run_spec(
        client,
        write_spec(tmp_path, spec("- {id: w, agent: writer}", LOOP)),
        "openai:default",
        params={"topic": "tea"},
        agents={"writer": "openai:writer", "critic": "openai:critic"},
    )
    assert state.status == "completed", state.errors
    assert len(await executions(client, state.run_id)) == 1


async def test_the_command_line_follows_a_run_across_its_executions(cli, client, tmp_path):
    rounds = 80
    replies = {"tasks": {"grind": [*["more. COMPLETION_STATUS: CONTINUE"] * (rounds - 1), "COMPLETION_STATUS: DONE"]}}
    (tmp_path / "replies.yaml").write_text(json.dumps(replies))
    spec_file = write_spec(
        tmp_path,
        f"name: grind\nsubtasks:\n  grind:\n    instructions: Grind.\n"
        f"    loop_until: {{status: DONE, max_iterations: {rounds + 5}}}\n",
    )
    agent = f"scripted:{tmp_path / 'replies.yaml'}"
    started = cli(
        "start", str(spec_file), "--agent", agent, "--id", "grind-long", extra_env={"AGENTRUN_HISTORY_LIMIT": "200"}
    )
    assert started.code == 0, started.out + started.err
    assert "- Status: COMPLETE" in started.out
    status = cli("status", "grind-long", "--json")
    shown = json.loads(status.out)
    assert shown["status"] == "completed" and shown["tasks"][0]["iterations"] == rounds
    assert len(await executions(client, "grind-long")) >= 3

    refused = cli("start", str(spec_file), "--agent", agent, extra_env={"AGENTRUN_HISTORY_LIMIT": "12"})
    assert refused.code == 2 and "AGENTRUN_HISTORY_LIMIT=12" in refused.err
