"""Pipelines (the `workflow:` YAML) run by the real AgentRun workflow against a llm OpenAI server.

Each agent id is its own model on the llm server, so a test scripts every agent's replies and
reads back exactly which prompts each one received, in order.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from agentrun.explain import report
from agentrun.models.contract import RunState
from tests.conftest import until, write_spec
from tests.fakes.openai_server import FakeOpenAI
from tests.runs import run_spec

pytestmark = pytest.mark.usefixtures("worker")

AGENTS = """
  agents:
    writer: {name: Writer, role: writes, prompt: "Write about {{inputs.topic}}."}
    critic: {name: Critic, role: judges, prompt: "Review this."}
    scout: {name: Scout, role: finds, prompt: "Find leads for {{input}}."}
    summarizer: {name: Summarizer, role: sums up, prompt: "Summarize {{input}}."}
"""


async def run(client, tmp_path: Path, llm: FakeOpenAI, text: str, replies: dict, **params) -> RunState:
    llm.by_model.update(replies)
    spec = write_spec(tmp_path, text)
    ids = _agent_ids(text)
    return await run_spec(
        client, spec, "openai:default", params={"topic": "tea", **params}, agents={a: f"openai:{a}" for a in ids}
    )


def _agent_ids(text: str) -> list[str]:
    from agentrun.lang.yamlpos import load_yaml

    return list(load_yaml(text, "x")["workflow"]["agents"])


def spec(steps: str, agents: str = AGENTS) -> str:
    """A pipeline with one string input `topic`, the given agents block and steps."""
    return (
        "workflow:\n  name: p\n  inputs:\n    - {name: topic, type: string, required: true}\n"
        + agents.strip("\n")
        + "\n  steps:\n"
        + textwrap.indent(textwrap.dedent(steps).strip("\n"), "    ")
        + "\n"
    )


def history_events(client, run_id: str):
    async def fetch():
        return [e async for e in client.get_workflow_handle(run_id).fetch_history_events()]

    return fetch()


async def test_sequential_chain_passes_outputs_and_fields(client, tmp_path, llm):
    text = spec("""
        - id: find
          agent: scout
          input: "{{inputs.topic}}"
          output: {store_as: leads, format: json}
        - id: sum
          agent: summarizer
          input: "{{steps.find.output.best}} from {{leads.count}} leads"
    """)
    state = await run(
        client,
        tmp_path,
        llm,
        text,
        {"scout": '```json\n{"best": "Ada", "count": 3}\n```', "summarizer": "Ada is best."},
    )
    assert state.status == "completed", state.errors
    assert llm.prompts_for("scout") == ["Find leads for tea."]
    assert llm.prompts_for("summarizer") == ["Summarize Ada from 3 leads."]
    assert state.steps["find"]["output"] == {"best": "Ada", "count": 3}
    assert state.memory["leads"] == {"best": "Ada", "count": 3}
    assert report.verdict(state) == "COMPLETE"


async def test_input_is_appended_when_the_prompt_does_not_place_it(client, tmp_path, llm):
    text = spec("""
        - id: w
          agent: writer
          input: "notes: {{inputs.topic}} is green"
    """)
    await run(client, tmp_path, llm, text, {"writer": "done"})
    assert llm.prompts_for("writer") == ["Write about tea.\n\nInput:\nnotes: tea is green"]


async def test_agent_output_is_never_rendered_as_a_template(client, tmp_path, llm):
    text = spec("""
        - id: w
          agent: writer
        - id: sum
          agent: summarizer
          input: "{{steps.w.output}}"
    """)
    state = await run(client, tmp_path, llm, text, {"writer": "{{ 7*7 }} {{ inputs.topic }}", "summarizer": "ok"})
    assert state.status == "completed"
    assert llm.prompts_for("summarizer") == ["Summarize {{ 7*7 }} {{ inputs.topic }}."]


async def test_steps_run_in_dependency_order_not_listing_order(client, tmp_path, llm):
    text = spec("""
        - id: sum
          agent: summarizer
          input: "{{steps.find.output}}"
        - id: find
          agent: scout
          input: "{{inputs.topic}}"
    """)
    state = await run(client, tmp_path, llm, text, {"scout": "Ada", "summarizer": "ok"})
    assert state.status == "completed"
    assert [r.model for r in llm.requests] == ["scout", "summarizer"]


async def test_all_prior_context_gives_every_earlier_output(client, tmp_path, llm):
    text = spec("""
        - id: find
          agent: scout
          input: "{{inputs.topic}}"
        - id: w
          agent: writer
        - id: sum
          agent: summarizer
          input: "all prior context"
    """)
    await run(client, tmp_path, llm, text, {"scout": "Ada", "writer": "essay", "summarizer": "ok"})
    prompt = llm.prompts_for("summarizer")[0]
    assert json.loads(prompt.removeprefix("Summarize ").removesuffix(".")) == {"find": "Ada", "w": "essay"}


PARALLEL = """
  agents:
    a: {prompt: "Score A of {{input}}."}
    b: {prompt: "Score B of {{input}}."}
    c: {prompt: "Score C of {{input}}."}
    agg: {prompt: "A={{steps.fan.outputs.ka.score}} B={{steps.fan.outputs.kb.score}} C={{steps.fan.outputs.kc}}"}
