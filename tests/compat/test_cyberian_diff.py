"""cyberian side by side: each workflow in tests/compat/cyberian/ runs through the real cyberian
(`cyberian run`, installed from PyPI into a venv of its own) and through `python -m client start`,
each against its own fake agentapi server with the same scripted agent (cyberian_agent.py) in its
own work directory. Compared: the messages each sent the agent (number, order, text), the exit code
and the files left in the work directory.

Each side appends its own completion instruction to every prompt; those are taken off exactly
(THEIRS_MARKER, OURS_DONE, OURS_LOOP) before the texts are compared. The other differences kept on
purpose are listed in PINNED, case by case, and in the README's "Coming from cyberian".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.agentapi_server import FakeAgentAPI

VERSION = "0.2.2"
HERE = Path(__file__).parent
WORKFLOWS = HERE / "cyberian"
AGENT = HERE / "cyberian_agent.py"

# What each side appends to every prompt, exactly.
THEIRS_MARKER = (
    "\n\nIMPORTANT: When you have completed this task, print the completion status as the final message in "
    "this format:\nCOMPLETION_STATUS: COMPLETE\nIf you encounter an error that prevents completion, print:\n"
    "COMPLETION_STATUS: ERROR"
)
OURS_DONE = (
    "\n\nWhen you have finished, end your reply with the line `COMPLETION_STATUS: COMPLETE` "
    "(or `COMPLETION_STATUS: ERROR` if you could not do the task)."
)
OURS_LOOP = (
    "\n\nEnd your reply with a line `COMPLETION_STATUS: <STATUS>` as asked above "
    "(or `COMPLETION_STATUS: ERROR` if you cannot go on)."
)
INSTRUCTION = "<completion instruction>"
REMINDER = (
    "You stopped without a completion status. Reply with the line `COMPLETION_STATUS: COMPLETE` "
    "if the task is done, or `COMPLETION_STATUS: ERROR` if it failed."
)
# What `{{ error }}` says when a check sets result = False: the real reason here.
OURS_FALSE, THEIRS_FALSE = "result was False", "Success criteria validation failed: result = False"

DONE = "Done. COMPLETION_STATUS: COMPLETE"


def say(text: str, **files: str) -> dict[str, Any]:
    return {"say": text, "write": {path.replace("__", "/"): body for path, body in files.items()}}


@dataclass
class Case:
    id: str
    workflow: str
    rules: list[dict[str, Any]]  # the scripted agent's rules (see cyberian_agent.py)
    sent: int  # how many messages cyberian sends: the case plays out as meant
    params: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # for both
    ours_flags: list[str] = field(default_factory=list)


def rules(*pairs: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rules in order, and a last one that answers anything else with DONE."""
    return [{"when": when, "replies": replies} for when, replies in pairs] + [{"when": "", "replies": [say(DONE)]}]


