"""The files an agent's tools never change wherever they are in a work directory, by name: those that
steer a run, which the next `start` reads (read-only: an agent may read them), and the secret ones,
which it may neither read nor list.

Names match case-insensitively and as globs (`.env*` is `.env`, `.env.local`, `.ENV`): a file system
that folds case, or a loader that tries variants, must not let a spelling through. A policy may add
names or paths to either list (`protected_files`, secret) and let agents write a steering file
(`writable_files`), never a secret one.
"""

from __future__ import annotations

import fnmatch
import posixpath

# Read by the next run of a spec in this folder: an Agentfile's agent.toml and policy.toml, the
# agents and MCP servers of agentrun.yaml (its own spelling and the usual other one).
STEERING_NAMES = ("agent.toml", "policy.toml", "agentrun.yaml", "agentrun.yml")
# Keys and passwords: never read, listed, written or edited.
SECRET_NAMES = ("credentials.toml", ".env*")


def normal(rel: str) -> str:
    """A path from the work directory as the lists compare it: `./a//b/../c` is `a/c`, lower case."""
    rel = posixpath.normpath(rel.strip()).lower()
    return "" if rel == "." else rel.removeprefix("./")


def listed(patterns: list[str] | tuple[str, ...], rel: str) -> bool:
    """Whether `rel` matches one of `patterns`: an entry with a `/` is a path (or glob) from the work
    directory, `$WORKSPACE/` allowed before it; one without is a file name anywhere."""
    path = normal(rel)
    if not path:
        return False
    name = path.rsplit("/", 1)[-1]
    for pattern in patterns:
        entry = normal(pattern.removeprefix("$WORKSPACE/"))
        if entry and fnmatch.fnmatchcase(path if "/" in entry else name, entry):
            return True
    return False


def one_of(paths: list[str] | tuple[str, ...], rel: str) -> bool:
    """Whether `rel` is one of `paths`, each a path from the work directory (no glob: a file of the
    run's own, whatever characters its name holds)."""
    path = normal(rel)
    return bool(path) and any(normal(p) == path for p in paths)


def secret_name(rel: str) -> bool:
    """A key or password file by its name: credentials.toml, .env and its variants."""
    return listed(SECRET_NAMES, rel)