"""


def fan(wait: str, timeout: str = "") -> str:
    return spec(
        f"""
        - id: fan
          type: parallel
          parallel:
            - {{agent: a, input: "{{{{inputs.topic}}}}", output_key: ka}}
            - {{agent: b, input: "{{{{inputs.topic}}}}", output_key: kb}}
            - {{agent: c, input: "{{{{inputs.topic}}}}", output_key: kc}}
          wait: {wait}
          {timeout}
          output: {{format: json}}
        - id: agg
          agent: agg
    """,
        PARALLEL,
    )


async def test_parallel_wait_all_keys_outputs_for_the_next_step(client, tmp_path, llm):
    state = await run(
        client, tmp_path, llm, fan("all"), {"a": '{"score": 1}', "b": '{"score": 2}', "c": '{"score": 3}', "agg": "6"}
    )
    assert state.status == "completed", state.errors
    assert llm.prompts_for("agg") == ['A=1 B=2 C={\n  "score": 3\n}']
    assert state.steps["fan"]["outputs"] == {"ka": {"score": 1}, "kb": {"score": 2}, "kc": {"score": 3}}


@pytest.mark.parametrize("wait, finished", [("any", 1), (2, 2)])
async def test_parallel_wait_any_or_n_cancels_the_others(client, tmp_path, llm, wait, finished):
    held = ["c"] if finished == 2 else ["b", "c"]
    for model in held:
        llm.hold(model)
    state = await run(
        client, tmp_path, llm, fan(wait), {"a": '{"score": 1}', "b": '{"score": 2}', "c": "{}", "agg": "done"}
    )
    assert state.status == "completed", state.errors
    assert [state.tasks[f"fan.k{m}"].status for m in held] == ["cancelled"] * len(held)
    assert any(f"{len(held)} branch(es) cancelled" in w for w in state.warnings)
    events = await history_events(client, state.run_id)
    requested = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED]
    assert len(requested) == len(held)
    # The agents' activities received the cancellation: they hung up on the held requests.
    await until(lambda: all(r.abandoned for m in held for r in llm.requests_for(m)))
    assert "CANCELLED" in report.to_markdown(state)


async def test_parallel_failure_applies_that_agents_policy_while_others_continue(client, tmp_path, llm):
    agents = PARALLEL.replace(
        'b: {prompt: "Score B of {{input}}."}', 'b: {prompt: "Score B of {{input}}.", retry: {on_failure: skip}}'
    )
    text = fan("all").replace(PARALLEL.strip("\n"), agents.strip("\n"))
    state = await run(client, tmp_path, llm, text, {"a": '{"score": 1}', "b": "  ", "c": '{"score": 3}', "agg": "ok"})
    assert state.status == "completed", state.errors
    assert state.tasks["fan.kb"].status == "skipped"
    assert state.steps["fan"]["outputs"]["kb"] is None
    assert "empty output" in " ".join(state.warnings)
    assert report.verdict(state) == "COMPLETE" and report.partial(state) == "1 of 4 steps skipped"


CONDITIONAL = """
  agents:
    scorer: {prompt: "Score {{inputs.topic}}."}
    hot: {prompt: "Hot lead: {{steps.score.output.score}}."}
    warm: {prompt: "Warm lead."}
    cold: {prompt: "Cold lead."}
