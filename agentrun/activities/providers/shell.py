"""The `shell` provider: run a command in the work directory and return its stdout.

provider: shell
method: run
params: {command: "make test"}          # run by sh
    or  {argv: ["pytest", "-q"]}        # run directly, no shell quoting
    optional: env (map, added to the environment activities.children allows), timeout_s (default 600)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrun.activities import children
from agentrun.activities.providers.base import BadParams, ProviderError, check_keys, get_timeout
from agentrun.activities.providers.process import describe_exit, run_process, tail

DEFAULT_TIMEOUT_S = 600.0
_ALLOWED = ("command", "argv", "env", "timeout_s")


class ShellProvider:
    """Async so that cancelling the activity kills the command's whole process group."""

    async def call(self, method: str, params: dict[str, Any], workdir: str) -> str:
        if method != "run":
            raise BadParams(f"shell: unknown method {method!r}; known methods: ['run']")
        check_keys("shell.run", params, _ALLOWED)
        argv = _argv(params)
        timeout_s = get_timeout("shell.run", params, DEFAULT_TIMEOUT_S)
        if not Path(workdir).is_dir():
            raise ProviderError(
                f"shell.run: work directory {workdir} does not exist",
                retryable=False,
                kind="CommandFailed",
            )
        try:
            done = await run_process(argv, cwd=workdir, timeout_s=timeout_s, env=_env(params))
        except FileNotFoundError as e:
            raise BadParams(f"shell.run: cannot start {argv[0]!r}: {e.strerror}") from e
        except PermissionError as e:
            raise BadParams(f"shell.run: cannot execute {argv[0]!r}: {e.strerror}") from e
        if done.timed_out:
            # A slow command may well finish next time; the workflow's retry policy decides.
            raise ProviderError(
                f"shell.run: {_show(params)} timed out after {timeout_s:g}s",
                retryable=True,
                kind="CommandTimeout",
            )
        if done.returncode != 0:
            # Commands are usually deterministic and may have side effects: don't re-run blindly.
            raise ProviderError(
                f"shell.run: {_show(params)} {describe_exit(done.returncode or 0)}"
                f"\n{tail(done.stderr) or tail(done.stdout)}".rstrip(),
                retryable=False,
                kind="CommandFailed",
            )
        return done.stdout


def _argv(params: dict[str, Any]) -> list[str]:
    command, argv = params.get("command"), params.get("argv")
    if (command is None) == (argv is None):
        raise BadParams("shell.run: give exactly one of `command` (a string) or `argv` (a list)")
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise BadParams(f"shell.run: `command` must be a non-empty string, got {command!r}")
        return ["sh", "-c", command]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise BadParams(f"shell.run: `argv` must be a non-empty list of strings, got {argv!r}")
    return list(argv)


def _env(params: dict[str, Any]) -> dict[str, str]:
    extra = params.get("env") or {}
    if not isinstance(extra, dict):
        raise BadParams(f"shell.run: `env` must be a map, got {extra!r}")
    bad = [k for k, v in extra.items() if isinstance(v, dict | list) or v is None]
    if bad:
        raise BadParams(f"shell.run: `env` values must be scalars; check {bad}")
    # Added to the allow-listed environment (PATH, HOME, ...), not to the worker's: its API keys stay there.
    return children.environment({str(k): _scalar(v) for k, v in extra.items()})


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _show(params: dict[str, Any]) -> str:
    shown = params.get("command") or " ".join(params.get("argv") or [])
    return repr(shown if len(shown) <= 80 else shown[:77] + "...")
