"""The names of the built-in tools, and the other names a spec may give them.

Plain names without a dependency, so that a dialect and `validate` can check a grant before
anything runs: the Agentfile's real system names its tools `read`, `write`, ...; the pipeline
language names the same tools `Read`, `Write`, ...
"""

from __future__ import annotations

import difflib

# The Agentfile's real system's names, in the order a model is offered them.
BUILTIN_TOOLS = ("read", "write", "edit", "glob", "grep", "ls", "bash", "web_fetch", "web_search")

# The pipeline language's names (Claude Code's), each onto a built-in.
PIPELINE_NAMES = {
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "Bash": "bash",
    "Glob": "glob",
    "Grep": "grep",
    "LS": "ls",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
}


def builtin_name(name: str) -> str | None:
    """The built-in tool a spec's name stands for (`Read` or `read` → read), or None."""
    if name in BUILTIN_TOOLS:
        return name
    return PIPELINE_NAMES.get(name)


def nearest_tool_name(name: str, known: tuple[str, ...] | list[str] = ()) -> str | None:
    """The known tool name closest to an unknown one, for "did you mean ...?": the built-ins under
    both spellings, and any other names the caller knows (an MCP server's tools)."""
    candidates = [*BUILTIN_TOOLS, *PIPELINE_NAMES, *known]
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if close:
        return close[0]
    # A name in another case ("READ", "webfetch") is closest to its own spelling.
    folded = {c.lower().replace("_", ""): c for c in candidates}
    return folded.get(name.lower().replace("_", "").replace("-", ""))