NOT_YET = say("Not yet. COMPLETION_STATUS: COMPLETE")
CASES = [
    Case("nesting", "nesting.yaml", rules(), 7, ["product=kite"]),
    Case("resume_from", "nesting.yaml", rules(), 3, ["product=kite"], flags=["--resume-from", "review"]),
    Case("params_given", "params.yaml", rules(), 1, ["topic=tides", "count=3", "style=bold", "audience=a", "extra=x"]),
    Case("params_left_out", "params.yaml", rules(), 1, ["topic=tides"]),
    Case("params_required_missing", "params.yaml", rules(), 0, ["count=3"]),
    Case(
        "loops",
        "loops.yaml",
        rules(
            ("Gather", [NOT_YET, NOT_YET, say("Nothing new: no_more_sources. COMPLETION_STATUS: COMPLETE")]),
            ("Tidy", [NOT_YET, say("ALL_TIDY\nCOMPLETION_STATUS: COMPLETE")]),
        ),
        5,
    ),
    Case(
        "loop_limit",
        "loop_limit.yaml",
        rules(("Search", [NOT_YET] * 4 + [say("FOUND. COMPLETION_STATUS: COMPLETE")])),
        6,
    ),
    Case(
        "criteria",
        "criteria.yaml",
        rules(
            ("Write out.txt", [say("Tried. COMPLETION_STATUS: COMPLETE"), say(DONE, **{"out.txt": "hello\n"})]),
            (
                "Collect one more",
                [
                    say("COLLECTED. COMPLETION_STATUS: COMPLETE", **{"items.txt": "a\n"}),
                    say("COLLECTED. COMPLETION_STATUS: COMPLETE", **{"items.txt": "a\nb\n"}),
                ],
            ),
        ),
        5,
    ),
    Case("criteria_fail", "criteria_fail.yaml", rules(("Write out.txt", [say(DONE, **{"out.txt": "not yet\n"})])), 2),
    Case(
        "criteria_script",
        "criteria_script.yaml",
        rules(("report.md", [say(DONE, **{"report.md": "no title\n"}), say(DONE, **{"report.md": "# Title\n"})])),
        2,
    ),
    Case("error_status", "error_status.yaml", rules(("broken", [say("I cannot. COMPLETION_STATUS: ERROR")])), 2),
    Case("no_status", "no_status.yaml", rules(("quietly", [say("Done quietly.")])), 2),
    Case(
        "no_status_lenient", "no_status.yaml", rules(("quietly", [say("Done quietly.")])), 2, ours_flags=["--lenient"]
    ),
    Case("preconditions", "preconditions.yaml", rules(), 1),
    Case("provider_call", "provider.yaml", rules(), 0, ["word=tides"]),
]


@dataclass
class Side:
    code: int
    messages: list[str]
    files: dict[str, str]
    output: str  # stdout and stderr, to explain a failure


def left_in(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentrun-tests" / "cyberian"


UNREACHABLE = ("No matching distribution found", "Could not find a version", "NewConnectionError", "Max retries")


@pytest.fixture(scope="session")
def cyberian() -> Path:
    """The real cyberian, installed once into a venv of its own (its pins are not ours) in a cache
    folder; later sessions reuse it."""
    venv = cache_folder() / f"venv-{VERSION}"
    installed = venv / "installed"
    if not installed.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"cyberian=={VERSION}"]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            if any(sign in done.stderr for sign in UNREACHABLE):
                pytest.skip(f"PyPI is unreachable, so cyberian {VERSION} cannot be installed: {done.stderr[-300:]}")
            raise AssertionError(done.stderr[-3000:])
        installed.write_text(VERSION)
    return venv / "bin" / "cyberian"


def fake_for(case: Case, folder: Path) -> tuple[FakeAgentAPI, Path]:
    workdir = folder / "work"
    workdir.mkdir(parents=True)
    (folder / "rules.json").write_text(json.dumps(case.rules))
    agent = [sys.executable, str(AGENT), str(folder / "rules.json"), str(folder / "state.json")]
    return FakeAgentAPI(agent, busy_s=0.05, cwd=str(workdir)).start(), workdir


def run_side(case: Case, folder: Path, argv_of) -> Side:
    fake, workdir = fake_for(case, folder)
    try:
        done = argv_of(fake, workdir)
        return Side(done.code, list(fake.received), left_in(workdir), done.out + done.err)
    finally:
        fake.stop()


@dataclass
class Ran:
    code: int
    out: str
    err: str


def theirs(cyberian: Path, case: Case, folder: Path) -> Side:
    def go(fake: FakeAgentAPI, workdir: Path) -> Ran:
        argv = [str(cyberian), "run", str(WORKFLOWS / case.workflow), "--host", "127.0.0.1", "--port", str(fake.port)]
        argv += ["--workdir", str(workdir), "--poll-interval", "0.05", "--timeout", "60"]
        argv += [arg for p in case.params for arg in ("-p", p)] + case.flags
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder)
        return Ran(done.returncode, done.stdout, done.stderr)

    return run_side(case, folder, go)


