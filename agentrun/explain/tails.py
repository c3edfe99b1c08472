"""Under `watch`'s lines, the reply so far of each running step (client.partial): its last few lines
kept in place on a terminal, each new line of it appended otherwise; and a warning, once, when an
agent has written nothing for a while (the step goes on: only its timeout fails it)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from agentrun.models.calls import Partial

TAIL_LINES = 3
STALL_S = 120.0


class Tails:
    def __init__(self, stall_s: float = STALL_S) -> None:
        self.stall_s = stall_s
        self.records: dict[str, Partial] = {}
        self.seen: dict[str, int] = {}  # characters of each reply already appended (not on a terminal)
        self.unfinished: dict[str, str] = {}  # its last line, not appended until it ends
        self.stalled: dict[str, int] = {}  # steps warned about: the characters written by then

    def update(self, so_far: dict[str, Partial], running: set[str], terminal: bool) -> tuple[list[str], list[str]]:
        """Take the latest records of the running steps; what to print above the live display:
        stall warnings, and (not on a terminal) each line the replies gained."""
        self.records = {task: record for task, record in so_far.items() if task in running}
        warnings = [line for task, record in self.records.items() for line in self._stall(task, record)]
        if terminal:
            return warnings, []
        lines = [line for task, record in self.records.items() for line in self._appended(task, record)]
        for task in set(self.seen) - set(self.records):  # its call ended: what it still had goes out
            rest = self.unfinished.pop(task, "")
            lines += [f"  │ {task}: {rest}"] if rest.strip() else []
            del self.seen[task]
        return warnings, lines

    def _stall(self, task: str, record: Partial) -> list[str]:
        # Once per silence: a step is warned about again only after its agent wrote something, which
        # its characters show even when no poll fell in the moment between its writing and falling quiet.
        if self.stalled.get(task, record.chars) != record.chars:
            del self.stalled[task]
        if record.quiet_s < self.stall_s or task in self.stalled:
            return []
        self.stalled[task] = record.chars
        what = "nothing" if not record.chars else "nothing more"
        return [f"  ! {task}: agent '{record.agent}' has written {what} for {record.quiet_s:.0f}s (still running)"]

    def _appended(self, task: str, record: Partial) -> list[str]:
        before = self.seen.get(task, 0)
        new = record.chars - before
        if new <= 0:
            return []
        self.seen[task] = record.chars
        text = self.unfinished.get(task, "") + (record.tail[-new:] if new <= len(record.tail) else "…" + record.tail)
        *done, self.unfinished[task] = text.split("\n")
        return [f"  │ {task}: {line}" for line in done]

    def __rich__(self) -> Group:
        """The live display's part: per running step a head line and the last lines of its reply."""
        parts: list[Text] = []
        for task, record in self.records.items():
            head = f"  {task} ({record.agent}) · {record.status} · {record.tokens} tokens · {record.elapsed_s:.0f}s"
            parts.append(Text(head, style="dim", no_wrap=True, overflow="ellipsis"))
            lines = [line for line in record.tail.splitlines() if line.strip()][-TAIL_LINES:]
            parts += [Text(f"    │ {line}", no_wrap=True, overflow="ellipsis") for line in lines]
        return Group(*parts)
