"""What every dialect's compiler shares: problems that point at file:line:column with a hint, and
durations as people write them. YAML dialects locate a problem by its path of keys."""

from __future__ import annotations

from typing import Any

from agentrun.lang.durations import parse_duration
from agentrun.lang.errors import Problem, did_you_mean
from agentrun.lang.yamlpos import position


class Builder:
    def __init__(self, file: str, data: Any):
        self.file, self.data = file, data
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def problem(self, path: tuple, message: str, hint: str = "", line: int | None = None) -> None:
        """A problem at the key or item `path` leads to in the loaded YAML; `line` when it is on a
        later line of that key's value (a template over several lines), at the start of that line."""
        at_line, col = position(self.data, path)
        if line and line != at_line:
            at_line, col = line, 1
        self.problems.append(Problem(self.file, at_line, col, message, hint))

    def unknown_keys(self, raw: dict, at: tuple, known: set[str], where: str = "", listed: str = "known keys") -> None:
        """A problem at each key of `raw` not in `known`: the nearest known key as the hint, else all
        of them."""
        for key in raw:
            if key not in known:
                hint = did_you_mean(str(key), known) or f"{listed}: " + ", ".join(sorted(known))
                self.problem((*at, key), f"unknown key '{key}'{where}", hint)

    def warn(self, path: tuple, message: str, hint: str = "") -> None:
        """Something a person should know that does not stop the run; the Plan carries it."""
        line, col = position(self.data, path)
        self.warn_at(line, col, message, hint)

    def warn_at(self, line: int, column: int, message: str, hint: str = "") -> None:
        self.warnings.append(Problem(self.file, line, column, message, hint, severity="warning"))

    def duration(self, value: float | str | None, path: tuple, hint: str) -> float | None:
        """Seconds in a duration (90, "90s", "30m", "1h30m"); a problem, and None, if it is not one."""
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.problem(path, str(exc), hint)
            return None
