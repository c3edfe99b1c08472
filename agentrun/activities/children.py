"""How the worker starts the programs it runs for a spec (command agents, agentapi servers,
success checks, shell commands): with an allow-listed environment, and behind a parent of their own.

The environment. A child sees only what a program needs to run (PATH, HOME, locale, terminal, temp
dir, Python's search path), the engine's own AGENTRUN_* variables, what the spec or provider
passes on purpose (the shell provider's `env:`), and what the operator allows on the worker with
`AGENTRUN_PASS_ENV=NAME,OTHER,PREFIX_*`. Everything else — API keys above all — stays in the
worker, so `echo $OPENAI_API_KEY` in a check or a command agent prints nothing. A coding agent
behind agentapi (claude, codex, gemini, …) needs its own key: the agentapi server also gets the
variables of AGENT_CREDENTIALS. Whatever a child still prints of a secret is redacted before it
leaves the activity (activities.redact).

The parent. A child's parent is a small guard process, not the worker, so `kill -9 $PPID` (or
`os.kill(os.getppid(), 9)` in a check) ends the guard — the child is then reported killed — and
not the worker. This is no sandbox: a process of the worker's user that looks up the worker's pid
(in /proc, with pgrep) can still signal it; only running the worker as a separate user prevents that.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
import sys
from collections.abc import Mapping, Sequence

from agentrun.activities import keys

PASS_ENV = "AGENTRUN_PASS_ENV"

# What programs commonly need to run at all; none of it is a credential.
BASE_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TMPDIR",
    "SHELL",
    "TZ",
    "XDG_*",
    "PYTHONPATH",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "VIRTUAL_ENV",
    "AGENTRUN_*",
)

# A coding agent behind agentapi signs in to its model with these, and reaches it through the
# operator's proxy and certificates. Only the agentapi server gets them.
AGENT_CREDENTIALS = (
    "ANTHROPIC_*",
    "CLAUDE_*",
    "OPENAI_*",
    "CODEX_*",
    "GEMINI_*",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "OPENROUTER_API_KEY",
    "AMP_API_KEY",
    "CURSOR_API_KEY",
    "AIDER_*",
    "GOOSE_*",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
)


def environment(extra: Mapping[str, str] | None = None, *, also: Sequence[str] = ()) -> dict[str, str]:
    """The worker's variables a child may see (BASE_NAMES, `also`, $AGENTRUN_PASS_ENV), the running
    activity's $AGENTRUN_IDEMPOTENCY_KEY, then `extra`."""
    patterns = [*BASE_NAMES, *also, *_operator_names()]
    kept = {name: value for name, value in os.environ.items() if _matches(name, patterns)}
    return {**kept, **keys.as_env(), **(extra or {})}


def _operator_names() -> list[str]:
    return [name.strip() for name in os.environ.get(PASS_ENV, "").split(",") if name.strip()]


def _matches(name: str, patterns: Sequence[str]) -> bool:
    # Case matters: http_proxy and HTTP_PROXY are two variables, and so are two names a user allows.
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


# The guard: it starts the child, waits, and ends as the child did (same status, same signal). It
# ignores the signals that stop a group gently, so it outlives a child that takes its grace period
# to shut down (the worker waits for the guard); the child gets them with the default handling.
_GUARD = r"""
import os, signal, sys
GENTLE = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
for sig in GENTLE:
    signal.signal(sig, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    for sig in GENTLE:
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as e:
        os.write(2, f"cannot start {sys.argv[1]!r}: {e.strerror}\n".encode())
    os._exit(127)
status = os.waitpid(pid, 0)[1]
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
os._exit(os.waitstatus_to_exitcode(status))
"""


def guarded(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> list[str]:
    """argv run behind the guard process. A program that cannot be started raises here, as starting
    it directly would (FileNotFoundError, PermissionError), since the guard could only report it
    as an exit status."""
    _resolve(argv[0], env.get("PATH", os.defpath), cwd)
    # -I -S: the guard reads no user site, no PYTHON* variables and no files of the work directory.
    return [sys.executable, "-I", "-S", "-c", _GUARD, *argv]


def _resolve(program: str, path: str, cwd: str) -> None:
    if os.sep in program:
        target = program if os.path.isabs(program) else os.path.join(cwd, program)
        if not os.path.exists(target):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(target) or not os.access(target, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return
    if shutil.which(program, path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
