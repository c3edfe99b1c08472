"""A local agent for behaviour trees, offline: it carries out the ```sh blocks of a step.

It reads the step's prompt on stdin (the `command:` driver's protocol) and answers with the JSON a
tree step asks for. Each fenced `sh` block runs in the current folder with the values the prompt
shows as environment variables (`$VAR.coverage` as VAR_coverage, `$CONST.threshold` as
CONST_threshold). An evaluate step holds when every block exits 0. An instruct step succeeds when
every block exits 0, is still running when one exits 75, and fails otherwise; a line the commands
print as `$VAR.name = value` stores value (JSON if it parses) on the blackboard.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

BLOCK = re.compile(r"```(?:sh|bash|shell)\n(.*?)```", re.DOTALL)
SHOWN = re.compile(r"^- \$(VAR|LOCAL|CONST|GLOBAL)\.([\w.-]+) = (.*)$", re.MULTILINE)
WRITE = re.compile(r"^\$(?:VAR|LOCAL)\.([\w.-]+) = (.*)$", re.MULTILINE)
RUNNING = 75  # EX_TEMPFAIL: not finished yet, ask again later


def answer(prompt: str) -> dict[str, Any]:
    """The step's JSON answer, after running its blocks."""
    evaluate = '"result"' in prompt.rsplit("Reply with", 1)[-1]
    blocks = BLOCK.findall(prompt)
    if not blocks:
        note = "the step has no ```sh block for me to run"
        return {"result": False, "note": note} if evaluate else {"status": "failure", "note": note}
    code, output = run(blocks, environment(prompt))
    note = output.strip().splitlines()[-1][:200] if output.strip() else f"exit code {code}"
    if evaluate:
        return {"result": code == 0, "note": note}
    status = "success" if code == 0 else "running" if code == RUNNING else "failure"
    return {"status": status, "var": writes(output), "note": note}


def environment(prompt: str) -> dict[str, str]:
    """The shown values as variables: text as it is, anything else as its JSON."""
    env = dict(os.environ)
    for scope, path, shown in SHOWN.findall(prompt):
        name = ({"LOCAL": "VAR", "GLOBAL": "CONST"}.get(scope) or scope) + "_" + re.sub(r"\W", "_", path)
        try:
            value = json.loads(shown)
        except ValueError:
            value = None  # "(not set)"
        env[name] = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    return env


def run(blocks: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Each block in turn until one exits non-zero: that exit code (0 if none) and what they printed."""
    output = ""
    for block in blocks:
        proc = subprocess.run(["sh", "-e", "-c", block], capture_output=True, text=True, env=env)
        output += proc.stdout + proc.stderr
        if proc.returncode != 0:
            return proc.returncode, output
    return 0, output


def writes(output: str) -> dict[str, Any]:
    found = {}
    for path, text in WRITE.findall(output):
        try:
            found[path] = json.loads(text)
        except ValueError:
            found[path] = text.strip()
    return found


def main() -> int:
    print(json.dumps(answer(sys.stdin.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
