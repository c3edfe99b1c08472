"""Errors a user can fix: one line each with file:line:column, a message and a hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from agentrun.errors import UserError


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    column: int
    message: str
    hint: str = ""
    # A warning is said and the run goes on (a key the real system ignores, a name that renders empty).
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        text = f"{where}: {self.severity}: {self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class SpecError(UserError):
    """One or more problems in a spec; nothing has run."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    def message(self) -> str:
        return str(self)  # each problem names its file:line already


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """The hint "did you mean 'x'?" for the known name closest to `name`, or "" if none is close."""
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"did you mean '{close[0]}'?" if close else ""
