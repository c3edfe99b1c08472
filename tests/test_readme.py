"""The README and the docs pages its content moved to show what works: their spec examples are the
examples shipped and load, their commands run as written, and the README keeps the two commands."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml

from agentrun.lang import ir
from agentrun.lang.load import load
from tests.conftest import ROOT, SHELL_AGENT, write_spec

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text()


def test_readme_fits_on_a_screen_or_two():
    assert len(README.splitlines()) <= 150


def test_docs_task_tree_example_is_a_valid_spec(tmp_path):
    block = re.search(r"```yaml\n(.*?)```", page("languages/task-trees.md"), re.DOTALL).group(1)
    plan = load(str(write_spec(tmp_path, block)))
    assert [leaf.id for leaf in plan.leaves()] == ["setup.install", "research", "build", "publish"]


def test_readme_has_the_two_commands_and_how_to_serve_the_docs():
    assert "    pip install -e . && python -m client start examples/quickstart.yaml\n" in README
    assert '    pip install -e ".[test]" && python -m pytest -m quick\n' in README
    # What the whole suite costs, and what its browser tests need.
    assert "about 15 minutes on 2 cores" in README and "apt-get install chromium" in README
    assert '    pip install -e ".[docs]" && mkdocs serve\n' in README


def test_docs_pipeline_page_matches_the_example_and_its_graph():
    from agentrun.explain.graph import draw

    section = page("languages/pipelines.md")
    example = ROOT / "examples" / "pipelines" / "lead-scoring.yaml"
    assert re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1) == example.read_text()
    graph = re.search(r"draws the graph:\n\n```\n(.*?)```", section, re.DOTALL).group(1)
    assert graph.rstrip("\n").splitlines() == ["  " + line for line in draw(load(str(example))).splitlines()]


def test_docs_dry_run_command_runs_with_the_lead_it_ships(cli):
    section = page("languages/pipelines.md")
    command = re.search(
        r"    python -m client (dry-run examples/pipelines/lead-scoring\.yaml .*?)\n    \w", section, re.DOTALL
    )
    args = shlex.split(command.group(1).replace("\\\n", " "))
    result = cli(*args)
    assert result.code == 0, result.err
    shown = re.search(r"listed under \"Problems a run would meet\"\):\n\n```\n(.*?)```", section, re.DOTALL).group(1)
    for line in shown.splitlines():
        assert line.strip() == "…" or line in result.out


def test_docs_people_page_shows_the_release_example_and_every_command():
    section = page("people.md")
    example = ROOT / "examples" / "release.yaml"
    # four backticks, as the example's prompts hold ```sh blocks
    assert re.search(r"````yaml\n(.*?)````", section, re.DOTALL).group(1) == example.read_text()
    for command in ("pending", "answer", "approve", "reject"):
        assert f"python -m client {command}" in section
    # The command-line page's reference is made from the parser when the site is built.
    from agentrun.cli import reference

    assert "<!-- cli-reference -->" in page("cli.md")
    usage = reference.markdown()
    for command in ("pending", "answer", "approve", "reject", "budget", "cancel"):
        assert f"python -m client {command} " in usage


def agentfile_section() -> str:
    return page("languages/agentfile.md")


def test_docs_agentfile_page_shows_the_example_verbatim_and_a_draft_form_that_loads(tmp_path):
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
    return page("languages/state-graphs.md")


def test_docs_state_graphs_page_shows_the_example_and_inspect_as_printed():
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


def test_docs_state_graph_example_runs_offline_as_written(cli):
    section = state_graphs_section()
    command = re.search(r"^    (python -m client start examples/graphs/hub_and_spoke\.yaml .*)$", section, re.MULTILINE)
    args = shlex.split(command.group(1))[3:]
    result = cli(*args, extra_env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.code == 0, result.out + result.err
    replies = yaml.safe_load((ROOT / "examples" / "graphs" / "hub_and_spoke.replies.yaml").read_text())["tasks"]
    assert f"## Final Output\n\n{replies['write']}\n" in result.out
    assert "| 2 | lead | write | the notes cover the topic |" in result.out


@pytest.mark.quick
def test_readme_spec_runs_as_its_output_shows(cli, tmp_path):
    spec = re.search(r"<!-- spec -->\n\n```yaml\n(.*?)\n```\n", README, re.DOTALL).group(1)
    command = re.search(r"^    python -m client (start hello\.yaml .*)$", README, re.MULTILINE).group(1)
    args = shlex.split(command)
    assert args[2:] == ["--agent", "command:python examples/agents/shell_agent.py"]
    result = cli("start", str(write_spec(tmp_path, spec + "\n", "hello.yaml")), "--agent", SHELL_AGENT)
    assert result.code == 0, result.out + result.err
    shown = re.search(r"then prints its report:\n\n```text\n(.*?)```", README, re.DOTALL).group(1)
    printed = {re.sub(r" in [0-9.]+s$", "", line) for line in result.out.splitlines()}
    for line in shown.splitlines():
        if line.startswith(("run ", "Temporal Web:", "worker:")) or line == "…":
            continue  # the run's id, its link and the worker's pid differ from run to run
        assert re.sub(r" in [0-9.]+s$", "", line) in printed, line
