"""Budgets under fan-out: a map's elements and a parallel step's branches reserve their prompt's
cost before it starts, so a wide step stops where a narrow one would, not a width past it."""

from __future__ import annotations

import pytest

from agentrun.lang import ir
from agentrun.models.contract import RunInput
from tests.conftest import TEST_QUEUE, run_id, write_spec
from tests.runs import finish, plan, run_spec, task

REPLY = " ".join(["word"] * 100)  # a prompt costs about 100 tokens, most of them its reply


def _map(concurrency: int) -> str:
    return f"""workflow:
  name: wide
  inputs:
    - {{name: items, type: json, required: true}}
  budget: {{tokens: 520}}
  agents:
    worker: {{prompt: "Say <{{{{item}}}}>"}}
  steps:
    - id: each
      type: map
      map: {{over: "{{{{inputs.items}}}}", agent: worker, concurrency: {concurrency}}}
"""


def _per_call(llm) -> int:
    prompt, reply = llm.requests[0].reported
    return prompt + reply


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("concurrency", [20, 3])
async def test_a_map_under_a_token_budget_starts_no_more_prompts_than_it_allows(client, llm, tmp_path, concurrency):
    llm.reply = REPLY
    llm.delay_s["m"] = 0.3  # the elements' prompts overlap
    items = [f"item-{n}" for n in range(20)]
    state = await run_spec(client, write_spec(tmp_path, _map(concurrency)), "openai:m", params={"items": items})
    per_call = _per_call(llm)
    assert 5 * per_call <= 520 < 6 * per_call  # the budget allows 5 prompts
    assert state.status == "failed" and "budget exceeded" in state.errors[0], state.errors
    assert len(llm.requests) <= 5 + 1  # the one a run may finish past its limit
    assert state.usage.input_tokens + state.usage.output_tokens <= 520 + per_call


PARALLEL = """workflow:
  name: fan
  budget: {usd: 0.52}
  agents:
"""


@pytest.mark.usefixtures("worker")
async def test_a_parallel_step_under_a_usd_budget_starts_no_more_prompts_than_it_allows(client, llm, tmp_path):
    names = [f"a{n}" for n in range(8)]
    text = PARALLEL + "".join(f'    {n}: {{prompt: "Go {n}"}}\n' for n in names)
    text += "  steps:\n    - id: fan\n      type: parallel\n"
    text += f"      parallel: [{', '.join(f'{{agent: {n}}}' for n in names)}]\n"
    llm.reply = REPLY
    llm.delay_s["m"] = 0.3
    price = ir.Price(input=1000, output=1000)  # $0.001 a token: a prompt costs about $0.10
    state = await run_spec(client, write_spec(tmp_path, text), "openai:m", prices={"m": price})
    cost = _per_call(llm) / 1000
    assert 5 * cost <= 0.52 < 6 * cost
    assert state.status == "failed" and "budget exceeded" in state.errors[0], state.errors
    assert len(llm.requests) <= 5 + 1
    assert state.total_cost_usd <= 0.52 + cost


@pytest.mark.usefixtures("worker")
async def test_two_subgraphs_side_by_side_do_not_each_spend_what_was_left(client, llm, tmp_path):
    """A subgraph runs on what is left of the run's budget and holds it meanwhile: the second
    waits for the first, then has what the first left, not the whole of it again."""
    llm.reply = REPLY
    writes = ir.Graph(
        id="writes",
        nodes={f"w{n}": task(f"w{n}", f"Write part {n}.", agent="writer") for n in (1, 2, 3)},
        edges=[ir.Edge(source="w1", target="w2"), ir.Edge(source="w2", target="w3")],
        start="w1",
        end_nodes=["w3"],
    )
    both = ir.Parallel(id="both", children=[ir.Subflow(id="a", graph="writes"), ir.Subflow(id="b", graph="writes")])
    budgeted = plan(both, subgraphs={"writes": writes}, budget=ir.Budget(tokens=350))
    inp = RunInput(plan=budgeted, workdir=str(tmp_path), default_agent="openai:m", heartbeat_s=5)
    state = await finish(
        client, await client.start_workflow("AgentRun", inp, id=run_id("halves"), task_queue=TEST_QUEUE)
    )
    per_call = _per_call(llm)
    assert 3 * per_call <= 350 < 4 * per_call  # the budget allows three prompts: one subgraph's
    assert state.status == "failed" and "budget exceeded" in " ".join(state.errors), state.errors
    # Each subgraph alone would have had 350 to spend (six prompts between them).
    assert len(llm.requests) <= 3 + 1
    spent = state.usage.input_tokens + state.usage.output_tokens
    assert spent == len(llm.requests) * per_call  # the failed subgraph's prompt counts on the parent too
    assert spent <= 350 + per_call
