"""`inspect` and `dry-run`: the execution graph, the step listing and the dry-run plan, as text."""

from __future__ import annotations

import textwrap
from pathlib import Path

from agentrun.explain.describe import dry_run_text, inspect_text
from agentrun.explain.graph import draw
from agentrun.lang.load import load
from tests.specs import run_cli

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ROOT / "examples" / "pipelines"
LEAD_SCORING = str(PIPELINES / "lead-scoring.yaml")
PROPOSAL = str(PIPELINES / "research-to-proposal.yaml")
AGENTS = ("openai:gpt-4o-mini", {"reviewer": "anthropic:claude-3-5-haiku-latest"})

LEAD_SCORING_GRAPH = """\
/--> [1a. Firmographic Scorer] ---\\
+--> [1b. Technographic Scorer] --+--> [2. Score Aggregator]
\\--> [1c. Intent Scorer] ---------/"""

PROPOSAL_GRAPH = """\
[1. Company Researcher] --> [2. Pain Point Identifier] --> [3. Pricing Analyst] -->
--> [4. Proposal Writer] --> [5a. Proposal Writer] --> [5b. Quality Reviewer] --PASS--> done
                                       ^                          |
                                       |                        FAIL
                                       \\-------- feedback --------/
                                       (max 2 iterations)"""


def pipeline(tmp_path: Path, agents: dict[str, str], steps: str):
    """A pipeline whose agents (id: display name) all have a trivial prompt."""
    declared = "\n".join(f"    {aid}: {{name: {label}, prompt: go}}" for aid, label in agents.items())
    text = f"workflow:\n  name: t\n  agents:\n{declared}\n  steps:\n" + textwrap.indent(textwrap.dedent(steps), "    ")
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load(str(path))


# ---- the graph -------------------------------------------------------------------------------


def test_graph_of_the_seed_examples():
    assert draw(load(LEAD_SCORING)) == LEAD_SCORING_GRAPH
    assert draw(load(PROPOSAL)) == PROPOSAL_GRAPH
    assert draw(load(PROPOSAL), width=200).splitlines()[0] == (
        "[1. Company Researcher] --> [2. Pain Point Identifier] --> [3. Pricing Analyst] --> "
        "[4. Proposal Writer] --> [5a. Proposal Writer] --> [5b. Quality Reviewer] --PASS--> done"
    )


def test_sequential_chain_is_the_seed_figure(tmp_path):
    plan = pipeline(
        tmp_path,
        {"r": "Researcher", "p": "Pain Identifier", "c": "Pricing", "w": "Writer", "v": "Reviewer"},
        """\
        - {id: one, agent: r}
        - {id: two, agent: p}
        - {id: three, agent: c}
        - {id: four, agent: w}
        - {id: five, agent: v}
        """,
    )
    assert draw(plan) == "[1. Researcher] --> [2. Pain Identifier] --> [3. Pricing] --> [4. Writer] --> [5. Reviewer]"


def test_parallel_fans_out_and_in_to_the_next_step(tmp_path):
    plan = pipeline(
        tmp_path,
        {
            "prep": "Prepare Data",
            "f": "Firmographic Scorer",
            "t": "Technographic Scorer",
            "i": "Intent Scorer",
            "agg": "Aggregator",
        },
        """\
        - {id: prepare, agent: prep}
        - id: score
          type: parallel
          parallel: [{agent: f, input: "{{steps.prepare.output}}"}, {agent: t}, {agent: i}]
        - {id: aggregate, agent: agg, input: "{{steps.score.outputs}}"}
        """,
    )
    assert (
        draw(plan)
        == """\
                   /--> [2a. Firmographic Scorer] ---\\
[1. Prepare Data] -+--> [2b. Technographic Scorer] --+--> [3. Aggregator]
                   \\--> [2c. Intent Scorer] ---------/"""
    )


def test_an_even_fan_is_entered_between_its_middle_branches(tmp_path):
    plan = pipeline(
        tmp_path,
        {"a": "A", "b1": "B1", "b2": "B2", "d": "D"},
        """\
        - {id: first, agent: a}
        - {id: both, type: parallel, parallel: [{agent: b1, input: "{{steps.first.output}}"}, {agent: b2}]}
        - {id: last, agent: d, input: "{{steps.both.output}}"}
        """,
    )
    assert (
        draw(plan)
        == """\
        /--> [2a. B1] --\\
[1. A] -|               |--> [3. D]
        \\--> [2b. B2] --/"""
    )


