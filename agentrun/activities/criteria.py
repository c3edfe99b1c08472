"""The check_criteria activity: decide whether a task succeeded, by running the user's check.

The check never runs in the worker process: a crash, an infinite loop or a stray sys.exit in
user code must not take the worker down. It runs under sys.executable with cwd = workdir.

- inline `python` (already rendered by the caller) and `.py` scripts run inside a small runner
  that reads the variable `result` (a bool) and optional `error_message` afterwards;
- any other script is a program: exit status 0 passes, its stderr explains a failure.

What agents and people wrote (memory keys, step outputs, answers) reaches a check as data, in the
JSON file named by $AGENTRUN_VALUES; it is never part of the check's code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.activities import children
from agentrun.activities.providers.process import Finished, describe_exit, run_process, tail
from agentrun.activities.redact import redactor
from agentrun.models.calls import CHECK_CRITERIA, CheckResult, CriteriaCall

HEARTBEAT_EVERY_S = 1.0
VALUES_ENV = "AGENTRUN_VALUES"
INLINE_NAME = "<success_criteria>"

# Runs in the child: argv = code file, result file, display name, "inline" | "script".
# It reports through a file, not stdout, so whatever the user code prints cannot confuse it.
_RUNNER = r"""
import json, linecache, os, sys, traceback

def describe(exc, name):
    if isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception_only(exc)).strip()
    text = "".join(traceback.format_exception_only(exc)).strip()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == name]
    if frames:
        f = frames[-1]
        text += f"\n  at line {f.lineno}: {(f.line or '').strip()}"
    return text

def judge(ns):
    message = ns.get("error_message")
    message = str(message) if message not in (None, "") else ""
    if "result" not in ns:
        return "the check did not set `result` (it must set result = True or False)"
    result = ns["result"]
    if not isinstance(result, bool):
        return f"`result` must be a bool, got {type(result).__name__}: {result!r}"
    if not result:
        return message or "result was False"
    return ""

def run(code_path, name, mode):
    with open(code_path, encoding="utf-8") as f:
        source = f.read()
    # Inline code has no file; registering it lets tracebacks quote the failing line.
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    sys.argv = [name]
    if mode == "script":
        sys.path[0] = os.path.dirname(os.path.abspath(name))
    ns = {"__name__": "__main__", "__file__": name}
    try:
        exec(compile(source, name, "exec"), ns)
    except SystemExit as e:
        if e.code not in (None, 0):
            return f"the check called exit({e.code!r})"
    except BaseException as e:
        return describe(e, name)
    return judge(ns)

code_path, result_path, name, mode = sys.argv[1:5]
error = run(code_path, name, mode)
with open(result_path, "w", encoding="utf-8") as f:
    json.dump({"ok": not error, "error": error}, f)
"""


@activity.defn(name=CHECK_CRITERIA)
async def check_criteria(call: CriteriaCall) -> CheckResult:
    result = await _check(call)
    # What the check printed explains its failure; no secret it printed is kept in history.
    clean = redactor()
    return result.model_copy(update={"error": clean(result.error), "warnings": [clean(w) for w in result.warnings]})


async def _check(call: CriteriaCall) -> CheckResult:
    if (call.python is None) == (call.script is None):
        raise ApplicationError(
            "success_criteria needs exactly one of `python` or `script`",
            type="BadCriteria",
            non_retryable=True,
        )
    if not Path(call.workdir).is_dir():
        return CheckResult(ok=False, error=f"work directory {call.workdir} does not exist")
    if call.python is not None:
        return await _run_python(call, call.python, INLINE_NAME, "inline")
    script = Path(call.spec_dir) / call.script  # type: ignore[operator]
    if not script.is_file():
        return CheckResult(ok=False, error=f"success_criteria script not found: {script}")
    if script.suffix == ".py":
        return await _run_python(call, script.read_text(encoding="utf-8"), str(script), "script")
    return await _run_program(call, script)


async def _run_python(call: CriteriaCall, source: str, name: str, mode: str) -> CheckResult:
    with tempfile.TemporaryDirectory(prefix="agentrun-check-") as tmp:
        code_path, result_path = Path(tmp, "check.py"), Path(tmp, "result.json")
        code_path.write_text(source, encoding="utf-8")
        argv = [sys.executable, "-c", _RUNNER, str(code_path), str(result_path), name, mode]
        done = await _run(call, argv)
        if done.timed_out:
            return _timed_out(call)
        if not result_path.exists():
            # The runner itself died (os._exit, a signal, out of memory): say what we can.
            return CheckResult(
                ok=False,
                error=f"the check {describe_exit(done.returncode or 0)} without a result" + _output_tail(done),
            )
        reported = json.loads(result_path.read_text(encoding="utf-8"))
        return CheckResult(ok=bool(reported["ok"]), error=str(reported["error"]))


async def _run_program(call: CriteriaCall, script: Path) -> CheckResult:
    try:
        done = await _run(call, _program_argv(script))
    except OSError as e:
        return CheckResult(ok=False, error=f"cannot run {script}: {e}")
    if done.timed_out:
        return _timed_out(call)
    if done.returncode == 0:
        return CheckResult(ok=True)
    return CheckResult(
        ok=False,
        error=f"{script.name} {describe_exit(done.returncode or 0)}" + _output_tail(done),
    )


def _program_argv(script: Path) -> list[str]:
    """Executable scripts run directly; others by their #! line, else by sh.

    Files copied out of a spec folder often lose their executable bit, so don't insist on it.
    """
    path = str(script.resolve())
    if os.access(path, os.X_OK):
        return [path]
    with open(path, "rb") as f:
        first = f.readline().decode("utf-8", errors="replace").strip()
    if first.startswith("#!") and first[2:].split():
        return [*first[2:].split(), path]
    return ["sh", path]


async def _run(call: CriteriaCall, argv: list[str]) -> Finished:
    """Run the check with what agents and people wrote in a JSON file $AGENTRUN_VALUES names."""
    with tempfile.TemporaryDirectory(prefix="agentrun-values-") as tmp:
        values = Path(tmp, "values.json")
        values.write_text(json.dumps(call.values, ensure_ascii=False, default=str), encoding="utf-8")
        return await _run_with(call, argv, children.environment({VALUES_ENV: str(values)}))


async def _run_with(call: CriteriaCall, argv: list[str], env: dict[str, str]) -> Finished:
    return await run_process(
        argv,
        cwd=call.workdir,
        env=env,
        timeout_s=call.timeout_s,
        heartbeat=activity.heartbeat,
        heartbeat_every_s=HEARTBEAT_EVERY_S,
    )


def _timed_out(call: CriteriaCall) -> CheckResult:
    return CheckResult(ok=False, error=f"the check timed out after {call.timeout_s:g}s")


def _output_tail(done: Finished) -> str:
    text = tail(done.stderr) or tail(done.stdout)
    return f":\n{text}" if text else ""
