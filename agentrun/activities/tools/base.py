"""What every built-in tool shares: the call's context, the two ways a call ends without output,
and reading the model's arguments."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentrun.activities.tools.confine import Workdir
from agentrun.models.tools import ToolPolicy


class Refused(Exception):
    """The policy or the confinement refused the call; nothing was done. The message is what the
    model reads: why, and what it may do instead."""


class ToolFailed(Exception):
    """The tool ran and failed (a missing file, a bad pattern, an HTTP error): the model reads why."""


@dataclass
class ToolContext:
    """One call's surroundings: the work directory every path resolves in, the run's policy."""

    name: str
    workdir: Workdir
    policy: ToolPolicy
    idempotency_key: str = ""

    @property
    def output_chars(self) -> int:
        return self.policy.limits.output_chars


def text_arg(args: dict[str, Any], key: str, *, required: bool = True, default: str = "") -> str:
    """A string argument, as the model must give it (the tool's JSON Schema says which)."""
    value = args.get(key)
    if value is None:
        if required:
            raise ToolFailed(f"missing argument '{key}'")
        return default
    if not isinstance(value, str):
        raise ToolFailed(f"argument '{key}' must be a string, not {type(value).__name__}")
    return value


def int_arg(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolFailed(f"argument '{key}' must be a number")
    try:
        return int(value)
    except ValueError:
        raise ToolFailed(f"argument '{key}' must be a number, not {value!r}") from None


def as_json(value: Any) -> str:
    """A structured result (a list of matches, a command's outcome) as the model reads it."""
    return json.dumps(value, ensure_ascii=False, indent=1)
