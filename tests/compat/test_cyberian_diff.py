"""cyberian side by side: each workflow in tests/compat/cyberian/ runs through the real cyberian
(`cyberian run`, installed from PyPI into a venv of its own) and through `python -m client start`,
each against its own fake agentapi server with the same scripted agent (cyberian_agent.py) in its
own work directory. Compared: the messages each sent the agent (number, order, text), the exit code
and the files left in the work directory.

Each side appends its own completion instruction to every prompt; those are taken off exactly
(THEIRS_MARKER, OURS_DONE, OURS_LOOP) before the texts are compared. The other differences kept on
purpose are listed in PINNED, case by case, and in the docs' "Coming from cyberian" (docs/languages/task-trees.md).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
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
    refresh: bool = False  # agent_lifecycle: refresh, each side starting its own servers
    servers: int = 1  # how many agentapi servers cyberian starts


def rules(*pairs: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rules in order, and a last one that answers anything else with DONE."""
    return [{"when": when, "replies": replies} for when, replies in pairs] + [{"when": "", "replies": [say(DONE)]}]


NOT_YET = say("Not yet. COMPLETION_STATUS: COMPLETE")
CASES = [
    Case("nesting", "nesting.yaml", rules(), 7, ["product=kite"]),
    Case("resume_from", "nesting.yaml", rules(), 3, ["product=kite"], flags=["--resume-from", "review"]),
    Case("resume_from_unknown", "nesting.yaml", rules(), 0, ["product=kite"], flags=["--resume-from", "nowhere"]),
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
        "criteria_error",
        "criteria_error.yaml",
        rules(("Write out.txt", [say("Tried. COMPLETION_STATUS: COMPLETE"), say(DONE, **{"out.txt": "ready"})])),
        2,
    ),
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
    Case(
        "refresh",
        "refresh.yaml",
        rules(("second", [NOT_YET, say("FINISHED. COMPLETION_STATUS: COMPLETE")])),
        4,
        refresh=True,
        servers=3,
    ),
]


