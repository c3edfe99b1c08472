"""The built-in tools, one module each (its arguments, its policy checks, its effect), by the name a
model calls them. models.builtin_tools declares each: its arguments, its schema, its settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentrun.activities.tools import bash, edit, glob, grep, ls, read, web_fetch, web_search, write
from agentrun.activities.tools.base import ToolContext

# Each takes its own arguments model (models.builtin_tools), parsed before it is called.
Tool = Callable[[ToolContext, Any], Awaitable[str]]

TOOLS: dict[str, Tool] = {
    "read": read.call,
    "write": write.call,
    "edit": edit.call,
    "glob": glob.call,
    "grep": grep.call,
    "ls": ls.call,
    "bash": bash.call,
    "web_fetch": web_fetch.call,
    "web_search": web_search.call,
}
