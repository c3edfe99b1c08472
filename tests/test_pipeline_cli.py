"""The seed's two example pipelines, unchanged, run with `python -m client start` against a llm
OpenAI-compatible server returning scripted JSON; and a kill -9 in the middle of a parallel step.
"""

from __future__ import annotations

import json

from tests.conftest import ROOT, run_id, sigkill, start_worker, wait_for, watch_with_new_worker
from tests.fakes.openai_server import FakeOpenAI

EXAMPLES = ROOT / "examples" / "pipelines"

RESEARCH = {"company_overview": "Acme makes anvils", "key_challenges": ["supply", "hiring"]}
PAINS = [{"problem": f"p{i}", "impact": f"i{i}", "solution": f"s{i}"} for i in range(3)]
TIERS = {"tiers": [{"name": "Starter"}, {"name": "Growth"}, {"name": "Enterprise"}]}
REVIEWS = [
    {"overall_score": 5, "passed": False, "feedback": ["name the contact"], "critical_issues": []},
    {"overall_score": 8, "passed": True, "feedback": [], "critical_issues": []},
]


def agents_flags(*ids: str) -> list[str]:
    """Each agent id talks to its own model on the llm server."""
    return [flag for aid in ids for flag in ("--agent", f"{aid}=openai:{aid}")]


def env_for(llm: FakeOpenAI) -> dict[str, str]:
    return {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-test"}


def test_research_to_proposal_runs_unchanged(cli, llm):
    llm.by_model.update(
        {
            "researcher": "Here is the research:\n```json\n" + json.dumps(RESEARCH) + "\n```",
            "pain_identifier": json.dumps(PAINS),
            "pricing_analyst": json.dumps(TIERS),
            "proposal_writer": ["# Proposal v1", "# Proposal v2", "# Proposal v3"],
            "reviewer": [json.dumps(r) for r in REVIEWS],
        }
    )
    ids = ("researcher", "pain_identifier", "pricing_analyst", "proposal_writer", "reviewer")
    result = cli(
        "start",
        str(EXAMPLES / "research-to-proposal.yaml"),
        "-p",
        "company_name=Acme",
        "-p",
        "contact_name=Ada",
        "-p",
        "our_services=Ops consulting",
        *agents_flags(*ids),
        "--task-queue",
        run_id("q"),
        extra_env=env_for(llm),
    )
    assert result.code == 0, result.out + result.err
    assert [r.model for r in llm.requests] == [
        "researcher",
        "pain_identifier",
        "pricing_analyst",
        "proposal_writer",
        "proposal_writer",
        "reviewer",
        "proposal_writer",
        "reviewer",
    ]
    assert llm.prompts_for("researcher")[0].startswith("You are a business research analyst. Research Acme")
    assert '"company_overview": "Acme makes anvils"' in llm.prompts_for("pain_identifier")[0]
    writer = llm.prompts_for("proposal_writer")
    assert "contact: Ada" in writer[0] and '"draft"' not in writer[0]  # draft's input: all prior context
    assert "Feedback on your previous output:" in writer[2] and "name the contact" in writer[2]
    assert "# Proposal v2" in llm.prompts_for("reviewer")[0]  # the loop's first draft
    out = result.out
    assert "- Status: COMPLETE" in out and "- Total steps: 6" in out
    assert "## Final Output\n\n# Proposal v3" in out


def test_lead_scoring_runs_unchanged_with_json_inputs(cli, llm, tmp_path):
    llm.by_model.update(
        {
            "firmographic_scorer": '{"score": 90, "breakdown": {}, "reasoning": "size"}',
            "technographic_scorer": '{"score": 60, "breakdown": {}, "reasoning": "stack"}',
            "intent_scorer": '{"score": 70, "signals": ["hiring"], "reasoning": "jobs"}',
            "aggregator": '{"final_score": 75, "category": "warm", "recommended_action": "nurture", '
            '"summary": "ok", "breakdown": {}}',
        }
    )
    lead = tmp_path / "lead.json"
    lead.write_text('{"name": "Ada Lovelace", "company": "Acme", "title": "CTO"}')
    ids = ("firmographic_scorer", "technographic_scorer", "intent_scorer", "aggregator")
    result = cli(
        "start",
        str(EXAMPLES / "lead-scoring.yaml"),
        "-p",
        f"lead_data=@{lead}",
        "-p",
        'icp_criteria={"size": "50-500"}',
        *agents_flags(*ids),
        "--task-queue",
        run_id("q"),
        extra_env=env_for(llm),
    )
    assert result.code == 0, result.out + result.err
    aggregate = llm.prompts_for("aggregator")[0]
    assert aggregate.startswith("Aggregate these parallel scoring results for lead Ada Lovelace:")
    assert '"score": 90' in aggregate and '"signals": [' in aggregate
    assert '"category": "warm"' in result.out and "- Status: COMPLETE" in result.out
    for row in (
        "parallel_scoring.firmographic",
        "parallel_scoring.technographic",
        "parallel_scoring.intent",
        "aggregate",
    ):
        assert f"| {row} |" in result.out


def test_missing_required_inputs_are_all_named_before_anything_runs(cli, llm):
    result = cli("start", str(EXAMPLES / "research-to-proposal.yaml"), "-p", "company_name=Acme")
    assert result.code == 2 and llm.requests == []
    assert "'contact_name'" in result.err and "'our_services'" in result.err
    assert "research-to-proposal.yaml:" in result.err


FAN = """\
workflow:
  name: fan
  agents:
    a: {prompt: "A"}
    b: {prompt: "B"}
    c: {prompt: "C"}
  steps:
    - id: fan
      type: parallel
      parallel: [{agent: a}, {agent: b}, {agent: c}]
"""


def test_sigkill_mid_parallel_step_does_not_call_finished_agents_again(cli, address, llm, tmp_path):
    spec = tmp_path / "fan.yaml"
    spec.write_text(FAN)
    queue, rid = run_id("crash-q"), run_id("fan")
    llm.by_model.update({"a": "done a", "b": "done b", "c": "done c"})
    llm.hold("c")
    first = start_worker(address, "--task-queue", queue)
    started = cli("start", str(spec), *agents_flags("a", "b", "c"), "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0, started.err
    wait_for(lambda: llm.in_flight("c") == 1 and len(llm.requests) == 3)
    wait_for(lambda: _statuses(cli, rid)[:2] == ["completed", "completed"])
    sigkill(first)
    llm.release("c")
    watched = watch_with_new_worker(cli, address, queue, rid)
    assert watched.code == 0, watched.out + watched.err
    assert len(llm.requests_for("a")) == 1 and len(llm.requests_for("b")) == 1
    assert len(llm.requests_for("c")) in (1, 2)  # only the agent in flight at the kill may be asked again
    assert _statuses(cli, rid) == ["completed"] * 3


def _statuses(cli, rid: str) -> list[str]:
    result = cli("status", rid, "--json")
    return [t["status"] for t in json.loads(result.out)["tasks"]] if result.code == 0 else []


def test_validate_flags_rules_of_no_known_form(cli, tmp_path):
    spec = tmp_path / "rules.yaml"
    spec.write_text(
        FAN.replace(
            'a: {prompt: "A"}',
            'a: {prompt: "A", validation: {rules: ["The tone must be friendly", "Must include score field"]}}',
        )
    )
    result = cli("validate", str(spec))
    assert result.code == 0, result.err
    assert "has no known form: 'The tone must be friendly'" in result.out
    assert "Must include score field" not in result.out
