"""A local agent for supervised Agentfile goals, offline: it puts version numbers in release order.

The `command:` driver's protocol: the prompt on stdin, the reply on stdout. It answers each phase
of a checkpoint goal, telling them apart by the prompt's own words:

- COMMIT: a pre-checkpoint saying it will order the version numbers the goal names.
- EXECUTE: it orders them. It compares them as text unless the goal or a supervisor's correction
  says "as numbers"; when text order is not numeric order (1.10.0 before 1.9.2) it says so as a
  concern. With a correction it also says, in its output, that it followed one.
- SUPERVISE: no flags, CONTINUE; otherwise REORIENT, with the agent's concerns as the correction
  (or the flags, when it raised no concern).

It decides from the prompt alone, so the same prompt always gets the same reply.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

VERSION = re.compile(r"\d+(?:\.\d+)+")
NUMERIC = "as numbers"  # the words that make it compare each part of a version as a number


def main() -> int:
    prompt = sys.stdin.read()
    if "You supervise the agent" in prompt:
        reply = json.dumps(supervise(prompt))
    elif "Phase COMMIT." in prompt:
        reply = json.dumps(commit(goal_text(prompt, "Phase COMMIT.")))
    elif "Phase EXECUTE." in prompt:
        reply = execute(prompt)
    else:
        print("I answer only the phases of a checkpoint goal (COMMIT, EXECUTE, SUPERVISE).", file=sys.stderr)
        return 1
    print(reply)
    return 0


def commit(goal: str) -> dict[str, Any]:
    versions = VERSION.findall(goal)
    return {
        "interpretation": "Put the version numbers " + ", ".join(versions) + " in release order.",
        "scope_in": ["the version numbers the goal names"],
        "scope_out": ["anything else"],
        "approach": "Sort the version numbers, oldest first.",
        "predictions": [f"{len(versions)} version numbers, oldest first"],
        "assumptions": ["the goal names every version to order"],
        "confidence": 0.9,
    }


def execute(prompt: str) -> str:
    goal = goal_text(prompt, "\n\nYour commitment")
    correction = section(prompt, "follow this now:\n")
    versions = VERSION.findall(goal)
    numeric = sorted(versions, key=lambda v: [int(part) for part in v.split(".")])
    concerns = []
    if NUMERIC in (goal + correction).lower():
        ordered, method = numeric, "compared each part as a number"
    else:
        ordered, method = sorted(versions), "compared as text"
        if ordered != numeric:
            first, second = _first_difference(ordered, numeric)
            concerns.append(
                f"I compared the versions as text, so {first} comes before {second}; "
                f"compared {NUMERIC}, part by part, {second} comes first."
            )
    if correction:
        method += ", following the supervisor's correction"
    fields = output_fields(prompt)
    value: Any = ", ".join(ordered)
    if fields:
        # The first named output is the order; any other says how it was reached.
        value = {name: (value if i == 0 else method) for i, name in enumerate(fields)}
    post = {
        "output": value,
        "tools_used": ["sort"],
        "commitment_met": "yes" if versions else "no",
        "scope_changed": False,
        "concerns": concerns if versions else ["the goal names no version numbers"],
        "deviations": [],
        "unexpected_results": [],
    }
    return f"Ordered {len(versions)} versions ({method}).\n```json\n{json.dumps(post)}\n```"


def supervise(prompt: str) -> dict[str, str]:
    flags = re.search(r"Flags raised when the two were compared: (.*)", prompt)
    raised = flags.group(1).strip() if flags else "none"
    if raised == "none":
        return {"verdict": "CONTINUE", "correction": "", "reason": "no flags"}
    post = _json_after(prompt, "After (post-checkpoint):")
    concerns = [str(c) for c in post.get("concerns") or []]
    correction = " ".join(concerns) if concerns else f"Go back to your commitment; the flags were {raised}"
    return {"verdict": "REORIENT", "correction": "Settle this first: " + correction.rstrip("."), "reason": raised}


def goal_text(prompt: str, end: str) -> str:
    """The goal's instructions: from its `Goal ID:` line to where the phase's own words begin."""
    found = re.search(r"^Goal [^\n]*:\n(.*?)" + re.escape(end), prompt, re.DOTALL | re.MULTILINE)
    return found.group(1) if found else ""


def section(prompt: str, start: str) -> str:
    """A paragraph of the prompt after `start`, up to the next blank line; "" if it has none."""
    at = prompt.find(start)
    return prompt[at + len(start) :].split("\n\n", 1)[0] if at >= 0 else ""


def output_fields(prompt: str) -> list[str]:
    found = re.search(r"OUTPUT is a JSON object with the fields ([^:\n]+):", prompt)
    return [name.strip() for name in found.group(1).split(",")] if found else []


def _first_difference(ordered: list[str], numeric: list[str]) -> tuple[str, str]:
    """Where text order and numeric order first part: the version each puts there."""
    i = next(i for i, (a, b) in enumerate(zip(ordered, numeric, strict=True)) if a != b)
    return ordered[i], numeric[i]


def _json_after(prompt: str, marker: str) -> dict[str, Any]:
    """The JSON object after `marker` (a paranoid run fences it; the object is still the first `{`)."""
    at = prompt.find("{", prompt.find(marker))
    if prompt.find(marker) < 0 or at < 0:
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(prompt, at)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


if __name__ == "__main__":
    sys.exit(main())