@dataclass
class Side:
    code: int
    messages: list[str]
    files: dict[str, str]
    output: str  # stdout and stderr, to explain a failure
    servers: int = 1  # agentapi servers started


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
        # Our own pip installs into it, so the venv needs no ensurepip (Debian's python3-venv).
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
        pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet"]
        pip.append(f"cyberian=={VERSION}")
        done = subprocess.run(pip, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            if any(sign in done.stderr for sign in UNREACHABLE):
                pytest.skip(f"PyPI is unreachable, so cyberian {VERSION} cannot be installed: {done.stderr[-300:]}")
            raise AssertionError(done.stderr[-3000:])
        installed.write_text(VERSION)
    return venv / "bin" / "cyberian"


@dataclass
class Agent:
    """Where a side's agent is: a port, the work directory, and the environment its run gets."""

    port: int
    workdir: Path
    env: dict[str, str]


def scripted(case: Case, folder: Path) -> list[str]:
    (folder / "rules.json").write_text(json.dumps(case.rules))
    return [sys.executable, str(AGENT), str(folder / "rules.json"), str(folder / "state.json")]


def run_side(case: Case, folder: Path, run: Callable[[Agent], Ran]) -> Side:
    """One side's run against a fake agentapi of its own: one server for the whole run, or, for a
    workflow with agent_lifecycle: refresh, whatever servers the side starts itself (through an
    `agentapi` on its PATH that is the fake, running a `claude` that is the scripted agent)."""
    workdir = folder / "work"
    workdir.mkdir(parents=True)
    agent = scripted(case, folder)
    if not case.refresh:
        fake = FakeAgentAPI(agent, busy_s=0.05, cwd=str(workdir)).start()
        try:
            done = run(Agent(fake.port, workdir, {}))
        finally:
            fake.stop()
        return Side(done.code, list(fake.received), left_in(workdir), done.out + done.err)
    bin_, log = folder / "bin", folder / "agentapi.log"
    bin_.mkdir()
    shim(bin_ / "agentapi", f'export PYTHONPATH={ROOT}\nexec {sys.executable} -m tests.fakes.agentapi_server "$@"')
    shim(bin_ / "claude", "exec " + " ".join(agent))
    env = {
        "PATH": f"{bin_}:{os.environ['PATH']}",
        "FAKE_AGENTAPI_LOG": str(log),
        "AGENTRUN_PASS_ENV": "FAKE_AGENTAPI_*",
    }
    done = run(Agent(free_port(), workdir, env))
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    messages = [e["content"] for e in events if e["event"] == "message"]
    servers = sum(e["event"] == "start" for e in events)
    return Side(done.code, messages, left_in(workdir), done.out + done.err, servers)


def shim(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Ran:
    code: int
    out: str
    err: str


def theirs(cyberian: Path, case: Case, folder: Path) -> Side:
    def run(agent: Agent) -> Ran:
        argv = [str(cyberian), "run", str(WORKFLOWS / case.workflow), "--host", "127.0.0.1", "--port", str(agent.port)]
        argv += ["--workdir", str(agent.workdir), "--poll-interval", "0.05", "--timeout", "60"]
        argv += ["--agent-type", "claude"] if case.refresh else []
        argv += [arg for p in case.params for arg in ("-p", p)] + case.flags
        env = {**os.environ, **agent.env}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder, env=env)
        return Ran(done.returncode, done.stdout, done.stderr)

    return run_side(case, folder, run)


def ours(cli, case: Case, folder: Path) -> Side:
    def run(agent: Agent) -> Ran:
        uri = f"agentapi:http://127.0.0.1:{agent.port}"
        argv = ["start", str(WORKFLOWS / case.workflow), "--agent", uri, "--workdir", str(agent.workdir)]
        argv += [arg for p in case.params for arg in ("-p", p)] + case.flags + case.ours_flags
        done = cli(*argv, extra_env=agent.env)
        return Ran(done.code, done.out, done.err)

    return run_side(case, folder, run)


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
    if mine.servers != real.servers:
        found["servers"] = (mine.servers, real.servers)
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_same_workflow_does_the_same_here(cyberian, cli, tmp_path, case: Case):
    """SAME, or exactly the differences kept on purpose (PINNED, and the README says why)."""
    with ThreadPoolExecutor(2) as pool:
        real_ = pool.submit(theirs, cyberian, case, tmp_path / "theirs")
        mine_ = pool.submit(ours, cli, case, tmp_path / "ours")
        mine, real = mine_.result(), real_.result()
    assert (len(real.messages), real.servers) == (case.sent, case.servers), real.output[-2000:]
    if case.id == "provider_call":
        assert "No module named 'cyberian.providers'" in real.output
    assert differences(mine, real) == PINNED.get(case.id, {}), (
        f"ours:\n{mine.output[-2000:]}\ncyberian:\n{real.output[-2000:]}"
    )


WRITE = "Write out.txt." + INSTRUCTION
NO_OUT = "[Errno 2] No such file or directory: 'out.txt'"
CHECK = 'result = open("out.txt").read() == "ready"'
DATA = {"data/a.txt": "alpha\n", "data/b.txt": "beta\n"}
LOOKING = "Search once more.\n\nSay FOUND when you find it." + INSTRUCTION
DRAFT = "Write  notes on tides; no with the summary.\nStyle: {}. Audience: everyone." + INSTRUCTION
# The differences kept on purpose, case by case, as `what: (ours, cyberian's)`.
PINNED: dict[str, dict[str, Any]] = {
    # A param's `default:` is used here; cyberian ignores the key, so the value renders empty.
    "params_left_out": {"messages": ([DRAFT.format("plain")], [DRAFT.format("")])},
    # --resume-from a task the workflow does not have is bad usage here; cyberian skips everything.
    "resume_from_unknown": {"exit": (2, 0)},
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
    # `{{ error }}` is the exception and the line that raised it; cyberian gives the exception alone.
    "criteria_error": {
        "messages": (
            [WRITE, f"The check failed: FileNotFoundError: {NO_OUT}\n  at line 1: {CHECK}\n\n{WRITE}"],
            [WRITE, f"The check failed: Error executing success criteria: {NO_OUT}\n\n{WRITE}"],
        )
    },
    # A subtask's sync_targets are copied too; cyberian copies only the root's.
    "preconditions": {
        "files": ({**DATA, "checks/has_title.py": (WORKFLOWS / "checks/has_title.py").read_text()}, DATA)
    },
    # cyberian starts each refreshed server in the work directory with its output logged there;
    # here a server's output goes to a temporary file, and the work directory holds only the work.
    "refresh": {"files": ({}, {"agentapi_stderr.log": "", "agentapi_stdout.log": ""})},
    # cyberian 0.2.2 ships without its `cyberian.providers` module: any provider_call stops the run
    # with ModuleNotFoundError before it does anything.
    "provider_call": {
        "exit": (0, 1),
        "messages": (["Use fetched.txt." + INSTRUCTION], []),
        "files": ({"fetched.txt": "tides\n"}, {}),
    },
}
