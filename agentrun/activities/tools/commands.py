"""The paths a bash command names, checked on its text before it runs: where the policy's rules
(agentrun.policy, which decides first) let a command through, it still may not name a path outside
the work directory (`/etc/passwd`, `../..`) other than a few system ones (/dev/null, /tmp,
/usr/bin, /bin, ...), nor a protected file. The real system leaves this to a language model; here it
is a check on the text, an early and friendly refusal; what bounds a command that gets past it is
the operating system (tools.wall: its own root and network, Landlock) and the sandbox
(tools.sandbox: a made environment and resource limits).
"""

from __future__ import annotations

import os
import re

from agentrun.activities.tools.policy import is_protected
from agentrun.models.tools import ToolPolicy

# Absolute paths a command may name outside the work directory: devices every program uses,
# the temporary folder and the programs' own folders.
SYSTEM_PATHS = (
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd",
    "/tmp",
    "/usr/bin",
    "/usr/local/bin",
    "/bin",
)


def path_refusal(command: str, policy: ToolPolicy, workdir: str) -> str | None:
    """Why `command` may not name what it names, or None."""
    root = os.path.realpath(workdir)
    for word in re.split(r"[\s'\"=:;|&<>()`,$]+", command):
        if word.startswith("//"):  # the rest of a URL (https://host/...), not a path
            continue
        if word and is_protected(policy, word.rstrip("/")):
            return f"'{word}' is a protected file: no command reads or changes it"
        if word == ".." or word.startswith("../") or word.endswith("/..") or "/../" in word:
            return f"'{word}' leaves the work directory; commands work inside it"
        if not word.startswith("/"):
            continue
        normal = os.path.normpath(word)
        if normal == root or normal.startswith(root.rstrip("/") + "/"):
            if is_protected(policy, os.path.relpath(normal, root)):  # the spec by its absolute path
                return f"'{word}' is a protected file: no command reads or changes it"
            continue
        if any(normal == system or normal.startswith(system + "/") for system in SYSTEM_PATHS):
            continue
        return f"'{word}' is outside the work directory; commands work inside it"
    return None
