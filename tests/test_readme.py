"""The README shows what works: its spec example is valid and its two commands are the promised ones."""

from __future__ import annotations

import re
import shlex

import yaml

from agentrun.lang import ir
from agentrun.lang.load import load
from tests.conftest import ROOT, write_spec

README = (ROOT / "README.md").read_text()


def test_readme_task_tree_example_is_a_valid_spec(tmp_path):
    block = re.search(r"## The task-tree language.*?```yaml\n(.*?)```", README, re.DOTALL).group(1)
    plan = load(str(write_spec(tmp_path, block)))
    assert [leaf.id for leaf in plan.leaves()] == ["setup.install", "research", "build", "publish"]


def test_readme_has_the_two_commands():
    assert "    pip install -e . && python -m client start examples/quickstart.yaml\n" in README
    assert '    pip install -e ".[test]" && python -m pytest\n' in README


def test_readme_pipeline_section_matches_the_example_and_its_graph():
    from agentrun.explain.graph import draw

    section = README.split("## Multi-agent pipelines", 1)[1]
    example = ROOT / "examples" / "pipelines" / "lead-scoring.yaml"
    assert re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1) == example.read_text()
    graph = re.search(r"draws the graph:\n\n```\n(.*?)```", section, re.DOTALL).group(1)
    assert graph.rstrip("\n").splitlines() == ["  " + line for line in draw(load(str(example))).splitlines()]


def test_readme_dry_run_command_runs_with_the_lead_it_ships(cli):
    command = re.search(
        r"    python -m client (dry-run examples/pipelines/lead-scoring\.yaml .*?)\n    \w", README, re.DOTALL
    )
    args = shlex.split(command.group(1).replace("\\\n", " "))
    result = cli(*args)
    assert result.code == 0, result.err
    shown = re.search(r"listed under \"Problems a run would meet\"\):\n\n```\n(.*?)```", README, re.DOTALL).group(1)
    for line in shown.splitlines():
        assert line.strip() == "…" or line in result.out


def test_readme_humans_section_shows_the_release_example_and_every_command():
    section = README.split("## Humans in the loop", 1)[1].split("\n## ", 1)[0]
    example = ROOT / "examples" / "release.yaml"
    # four backticks, as the example's prompts hold ```sh blocks
    assert re.search(r"````yaml\n(.*?)````", section, re.DOTALL).group(1) == example.read_text()
    for command in ("pending", "answer", "approve", "reject"):
        assert f"python -m client {command}" in section
    usage = README.split("## The command line", 1)[1]
    for command in ("pending", "answer", "approve", "reject", "budget", "cancel"):
        assert f"python -m client {command} " in usage


def agentfile_section() -> str:
    return README.split("\n## Agentfile\n", 1)[1].split("\n## Behaviour trees\n", 1)[0]


def test_readme_agentfile_section_shows_the_example_verbatim_and_a_draft_form_that_loads(tmp_path):
    section = agentfile_section()
    blocks = [code for _, code in re.findall(r"^```(\w*)\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)]
    example = ROOT / "examples" / "agentfile" / "supervised" / "Agentfile"
    assert blocks[0] == example.read_text()
    assert "    python -m client start examples/agentfile/supervised/Agentfile \\\n" in section
    draft = next(block for block in blocks if block.startswith("NAME deploy-service\n"))
    plan = load(str(write_spec(tmp_path, draft, "Agentfile")))
    goals = {leaf.id: leaf.supervision for leaf in plan.leaves() if isinstance(leaf, ir.Task)}
    assert goals == {"build-and-test": "supervised", "deploy-to-environment": "human"}


def state_graphs_section() -> str:
    return README.split("\n## State graphs\n", 1)[1].split("\n## Agents\n", 1)[0]


def test_readme_state_graphs_section_shows_the_example_and_inspect_as_printed():
    from agentrun.explain.describe import inspect_text
    from agentrun.explain.views.graph import mermaid

    section = state_graphs_section()
    example = ROOT / "examples" / "graphs" / "hub_and_spoke.yaml"
    assert re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1) == example.read_text()
    plan = load(str(example))
    assert isinstance(plan.root, ir.Graph)
    shown = re.search(
        r"```\n\$ python -m client inspect examples/graphs/hub_and_spoke.yaml\n(.*?)```", section, re.DOTALL
    )
    assert shown.group(1) == inspect_text(plan) + "\n"
    assert re.search(r"```mermaid\n(.*?)```", section, re.DOTALL).group(1) == mermaid(plan.root) + "\n"


def test_readme_state_graph_example_runs_offline_as_written(cli):
    section = state_graphs_section()
    command = re.search(r"^    (python -m client start examples/graphs/hub_and_spoke\.yaml .*)$", section, re.MULTILINE)
    args = shlex.split(command.group(1))[3:]
    result = cli(*args, extra_env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.code == 0, result.out + result.err
    replies = yaml.safe_load((ROOT / "examples" / "graphs" / "hub_and_spoke.replies.yaml").read_text())["tasks"]
    assert f"## Final Output\n\n{replies['write']}\n" in result.out
    assert "| 2 | lead | write | the notes cover the topic |" in result.out
