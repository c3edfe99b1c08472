"""Every example runs offline as shipped, by the commands its header, the README and the docs pages
give, run as written from the checkout's root: a spec's start runs to COMPLETE with the recorded replies or the
local agent it names, and a question a run asks is answered with the command the run prints for it.
A model the run cannot reach is said before the run starts."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT, _cli_env, run_id

EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
# A header's command: `#   python …` (or `# Try: python …`), up to a comment set off by spaces.
HEADER = re.compile(r"^#\s+(?:Try:\s+)?(python .*?)(?:\s{2,}\(.*)?$", re.MULTILINE)
# A README or docs command: indented four spaces or after a `$ ` prompt, continued by a trailing backslash.
README_LINE = re.compile(r"^(?:    |\$ )(?:pip install [^&]*&& )?(python (?:[^\n]*\\\n)*[^\n]*)$", re.MULTILINE)
PLACEHOLDER = re.compile(r"\b(?:RUN_ID|RUN|SPEC|ID|VALUE|TEXT|[A-Z]+_[A-Z_]+)\b")
# How a run asks a person, and the command it prints for the answer.
ASKED = re.compile(r"answer with: (python -m client (?:approve|answer) \S+ --gate \S+)( VALUE)?")
ANSWER = "First stable release"
SPECS = [
    p
    for p in sorted(EXAMPLES.rglob("*"))
    if p.is_file()
    and (p.suffix in (".yaml", ".json") or p.name == "Agentfile")
    and not p.name.endswith(".replies.yaml")
    and p.name not in ("agentrun.yaml", "lead.json")
    and "fragments" not in p.parts
]


def header_commands() -> list[str]:
    found = []
    for path in sorted(EXAMPLES.rglob("*")):
        if path.is_file() and path.suffix != ".py" and path.suffix in (".yaml", "") and path.name != "critic.md":
            found += [m.group(1).strip() for m in HEADER.finditer(path.read_text())]
    return found


def readme_commands() -> list[str]:
    """The README's commands and the docs pages' that run an example (a tutorial's `--detach` step
    is left to the page's own sequence)."""
    found = []
    for page in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        found += [m.group(1).replace("\\\n", " ") for m in README_LINE.finditer(page.read_text())]
    return [" ".join(c.split()) for c in found if "examples/" in c and "--detach" not in c]


def commands() -> list[str]:
    """Each command once (the README repeats some headers), leaving out the forms with placeholders."""
    seen: dict[tuple[str, ...], str] = {}
    for command in header_commands() + readme_commands():
        if not PLACEHOLDER.search(command) and _ships_its_spec(command):
            seen.setdefault(tuple(shlex.split(command)), command)
    return list(seen.values())


def _ships_its_spec(command: str) -> bool:
    """Does the spec the command names ship in the checkout? The README's own `hello.yaml` is one a
    reader saves first (tests/test_readme.py runs it)."""
    specs = [a for a in shlex.split(command) if a.endswith((".yaml", ".json", "Agentfile")) and ":" not in a]
    return all((ROOT / a.split("=@", 1)[-1]).exists() for a in specs)


def _environ(address: str, tmp_path: Path) -> dict[str, str]:
    environ = _cli_env(address, tmp_path)
    # `python` in a command, and in a `command:python …` agent, is the interpreter the suite runs.
    environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ['PATH']}"
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        environ.pop(name, None)  # offline: no model of anyone's is reached
    return environ


def run_as_written(command: str, environ: dict[str, str], timeout_s: float = 120) -> tuple[int, str]:
    """Run a command line from the checkout's root; answer each question the run asks with the
    command it prints (a question gets ANSWER). Its exit code and everything it printed."""
    proc = subprocess.Popen(
        shlex.split(command), cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killer = threading.Timer(timeout_s, proc.kill)
    killer.start()
    printed = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            printed.append(line)
            asked = ASKED.search(line)
            if asked:
                answer = shlex.split(asked.group(1)) + ([ANSWER] if asked.group(2) else [])
                given = subprocess.run(answer, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60)
                assert given.returncode == 0, given.stderr
        return proc.wait(), "".join(printed)
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_every_example_spec_says_how_to_run_it_offline():
    started = [c for c in commands() if " start " in c or "mcp_driver.py" in c]
    for spec in SPECS:
        named = str(spec.relative_to(ROOT))
        assert any(f" {named} " in f"{c} " for c in started), f"no header command runs {named} offline"


@pytest.mark.usefixtures("worker_process")
@pytest.mark.parametrize("command", commands())
def test_a_command_of_an_examples_header_or_the_readme_runs_as_written(command, address, tmp_path):
    code, printed = run_as_written(command, _environ(address, tmp_path))
    assert code == 0, printed
    assert "Traceback" not in printed and "warning:" not in printed
    if " start " in command:
        assert "- Status: COMPLETE" in printed


def test_a_model_the_run_cannot_reach_is_said_before_it_starts(address, tmp_path):
    environ = _environ(address, tmp_path)
    start = [sys.executable, "-m", "client", "start", "examples/graphs/review_loop.yaml", "-p", "product=kettle"]
    # A queue no worker polls: this command's own worker would run the run, with this environment.
    start += ["--agent", "openai:gpt-4o-mini", "--task-queue", run_id("unreached")]
    without_key = subprocess.run(start, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60)
    assert (without_key.returncode, without_key.stdout) == (2, "")
    assert without_key.stderr.splitlines() == [
        "--agent openai:gpt-4o-mini: error: agents 'reviewer', 'writer' talk to openai:gpt-4o-mini, but "
        "OPENAI_API_KEY is not set",
        "  hint: set OPENAI_API_KEY, or OPENAI_BASE_URL to a compatible server of your own; or run it offline "
        "with --agent scripted:REPLIES.yaml (recorded replies) or --agent 'command:CMD'",
    ]
    environ["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # the discard port: nobody answers there
    unreachable = subprocess.run(start, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 2 and "run " not in unreachable.stdout
    assert "at http://127.0.0.1:9/v1, which does not answer" in unreachable.stderr
    assert "set OPENAI_BASE_URL to one that runs" in unreachable.stderr