"""

ROUTES = """
    - id: score
      agent: scorer
      output: {format: json}
    - id: route
      type: conditional
      condition:
        eval: "{{steps.score.output.score}} >= 80"
        true: hot_step
        false: warm_check
    - id: hot_step
      agent: hot
    - id: warm_check
      type: conditional
      condition: {eval: "40 <= {{steps.score.output.score}} and {{steps.score.output.score}} < 80", true: warm, false: cold}
"""


@pytest.mark.parametrize("score, agent", [(90, "hot"), (50, "warm"), (10, "cold"), ('"high"', "cold")])
async def test_conditional_routes_to_a_step_or_an_agent(client, tmp_path, llm, score, agent):
    state = await run(
        client,
        tmp_path,
        llm,
        spec(ROUTES, CONDITIONAL),
        {"scorer": f'{{"score": {score}}}', "hot": "H", "warm": "W", "cold": "C"},
    )
    assert state.status == "completed", state.errors
    assert [r.model for r in llm.requests] == ["scorer", agent]
    assert state.steps["route"]["output"] == agent[0].upper()
    if score == '"high"':  # '"high" >= 80' cannot be evaluated: the false branch, with a warning
        assert any("could not be evaluated" in w and "false branch" in w for w in state.warnings)
    if agent == "hot":
        assert llm.prompts_for("hot") == ["Hot lead: 90."]


LOOP = """
  agents:
    writer: {prompt: "Write about {{inputs.topic}}."}
    critic:
      prompt: "Review the draft."
      validation: {rules: ["Must include passed boolean"]}
"""


def loop_spec(iterations: int) -> str:
    return spec(
        f"""
        - id: review
          type: loop
          loop: {{agent: writer, validator: critic, max_iterations: {iterations},
                 feedback_path: "{{{{steps.review.output.feedback}}}}"}}
    """,
        LOOP,
    )


async def test_loop_reruns_the_agent_with_the_validators_feedback(client, tmp_path, llm):
    verdicts = ['{"passed": false, "feedback": ["shorter"]}', '{"passed": true, "feedback": []}']
    state = await run(client, tmp_path, llm, loop_spec(3), {"writer": ["draft 1", "draft 2"], "critic": verdicts})
    assert state.status == "completed", state.errors
    assert llm.prompts_for("writer") == [
        "Write about tea.",
        'Write about tea.\n\nFeedback on your previous output:\n[\n  "shorter"\n]',
    ]
    assert llm.prompts_for("critic") == ["Review the draft.\n\nInput:\ndraft 1", "Review the draft.\n\nInput:\ndraft 2"]
    assert state.steps["review"]["output"] == "draft 2"
    assert not any("max iterations" in w for w in state.warnings)


async def test_loop_stops_at_max_iterations_keeping_the_last_output(client, tmp_path, llm):
    state = await run(
        client,
        tmp_path,
        llm,
        loop_spec(2),
        {"writer": ["draft 1", "draft 2", "draft 3"], "critic": '{"passed": false, "feedback": "no"}'},
    )
    assert state.status == "completed"
    assert len(llm.prompts_for("writer")) == 2
    assert state.steps["review"]["output"] == "draft 2"
    assert "review: max iterations (2) reached" in report.to_markdown(state)


MAP = """
  agents:
    splitter: {prompt: "Split {{inputs.topic}}."}
    worker: {prompt: "Summarize section {{index}}: {{item}}"}
    reducer: {prompt: "Combine these."}
