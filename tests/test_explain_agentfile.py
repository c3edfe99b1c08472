"""`inspect` and `dry-run` of an Agentfile, as the command line prints them: the run's SECURITY
mode in the header, each goal's supervision mode and who would judge it."""

from __future__ import annotations

from pathlib import Path

from tests.specs import run_cli

GOALS = """\
NAME three-goals
{security}
GOAL plan "Plan the trip." -> route UNSUPERVISED
GOAL book "Book the stops on $route." SUPERVISED
GOAL pay "Pay for the bookings." SUPERVISED HUMAN
RUN main USING plan, book, pay
"""


def agentfile(folder: Path, security: str = "") -> str:
    path = folder / "Agentfile"
    path.write_text(GOALS.format(security=security))
    return str(path)


def header(stdout: str) -> list[str]:
    """The lines before the inputs: the workflow's name and what applies to the whole run."""
    return stdout.split("\n\nInputs\n", 1)[0].splitlines()


def printed(*args: str) -> str:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_paranoid_and_research_modes_head_inspect_and_dry_run(tmp_path):
    paranoid = agentfile(tmp_path, "SECURITY paranoid")
    for command in ("inspect", "dry-run"):
        assert header(printed(command, paranoid)) == [
            "Workflow: three-goals",
            "Security: paranoid — every agent and provider output is untrusted data, fenced off where a prompt "
            "quotes it",
        ]
    research = agentfile(tmp_path, 'SECURITY research "the \\"staging\\" servers only"')
    for command in ("inspect", "dry-run"):
        assert header(printed(command, research)) == [
            "Workflow: three-goals",
            'Security: research, scope "the \\"staging\\" servers only" — it goes into every system prompt',
        ]
    # The scope is in the system text of the first prompt a dry run shows.
    prompts = [line for line in printed("dry-run", research).splitlines() if line.lstrip().startswith("| ")]
    assert any('the "staging" servers only' in line for line in prompts)
    for default in (agentfile(tmp_path), agentfile(tmp_path, "SECURITY default")):
        assert header(printed("inspect", default)) == ["Workflow: three-goals"]


def test_inspect_shows_each_goals_supervision_and_the_supervisor(tmp_path):
    out = printed("inspect", agentfile(tmp_path))
    steps = out.split("\nSteps\n")[1].split("\n\nGraph\n")[0]
    assert steps.splitlines() == [
        "  1. RUN main, in order:",
        "     1a. goal: plan (unsupervised), by the default agent; outputs route",
        "     1b. goal: book (supervised), by the default agent",
        "     1c. goal: pay (supervised, human), by the default agent",
    ]
    assert out.endswith(
        "\nAgents\n  default: runs main.plan, main.book, main.pay\n"
        "  supervisor: judges main.book, main.pay when --agent supervisor=URI names it; else each goal's own agent "
        "does\n"
    )


def test_dry_run_shows_each_goals_supervision_and_who_would_judge_it(tmp_path):
    spec = agentfile(tmp_path)

    def supervision(*agents: str) -> list[str]:
        out = printed("dry-run", spec, *agents)
        return [line.strip() for line in out.splitlines() if line.strip().startswith(("supervision:", "phases:"))]

    assert supervision("--agent", "openai:worker") == [
        "supervision: none",
        "phases: COMMIT → EXECUTE; EXECUTE may start sub-agents (spawn_agents)",
        "supervision: supervised — its own agent (default; --agent supervisor=URI names another) judges an attempt "
        "that raised flags",
        "phases: COMMIT → EXECUTE → RECONCILE → SUPERVISE when reconcile raises flags; EXECUTE may start sub-agents "
        "(spawn_agents)",
        "supervision: human — its own agent (default; --agent supervisor=URI names another) judges every attempt, "
        "then a person answers at gate main.pay.supervise",
        "phases: COMMIT → EXECUTE → RECONCILE → SUPERVISE → a person; EXECUTE may start sub-agents (spawn_agents)",
    ]
    judged = supervision("--agent", "openai:worker", "--agent", "supervisor=openai:judge")
    assert (
        judged[2] == "supervision: supervised — agent supervisor via openai:judge judges an attempt that raised flags"
    )
    assert judged[4] == (
        "supervision: human — agent supervisor via openai:judge judges every attempt, then a person answers at gate "
        "main.pay.supervise"
    )
    # agentrun.yaml next to the spec names the supervisor as --agent does.
    (tmp_path / "agentrun.yaml").write_text("agents:\n  default: openai:worker\n  supervisor: openai:judge\n")
    assert supervision()[2] == judged[2]
