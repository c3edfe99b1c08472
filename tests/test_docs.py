"""Docs that cannot lie: every spec the docs site and the README show is one `validate` accepts,
every command they show is one the command line's parser accepts, and the command-line reference
is made from that parser.

A spec is a fenced block with `<!-- spec -->` on the line before it (`<!-- spec Agentfile -->` for a
file of that name); a command is a line of a code block (fenced, not yaml/json/python/mermaid, or
indented) that starts with `python -m client`, `agentrun` or `python -m worker`, after an optional
`$ ` prompt, a continuation `\\` joined and a `# comment` dropped."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrun import cli
from agentrun.cli import reference
from agentrun.worker import args as worker_args
from tests.conftest import ROOT

PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
MARK = re.compile(r"^<!-- spec(?: (\S+))? -->$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
NOT_SHELL = {"yaml", "json", "python", "mermaid", "toml"}
COMMANDS = ("python -m client", "agentrun", "python -m worker")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the block's first line of code, 1-based
    lang: str
    code: str
    spec_name: str | None  # the marked file name, when the block is a spec

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The code blocks of a Markdown page: fenced ones (with their language and any spec mark on the
    last non-blank line before them) and indented ones outside fences."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening:
            fence, lang = opening.groups()
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$", lines[j])
                ),
                len(lines),
            )
            before = next((line for line in reversed(lines[:i]) if line.strip()), "")
            marked = MARK.match(before.strip())
            name = (marked.group(1) or "spec.yaml") if marked else None
            found.append(Block(page, i + 2, lang, "\n".join(lines[i + 1 : end]) + "\n", name))
            i = end + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            start = i
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                i += 1
            code = "\n".join(line[4:] for line in lines[start:i])
            found.append(Block(page, start + 1, "", code.rstrip() + "\n", None))
            continue
        i += 1
    return found


ALL = [block for page in PAGES for block in blocks(page)]
SPECS = [block for block in ALL if block.spec_name]


def commands(block: Block) -> list[str]:
    """The commands of agentrun a shell block shows, each on one line."""
    joined = re.sub(r"\\\n\s*", " ", block.code)
    found = []
    for line in joined.splitlines():
        line = line.strip().removeprefix("$ ")
        for part in line.split(" && "):
            if part.startswith(COMMANDS):
                found.append(part)
    return found


SHOWN = [(block, command) for block in ALL if block.lang not in NOT_SHELL for command in commands(block)]


def parser_of(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    if words[:3] == ["python", "-m", "client"]:
        return cli.parser(), words[3:]
    if words[:3] == ["python", "-m", "worker"]:
        return worker_args.parser(), words[3:]
    return cli.parser("agentrun"), words[1:]


def test_the_docs_show_specs_and_commands():
    """The collectors find what the pages hold: a test that checked nothing would pass."""
    assert len(SPECS) >= 7, [block.where() for block in SPECS]
    assert {block.page.name for block in SPECS} >= {"README.md", "task-trees.md", "agentfile.md", "people.md"}
    assert len(SHOWN) >= 30
    assert any(command.startswith("python -m worker") for _, command in SHOWN)


@pytest.mark.parametrize("block", SPECS, ids=[block.where() for block in SPECS])
def test_every_spec_shown_is_valid(block, tmp_path, capsys):
    assert block.spec_name is not None
    path = tmp_path / block.spec_name
    path.write_text(block.code)
    code = cli.client(["validate", str(path)])
    out = capsys.readouterr()
    assert code == 0, f"{block.where()}: `validate` exited {code}:\n{out.out}{out.err}"


@pytest.mark.parametrize("shown", SHOWN, ids=[f"{block.where()} {command[:60]}" for block, command in SHOWN])
def test_every_command_shown_is_accepted(shown, capsys):
    block, command = shown
    words = shlex.split(command, comments=True)
    parser, args = parser_of(words)
    try:
        parser.parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{block.where()}: `{command}` is refused: {capsys.readouterr().err.strip()} (exit {exc.code})")


def test_a_command_the_parser_refuses_is_caught(capsys):
    """The check above fails on a wrong option: the parser is not asked in a way that accepts anything."""
    parser, args = parser_of(shlex.split("python -m client start spec.yaml --no-such-option"))
    with pytest.raises(SystemExit):
        parser.parse_args(args)
    capsys.readouterr()


def test_the_command_line_reference_names_every_command_and_option():
    page = reference.markdown()
    for name, (sub, _) in reference.subcommands(cli.parser()).items():
        assert f"### {name}\n" in page
        assert f"python -m client {name} " in page
        for action in sub._actions:
            for flag in [] if isinstance(action, argparse._HelpAction) else action.option_strings:
                assert f"`{flag}" in page, f"{name} {flag}"
    assert "### agentrun worker\n" in page and "### python -m worker\n" in page


def test_the_docs_build_fills_the_command_line_page_from_the_parser():
    spec = importlib.util.spec_from_file_location("cli_reference_hook", ROOT / "docs" / "hooks" / "cli_reference.py")
    assert spec and spec.loader
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    text = (ROOT / "docs" / "cli.md").read_text()
    page = SimpleNamespace(file=SimpleNamespace(src_uri="cli.md"))
    built = hook.on_page_markdown(text, page=page)
    assert hook.MARK not in built and reference.markdown() in built
    with pytest.raises(ValueError, match="cli-reference"):
        hook.on_page_markdown(text.replace(hook.MARK, ""), page=page)


@pytest.mark.parametrize("page", ["README.md", "docs/python-api.md"])
def test_the_python_api_example_runs_as_written(page, address, tmp_path):
    """The README's "Use it from Python" and the Python API page's example, each run as a program in
    a project folder, against the session's server (its agents' `python` made this interpreter, as
    PATH may name another)."""
    [example] = [block.code for block in blocks(ROOT / page) if block.lang == "python"]
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("*-work"))
    config = tmp_path / "examples" / "agentrun.yaml"
    config.write_text(config.read_text().replace('"command:python ', f'"command:{sys.executable} '))
    (tmp_path / "example.py").write_text(example)
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT), "AGENTRUN_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "step.started scaffold" and "step.finished package" in lines
    assert lines[-2:] == ["run.ended ", "completed"]