"""


async def test_map_runs_one_agent_per_element_then_the_reducer(client, tmp_path, llm):
    text = spec(
        """
        - id: split
          agent: splitter
          output: {format: json}
        - id: each
          type: map
          map: {over: "{{steps.split.output.chunks}}", agent: worker, reduce: reducer, concurrency: 2}
    """,
        MAP,
    )
    llm.by_model["worker"] = lambda messages: messages[-1]["content"].split(": ", 1)[1].upper()
    state = await run(client, tmp_path, llm, text, {"splitter": '{"chunks": ["a", "b", "c"]}', "reducer": "ABC"})
    assert state.status == "completed", state.errors
    assert sorted(llm.prompts_for("worker")) == [
        "Summarize section 0: a",
        "Summarize section 1: b",
        "Summarize section 2: c",
    ]
    assert llm.prompts_for("reducer") == ['Combine these.\n\nInput:\n[\n  "A",\n  "B",\n  "C"\n]']
    assert [t for t in state.tasks] == ["split", "each[0]", "each[1]", "each[2]", "each.reducer"]
    assert state.steps["each"]["output"] == "ABC"


async def test_map_keeps_at_most_concurrency_agents_in_flight(client, tmp_path, llm):
    text = spec(
        """
        - id: each
          type: map
          map: {over: "{{inputs.topic}}", agent: worker, concurrency: 2}
    """,
        MAP.replace("topic", "topic"),
    )
    llm.hold("worker")
    llm.by_model["worker"] = "x"
    peak = 0

    async def watch():
        nonlocal peak
        for _ in range(100):
            peak = max(peak, llm.in_flight("worker"))
            if peak == 2:
                await asyncio.sleep(0.5)  # long enough for a third to arrive if the limit leaked
                peak = max(peak, llm.in_flight("worker"))
                llm.release("worker")
                return
            await asyncio.sleep(0.05)
        llm.release("worker")

    watcher = asyncio.ensure_future(watch())
    state = await run(client, tmp_path, llm, text, {}, topic='["a", "b", "c", "d"]')
    await watcher
    assert state.status == "completed", state.errors
    assert peak == 2 and len(llm.prompts_for("worker")) == 4


FAILING = """
  agents:
    first: {prompt: "First.", retry: {max_attempts: 2, on_failure: POLICY}}
    backup: {prompt: "Backup for {{input}}."}
    next: {prompt: "Next got {{steps.one.output}}."}