def test_conditional_chain_reads_as_one_choice_with_its_conditions(tmp_path):
    plan = pipeline(
        tmp_path,
        {
            "r": "Research",
            "s": "Score",
            "hot": "Hot Lead Handler",
            "warm": "Warm Lead Handler",
            "cold": "Cold Lead Handler",
        },
        """\
        - {id: research, agent: r}
        - {id: score, agent: s, input: "{{steps.research.output}}", output: {format: json}}
        - id: route
          type: conditional
          condition: {eval: "{{steps.score.output.score}} >= 80", true: hot_lead, false: lukewarm}
        - id: lukewarm
          type: conditional
          condition: {eval: "{{steps.score.output.score}} >= 40", true: warm, false: cold}
        - {id: hot_lead, agent: hot}
        """,
    )
    assert (
        draw(plan)
        == """\
                              /--> [3a. Hot Lead Handler] (steps.score.output.score >= 80)
[1. Research] --> [2. Score] -+--> [3b. Warm Lead Handler] (else if steps.score.output.score >= 40)
                              \\--> [3c. Cold Lead Handler] (else)"""
    )


def test_conditional_with_a_missing_branch_and_a_next_step(tmp_path):
    plan = pipeline(
        tmp_path,
        {"c": "Classifier", "h": "Handler", "e": "End"},
        """\
        - {id: classify, agent: c, output: {format: json}}
        - id: route
          type: conditional
          condition: {eval: "{{steps.classify.output.hot}}", true: h}
        - {id: finish, agent: e, input: "{{steps.route.output}}"}
        """,
    )
    assert (
        draw(plan)
        == """\
                 /--> [2a. Handler] (steps.classify.output.hot) --\\
[1. Classifier] -|                                                |--> [3. End]
                 \\--> nothing runs (else) ------------------------/"""
    )


def test_loop_is_the_seed_figure(tmp_path):
    plan = pipeline(
        tmp_path,
        {"w": "Writer", "r": "Reviewer", "d": "Deliver"},
        """\
        - {id: write, type: loop, loop: {agent: w, validator: r, max_iterations: 3}}
        - {id: deliver, agent: d, input: "{{steps.write.output}}"}
        """,
    )
    assert (
        draw(plan)
        == """\
[1a. Writer] --> [1b. Reviewer] --PASS--> [2. Deliver]
      ^                 |
      |               FAIL
      \\--- feedback ----/
      (max 3 iterations)"""
    )


def test_map_splits_to_n_agents_then_reduces(tmp_path):
    plan = pipeline(
        tmp_path,
        {"s": "Splitter", "m": "Summarizer", "c": "Combiner", "p": "Publisher"},
        """\
        - {id: split, agent: s, output: {format: json}}
        - id: summaries
          type: map
          map: {over: "{{steps.split.output.chunks}}", agent: m, reduce: c}
        - {id: publish, agent: p, input: "{{steps.summaries.output}}"}
        """,
    )
    assert (
        draw(plan)
        == """\
[1. Splitter] -+--> [2a. Summarizer × N] --+--> [2b. Combiner] --> [3. Publisher]
                    (each of steps.split.output.chunks)"""
    )


