"""Behaviour trees for tests: builders for tree files, an agent brain that answers tree steps from a
script over the fake OpenAI-compatible server, and a driver that answers them over the run's updates
as an MCP client would."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Messages

ASKED = re.compile(r"Behaviour tree action (\S+), step (\d+)\.")


def action(name: str, *steps: str, retries: int | None = None, **extra: Any) -> dict[str, Any]:
    """An action whose steps are `evaluate: text` or `instruct: text` strings."""
    parsed = [dict([step.split(": ", 1)]) for step in steps]
    return {"type": "action", "name": name, "steps": parsed, **_retries(retries), **extra}


def composite(kind: str, name: str, *children: dict[str, Any], retries: int | None = None, **extra: Any) -> dict:
    return {"type": kind, "name": name, "children": list(children), **_retries(retries), **extra}


def _retries(retries: int | None) -> dict[str, Any]:
    return {} if retries is None else {"retries": retries}


def tree_file(
    folder: Path, root: dict[str, Any], var: dict | None = None, const: dict | None = None, **top: Any
) -> Path:
    """An abtree-layout tree file, as JSON."""
    document = {
        "name": "t",
        "version": "1.0.0",
        "state": {"local": var or {}, "global": const or {}},
        "tree": root,
        **top,
    }
    path = folder / "tree.json"
    path.write_text(json.dumps(document, indent=2))
    return path


# An answer: ("evaluate", action, True | False) or ("instruct", action, status[, {var writes}]).
Answer = tuple[Any, ...]


@dataclass
class Brain:
    """Answers each action's steps from the script, in order, as JSON replies; records what was asked."""

    script: list[Answer]
    asked: list[tuple[str, str]] = field(default_factory=list)  # (kind, action) in the order asked
    prompts: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, messages: Messages) -> str:
        prompt = messages[-1]["content"]
        found = ASKED.search(prompt)
        assert found, f"not a tree step: {prompt[:200]}"
        kind = "evaluate" if "Judge whether this precondition holds" in prompt else "instruct"
        with self.lock:
            self.asked.append((kind, found.group(1)))
            self.prompts.append(prompt)
            answer = self._next(kind, found.group(1))
        if kind == "evaluate":
            return f"```json\n{json.dumps({'result': answer[2], 'note': 'judged'})}\n```"
        writes = (*answer, {})[3]
        return "Done. " + json.dumps({"status": answer[2], "var": writes, "note": "did it"})

    def _next(self, kind: str, name: str) -> Answer:
        for i, answer in enumerate(self.script):
            if answer[0] == kind and answer[1] == name:
                return self.script.pop(i)
        raise AssertionError(f"the script has no more {kind} answers for {name}")


def by_action(asked: list[tuple[str, str]]) -> dict[str, list[str]]:
    """What each action was asked, in order: stable when parallel branches interleave."""
    out: dict[str, list[str]] = {}
    for kind, name in asked:
        out.setdefault(name, []).append(kind)
    return out