def ours(cli, case: Case, folder: Path) -> Side:
    def go(fake: FakeAgentAPI, workdir: Path) -> Ran:
        argv = ["start", str(WORKFLOWS / case.workflow), "--agent", f"agentapi:{fake.url}", "--workdir", str(workdir)]
        argv += [arg for p in case.params for arg in ("-p", p)] + case.flags + case.ours_flags
        done = cli(*argv)
        return Ran(done.code, done.out, done.err)

    return run_side(case, folder, go)


def without_instruction(message: str, endings: tuple[str, ...]) -> str:
    """The message with the completion instruction its side appends replaced by a placeholder."""
    for ending in endings:
        if message.endswith(ending):
            return message[: -len(ending)] + INSTRUCTION
    return message


def differences(mine: Side, real: Side) -> dict[str, Any]:
    """Each way the two runs differ, as `what: (ours, cyberian's)`."""
    found: dict[str, Any] = {}
    if mine.code != real.code:
        found["exit"] = (mine.code, real.code)
    ours_ = [without_instruction(m, (OURS_DONE, OURS_LOOP)).replace(OURS_FALSE, THEIRS_FALSE) for m in mine.messages]
    theirs_ = [without_instruction(m, (THEIRS_MARKER,)) for m in real.messages]
    if ours_ != theirs_:
        found["messages"] = (ours_, theirs_)
    if mine.files != real.files:
        found["files"] = (mine.files, real.files)
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_same_workflow_does_the_same_here(cyberian, cli, tmp_path, case: Case):
    """SAME, or exactly the differences kept on purpose (PINNED, and the README says why)."""
    with ThreadPoolExecutor(2) as pool:
        real_ = pool.submit(theirs, cyberian, case, tmp_path / "theirs")
        mine_ = pool.submit(ours, cli, case, tmp_path / "ours")
        mine, real = mine_.result(), real_.result()
    assert len(real.messages) == case.sent, real.output[-2000:]
    if case.id == "provider_call":
        assert "No module named 'cyberian.providers'" in real.output
    assert differences(mine, real) == PINNED.get(case.id, {}), (
        f"ours:\n{mine.output[-2000:]}\ncyberian:\n{real.output[-2000:]}"
    )


LOOKING = "Search once more.\n\nSay FOUND when you find it." + INSTRUCTION
DRAFT = "Write  notes on tides; no with the summary.\nStyle: {}. Audience: everyone." + INSTRUCTION
# The differences kept on purpose, case by case, as `what: (ours, cyberian's)`.
PINNED: dict[str, dict[str, Any]] = {
    # A param's `default:` is used here; cyberian ignores the key, so the value renders empty.
    "params_left_out": {"messages": ([DRAFT.format("plain")], [DRAFT.format("")])},
    # A missing required param is bad usage (exit 2) here, a failed run (exit 1) there.
    "params_required_missing": {"exit": (2, 1)},
    # A loop stops at its max_iterations here (with a warning); cyberian ignores the key.
    "loop_limit": {
        "messages": (
            [LOOKING] * 3 + ["Report what you found." + INSTRUCTION],
            [LOOKING] * 5 + ["Report what you found." + INSTRUCTION],
        )
    },
    # A reply without a completion status gets one reminder here, unless --lenient.
    "no_status": {
        "messages": (
            ["Do it quietly." + INSTRUCTION, REMINDER, "Do the next thing." + INSTRUCTION],
            ["Do it quietly." + INSTRUCTION, "Do the next thing." + INSTRUCTION],
        )
    },
    # cyberian 0.2.2 ships without its `cyberian.providers` module: any provider_call stops the run
    # with ModuleNotFoundError before it does anything.
    "provider_call": {
        "exit": (0, 1),
        "messages": (["Use fetched.txt." + INSTRUCTION], []),
        "files": ({"fetched.txt": "tides\n"}, {}),
    },
}