def test_a_mix_wraps_between_figures_and_draws_fallbacks(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(
        textwrap.dedent("""\
        workflow:
          name: mix
          agents:
            splitter: {name: Splitter, prompt: go, retry: {max_attempts: 2, on_failure: "fallback: backup"}}
            backup: {name: Backup Splitter, prompt: go}
            summarizer: {name: Summarizer, prompt: "{{item}}"}
            a: {name: Analyst A, prompt: go}
            b: {name: Analyst B, prompt: go}
            writer: {name: Writer, prompt: go}
            reviewer: {name: Reviewer, prompt: go}
          steps:
            - {id: split, agent: splitter, output: {format: json}}
            - {id: summaries, type: map, map: {over: "{{steps.split.output.chunks}}", agent: summarizer}}
            - id: angles
              type: parallel
              wait: any
              parallel: [{agent: a, input: "{{steps.summaries.output}}"}, {agent: b}]
            - {id: polish, type: loop, input: "{{steps.angles.outputs.a}}", loop: {agent: writer, validator: reviewer}}
        """)
    )
    lines = draw(load(str(path))).splitlines()
    assert lines[:2] == [
        "[1. Splitter] -------------------------+--+--> [2. Summarizer × N] --+-->",
        " \\--failure--> [1'. Backup Splitter] --/       (each of steps.split.output.chunks)",
    ]
    assert lines[2:] == [
        "",
        "  /--> [3a. Analyst A] --\\",
        "--|                      |--> [4a. Writer] --> [4b. Reviewer] --PASS--> done",
        "  \\--> [3b. Analyst B] --/          ^                 |",
        "                                    |               FAIL",
        "                                    \\--- feedback ----/",
        "                                    (max 3 iterations)",
    ]


NESTED = """\
- {id: classify, agent: c, output: {format: json}}
- {id: route, type: conditional, condition: {eval: "{{steps.classify.output.deep}}", true: deep, false: polish}}
- {id: deep, type: parallel, parallel: [{agent: b}, {agent: s}]}
- {id: polish, type: loop, loop: {agent: w, validator: r, max_iterations: 2}}
"""
NESTED_AGENTS = {"c": "Classifier", "b": "Scorer B", "s": "Scorer C", "w": "Writer", "r": "Reviewer", "e": "End"}


def test_branches_holding_figures_carry_their_condition_in_front(tmp_path):
    plan = pipeline(tmp_path, NESTED_AGENTS, NESTED)
    assert (
        draw(plan)
        == """\
                                                    /--> [2a1. Scorer B]
                 /--> (steps.classify.output.deep) -|
                 |                                  \\--> [2a2. Scorer C]
[1. Classifier] -|
                 \\--> (else) [2b1. Writer] --> [2b2. Reviewer] --PASS--> done
                                   ^                  |
                                   |                FAIL
                                   \\---- feedback ----/
                                   (max 2 iterations)"""
    )


def test_figures_in_branches_join_the_fan_in_when_a_step_follows(tmp_path):
    plan = pipeline(tmp_path, NESTED_AGENTS, NESTED + '- {id: end, agent: e, input: "{{steps.route.output}}"}\n')
    assert (
        draw(plan)
        == """\
                                                    /--> [2a1. Scorer B] --\\
                 /--> (steps.classify.output.deep) -|                      |---\\
                 |                                  \\--> [2a2. Scorer C] --/   |
[1. Classifier] -|                                                             |--> [3. End]
                 \\--> (else) [2b1. Writer] --> [2b2. Reviewer] --PASS----------/
                                   ^                  |
                                   |                FAIL
                                   \\---- feedback ----/
                                   (max 2 iterations)"""
    )


def test_wide_characters_line_up_as_a_terminal_shows_them(tmp_path):
    plan = pipeline(
        tmp_path,
        {"p": "准备数据", "f": "企业属性打分师", "i": "意向打分", "a": "分数聚合师"},
        """\
        - {id: prepare, agent: p}
        - {id: score, type: parallel, parallel: [{agent: f, input: "{{steps.prepare.output}}"}, {agent: i}]}
        - {id: aggregate, agent: a, input: "{{steps.score.outputs}}"}
        """,
    )
    assert (
        draw(plan)
        == """\
               /--> [2a. 企业属性打分师] --\\
[1. 准备数据] -|                           |--> [3. 分数聚合师]
               \\--> [2b. 意向打分] --------/"""
    )


def test_task_tree_is_a_chain_of_its_tasks(tmp_path):
    path = tmp_path / "tree.yaml"
    path.write_text(
        "name: tree\nsubtasks:\n  scaffold: {instructions: a}\n  build: {instructions: b}\n  test: {instructions: c}\n"
    )
    assert draw(load(str(path))) == "[1. scaffold] --> [2. build] --> [3. test]"


# ---- inspect ---------------------------------------------------------------------------------


def test_inspect_describes_each_step_draws_the_graph_and_lists_agents():
    text = inspect_text(load(PROPOSAL))
    assert text.startswith(
        "Workflow: research-to-proposal, version 1.0.0\n"
        "Research a prospect company and generate a personalized consulting proposal\n"
        "Timeout for the whole run: 15m\n"
    )
    assert '  rough_scope (string, default ""): Any known scope details' in text
    steps = text.split("\nSteps\n")[1].split("\n\nGraph\n")[0].splitlines()
    assert steps[:4] == [
        (
            "  1. research — sequential: Company Researcher (researcher) gets {{inputs.company_name}}; "
            "output stored as research_data (json)"
        ),
        "     up to 2 attempts; on failure: skipped, the run goes on; timeout 3m",
        "     rule: Output must include company_overview field",
        "     rule: Output must include key_challenges array",
    ]
    assert (
        "  4. draft — sequential: Proposal Writer (proposal_writer) gets all prior context "
        "(every earlier step's output); output stored as proposal_draft (markdown)"
    ) in steps
    assert steps[-7:] == [
        (
            "  5. review — loop: Proposal Writer (proposal_writer) produces, Quality Reviewer (reviewer) "
            "checks, until the check passes (its reply has passed: true), at most 2 iterations; feedback from "
            "steps.review.output.feedback; output stored as final_proposal (markdown)"
        ),
        "     5a. Proposal Writer (proposal_writer) gets nothing but its prompt",
        "         timeout 4m",
        "     5b. Quality Reviewer (reviewer) gets the output of 5a",
        "         timeout 2m",
        "         rule: Must include overall_score field",
        "         rule: Must include passed boolean",
    ]
    graph = text.split("\nGraph\n")[1].split("\n\nAgents\n")[0]
    assert graph == "\n".join("  " + line if line else "" for line in PROPOSAL_GRAPH.splitlines())
    assert text.split("\nAgents\n")[1].splitlines()[0] == (
        "  researcher: Company Researcher — Gather intelligence about the target company (tools: Read, Bash, WebSearch)"
    )


def test_inspect_of_parallel_and_conditional_steps(tmp_path):
    lead = inspect_text(load(LEAD_SCORING))
    assert (
        "  1. parallel_scoring — parallel: 3 agents at once, waits for all; outputs firmographic, "
        "technographic, intent; output stored as parallel_scores"
    ) in lead
    assert (
        "     1a. Firmographic Scorer (firmographic_scorer) gets {{inputs.lead_data}}; "
        "output as outputs.firmographic" in lead
    )
    assert "  intent_scorer: Intent Scorer — Score based on buying signals (tools: Read, Bash)" in lead

    plan = pipeline(
        tmp_path,
        {"c": "Classifier", "h": "Handler", "o": "Other"},
        """\
        - {id: classify, agent: c, output: {format: json}}
        - id: route
          type: conditional
          condition: {eval: "{{steps.classify.output.kind}} == 'hot'", true: handle, false: o}
        - {id: handle, agent: h, input: "{{steps.classify.output}}"}
        """,
    )
    text = inspect_text(plan)
    assert (
        "  2. route — conditional: the first branch whose condition holds runs\n"
        "     2a. if steps.classify.output.kind == 'hot' → handle — sequential: Handler (h) gets "
        "{{steps.classify.output}}; output in steps.handle.output (text)\n"
        "     2b. else → Other (o) gets nothing but its prompt\n" in text
    )


# ---- dry run ---------------------------------------------------------------------------------


def proposal_values() -> dict:
    return {
        "company_name": "Acme Corp",
        "contact_name": "Jane Doe",
        "our_services": "Cloud migration",
        "rough_scope": "",
    }


def test_dry_run_shows_inputs_and_every_call_without_calling_an_agent():
    text = dry_run_text(load(PROPOSAL), proposal_values(), AGENTS)
    inputs = text.split("\nInputs\n")[1].split("\n\nPlan\n")[0]
    assert inputs.splitlines() == [
        "  company_name = Acme Corp",
        "  contact_name = Jane Doe",
        "  our_services = Cloud migration",
        '  rough_scope = "" (default)',
    ]
    plan = text.split("\nPlan\n")[1].splitlines()
    assert plan[:14] == [
        "  1. research — Company Researcher (researcher) via openai:gpt-4o-mini",
        "     input: Acme Corp",
        "     prompt (11 lines):",
        "       | You are a business research analyst. Research Acme Corp and compile:",
        "       | 1. Company overview (size, industry, recent news)",
        "       | 2. Key challenges in their industry",
        "       | 3. Technology stack (if detectable)",
        "       | 4. Recent hiring patterns (signals growth areas)",
        "       | 5. Competitor landscape",
        "       | … 5 more lines",
        "     expected output: json, stored as research_data",
        "       rule: Output must include company_overview field",
        "       rule: Output must include key_challenges array",
        "     up to 2 attempts; on failure: skipped, the run goes on; timeout 3m",
    ]
    assert "  2. identify_pains — Pain Point Identifier (pain_identifier) via openai:gpt-4o-mini" in plan
    assert "     input: <output of identify_pains>" in plan
    assert "       | Given this research about Acme Corp:" in plan and "       | <output of research>" in plan
    assert "     input: <outputs of research, identify_pains, pricing>" in plan
    assert "       | Pain points: <output of identify_pains>" in plan
    review = plan[
        plan.index(
            "  5. review — loop, at most 2 iterations, until Quality Reviewer passes it; "
            "output stored as final_proposal"
        ) :
    ]
    assert "         from iteration 2 it also gets the feedback: <output of review>.feedback" in review
    assert "     5b. Quality Reviewer (reviewer) via anthropic:claude-3-5-haiku-latest" in review
    assert "         input: <output of review.proposal_writer>" in review
    assert "         the loop ends when its reply has passed: true" in review
    assert text.endswith("\n\nNo agent was called.")


def test_dry_run_renders_json_inputs_and_parallel_outputs():
    values = {"lead_data": {"name": "Ann Lee", "company": "Acme"}, "icp_criteria": {"size": "50-500"}}
    text = dry_run_text(load(LEAD_SCORING), values, ("openai:gpt-4o-mini", {}))
    assert '  lead_data = {\n                "name": "Ann Lee",\n' in text
    assert (
        "  1. parallel_scoring — parallel, waits for all; output stored as parallel_scores\n"
        "     1a. Firmographic Scorer (firmographic_scorer) via openai:gpt-4o-mini\n"
        "         input: {\n"
        '                  "name": "Ann Lee",\n' in text
    )
    assert "       | Aggregate these parallel scoring results for lead Ann Lee:" in text
    assert "       | Firmographic: <output of parallel_scoring>.firmographic" in text
    assert "     expected output: json, stored as final_score" in text
    assert "Problems" not in text and text.endswith("No agent was called.")


def test_dry_run_names_a_prompt_that_cannot_be_filled_in(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        textwrap.dedent("""\
        workflow:
          name: t
          inputs: [{name: lead, type: json, required: true}]
          agents:
            a: {name: A, prompt: "Hello {{ inputs.lead.name }}"}
          steps:
            - {id: greet, agent: a}
        """)
    )
    text = dry_run_text(load(str(path)), {"lead": {"company": "Acme"}}, ("openai:x", {}))
    assert "     cannot fill in its prompt:" in text
    assert "Problems a run would meet\n  1: cannot fill in its prompt:" in text


# ---- the commands ----------------------------------------------------------------------------


def test_inspect_command():
    for spec, graph in ((LEAD_SCORING, LEAD_SCORING_GRAPH), (PROPOSAL, PROPOSAL_GRAPH)):
        result = run_cli("inspect", spec)
        assert result.returncode == 0, result.stderr
        assert "\n".join("  " + line if line else "" for line in graph.splitlines()) in result.stdout
        assert "\nSteps\n" in result.stdout and "\nAgents\n" in result.stdout


def test_dry_run_command():
    result = run_cli(
        "dry-run",
        PROPOSAL,
        "-p",
        "company_name=Acme Corp",
        "-p",
        "contact_name=Jane Doe",
        "-p",
        "our_services=Cloud migration",
        "--agent",
        "openai:gpt-4o-mini",
        "--agent",
        "reviewer=anthropic:claude-3-5-haiku-latest",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == dry_run_text(load(PROPOSAL), proposal_values(), AGENTS) + "\n"


def test_dry_run_names_every_missing_input_and_exits_2():
    result = run_cli("dry-run", PROPOSAL, "-p", "contact_name=Jane", "--agent", "openai:gpt-4o-mini")
    assert result.returncode == 2 and result.stdout == ""
    assert f"{PROPOSAL}:11:1: error: missing required param 'company_name'" in result.stderr
    assert f"{PROPOSAL}:19:1: error: missing required param 'our_services'" in result.stderr
    assert "contact_name" not in result.stderr and "Traceback" not in result.stderr


def test_undefined_reference_exits_2_with_its_line(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        textwrap.dedent("""\
        workflow:
          name: bad
          agents:
            a: {name: A, prompt: go}
            b:
              name: B
              prompt: |
                Use this:
                {{ steps.frist.output }}
          steps:
            - {id: first, agent: a}
            - {id: second, agent: b}
        """)
    )
    for command in (["inspect", str(spec)], ["dry-run", str(spec), "--agent", "openai:x"]):
        result = run_cli(*command)
        assert result.returncode == 2 and result.stdout == ""
        assert f"{spec}:9:1: error: undefined reference 'steps.frist.output': no step 'frist'" in result.stderr
        assert "did you mean 'first'?" in result.stderr and "Traceback" not in result.stderr


def test_dry_run_needs_no_agent_and_names_the_ones_not_configured():
    """A dry run deploys no agent, so it runs with none configured (start still refuses)."""
    result = run_cli("dry-run", LEAD_SCORING, "-p", "lead_data={}", "-p", "icp_criteria={}")
    assert result.returncode == 0, result.stderr
    assert "Firmographic Scorer (firmographic_scorer) via (not configured: pass --agent ID=URI)" in result.stdout
    problems = result.stdout.split("Problems a run would meet\n")[1]
    assert "  agent 'aggregator' has no URI: pass --agent aggregator=URI\n" in problems
    assert result.stdout.rstrip().endswith("No agent was called.")
    started = run_cli("start", LEAD_SCORING, "-p", "lead_data={}", "-p", "icp_criteria={}")
    assert started.returncode == 2 and "no agent is configured for this run" in started.stderr