"""


def failing(policy: str) -> str:
    return spec(
        """
        - id: one
          agent: first
          input: "{{inputs.topic}}"
        - id: two
          agent: next
    """,
        FAILING.replace("POLICY", policy),
    )


async def test_skip_stores_null_and_continues(client, tmp_path, llm):
    state = await run(client, tmp_path, llm, failing("skip"), {"first": "", "next": "ok"})
    assert state.status == "completed"
    assert len(llm.prompts_for("first")) == 2  # max_attempts: 2, both empty
    assert state.steps["one"]["output"] is None and llm.prompts_for("next") == ["Next got ."]
    text = report.to_markdown(state)
    assert (
        "- Status: COMPLETE (partial: 1 of 2 steps skipped)" in text
        and "| one | first | SKIPPED |" in text
        and "| 1 | 0B |" in text
    )


async def test_abort_stops_and_reports_partial_results(client, tmp_path, llm):
    state = await run(client, tmp_path, llm, failing("abort"), {"first": "", "next": "ok"})
    assert state.status == "failed" and llm.prompts_for("next") == []
    text = report.to_markdown(state)
    assert "- Status: FAILED" in text and "the agent returned an empty output" in text


async def test_fallback_gets_the_same_input_and_a_failing_fallback_aborts(client, tmp_path, llm):
    state = await run(client, tmp_path, llm, failing("fallback:backup"), {"first": "", "backup": "B", "next": "ok"})
    assert state.status == "completed", state.errors
    assert llm.prompts_for("backup") == ["Backup for tea."]
    assert llm.prompts_for("next") == ["Next got B."]
    assert "falling back to" in " ".join(state.warnings)

    llm.requests.clear()
    state = await run(client, tmp_path, llm, failing("fallback:backup"), {"first": "", "backup": " ", "next": "ok"})
    assert state.status == "failed" and llm.prompts_for("next") == []
    assert any("its fallback one.fallback.backup failed too" in e for e in state.errors)


VALIDATED = """
  agents:
    researcher:
      prompt: "Research {{inputs.topic}}."
      retry: {max_attempts: 2}
      validation:
        schema: {type: object, required: [company_overview]}
        rules: ["Output must include key_challenges array", "Must identify exactly 2 key challenges"]
"""


async def test_validation_failure_is_retried_then_passes(client, tmp_path, llm):
    text = spec(
        """
        - id: research
          agent: researcher
          output: {format: json}
    """,
        VALIDATED,
    )
    good = '{"company_overview": "x", "key_challenges": ["a", "b"]}'
    state = await run(client, tmp_path, llm, text, {"researcher": ['{"key_challenges": ["a"]}', good]})
    assert state.status == "completed", state.errors
    warning = " ".join(state.warnings)
    assert "'company_overview' is a required property" in warning and "expected exactly 2" in warning
    assert state.tasks["research"].retries == 1 and state.steps["research"]["output"]["key_challenges"] == ["a", "b"]


async def test_a_rule_of_no_known_form_is_judged_by_the_agents_model(client, tmp_path, llm):
    agents = VALIDATED.replace(
        'rules: ["Output must include key_challenges array", "Must identify exactly 2 key challenges"]',
        'rules: ["The tone must be friendly"]',
    )
    text = spec(
        """
        - id: research
          agent: researcher
    """,
        agents,
    )
    llm.by_model["researcher"] = lambda m: (
        "FAIL: rude" if m[-1]["content"].startswith("Does the output") else '{"company_overview": "x"}'
    )
    state = await run(client, tmp_path, llm, text, {})
    assert state.status == "failed"
    judged = [p for p in llm.prompts_for("researcher") if p.startswith("Does the output")]
    assert len(judged) == 2 and "Rule: The tone must be friendly" in judged[0]
    assert any("rule judged not met: The tone must be friendly" in e for e in state.errors)


async def test_usage_and_report_layout_for_a_seed_style_run(client, tmp_path, llm):
    text = spec("""
        - id: find
          agent: scout
          input: "{{inputs.topic}}"
    """)
    state = await run(client, tmp_path, llm, text, {"scout": "three words here"})
    text = report.to_markdown(state)
    assert text.startswith("# Workflow Execution Report: p\n\n## Execution Summary\n- Status: COMPLETE")
    assert "| 1 | find | scout | SUCCESS |" in text and "## Final Output\n\nthree words here" in text
    assert state.usage.output_tokens == 3


async def test_a_step_timeout_bounds_a_loop_step(client, tmp_path, llm):
    text = loop_spec(3).replace("    - id: review\n", "    - id: review\n      timeout: 1s\n")
    llm.hold("writer")
    state = await run(client, tmp_path, llm, text, {})
    llm.release()
    assert state.status == "failed" and llm.prompts_for("critic") == []
    assert "review: step timed out after 1s" in state.errors
    assert state.tasks["review.writer"].status == "cancelled"
