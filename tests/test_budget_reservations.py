"""Budgets under fan-out: a map's elements and a parallel step's branches reserve their prompt's
cost before it starts, so a wide step stops where a narrow one would, not a width past it."""

from __future__ import annotations

import pytest

from agentrun.lang import ir
from tests.conftest import write_spec
from tests.runs import run_spec

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
