"""What every built-in tool shares: the call's context, the two ways a call ends without output,
and giving a structured result back."""

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


def as_json(value: Any) -> str:
    """A structured result (a list of matches, a command's outcome) as the model reads it."""
    return json.dumps(value, ensure_ascii=False, indent=1)
