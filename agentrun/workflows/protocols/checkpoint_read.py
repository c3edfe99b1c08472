"""Reading an Agentfile goal's replies: its pre- and post-checkpoints, a supervisor's verdict, and
whether a CONVERGE round said it is done. Pure functions: a reply that cannot be read raises
ValueError saying why, in words the reminder to the agent repeats."""

from __future__ import annotations

import json
import re
from typing import Any

from agentrun.lang.rules import extract_json

PRE_FIELDS = ("interpretation", "scope_in", "scope_out", "approach", "predictions", "assumptions", "confidence")
POST_FIELDS = (
    "output",
    "tools_used",
    "commitment_met",
    "scope_changed",
    "concerns",
    "deviations",
    "unexpected_results",
)
# Only these two say something RECONCILE cannot do without; the rest default to empty.
POST_REQUIRED = ("output", "commitment_met")
COMMITMENT = ("yes", "no", "partial")
VERDICTS = ("CONTINUE", "REORIENT", "PAUSE")


def read_pre(reply: str) -> dict[str, Any]:
    """The pre-checkpoint: a JSON object with every field of PRE_FIELDS (null is allowed)."""
    data = _object(reply)
    missing = [name for name in PRE_FIELDS if name not in data]
    if missing:
        raise ValueError(f"the JSON object lacks the field(s) {', '.join(missing)}")
    return data


def read_post(reply: str, outputs: list[str]) -> dict[str, Any]:
    """The post-checkpoint, every field of POST_FIELDS filled in; with `outputs`, its `output`
    must be an object holding each of them."""
    data = _object(reply)
    missing = [name for name in POST_REQUIRED if name not in data]
    if missing:
        raise ValueError(f"the JSON object lacks the field(s) {', '.join(missing)}")
    commitment = _commitment(data["commitment_met"])
    if commitment is None:
        raise ValueError(f"commitment_met is {json.dumps(data['commitment_met'])}, not one of yes, no, partial")
    output = data["output"]
    if outputs:
        absent = [name for name in outputs if not isinstance(output, dict) or name not in output]
        if absent:
            raise ValueError(
                f"output must be a JSON object with the fields {', '.join(outputs)}; it lacks {', '.join(absent)}"
            )
    empty: dict[str, Any] = {name: [] for name in POST_FIELDS}
    return {**empty, "scope_changed": False, **data, "commitment_met": commitment}


def read_verdict(reply: str) -> dict[str, str] | None:
    """A supervisor's `{verdict, correction, reason}`, the verdict upper-cased; None if unreadable."""
    try:
        data = _object(reply)
    except ValueError:
        return None
    verdict = str(data.get("verdict", "")).strip().upper()
    if verdict not in VERDICTS:
        return None
    return {"verdict": verdict, "correction": _text(data.get("correction")), "reason": _text(data.get("reason"))}


def converged(reply: str, status: str) -> bool:
    """A CONVERGE round ends when its reply names the status as a whole word. Case counts: the
    word is a keyword, and "not converged yet" must not end the loop."""
    return re.search(rf"(?<![\w-]){re.escape(status)}(?![\w-])", reply) is not None


def output_value(post: dict[str, Any], outputs: list[str]) -> Any:
    """The goal's value: the output object with `outputs`, else the output as text."""
    output = post["output"]
    if outputs:
        return {name: output[name] for name in outputs}
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _object(reply: str) -> dict[str, Any]:
    data = extract_json(reply)
    if not isinstance(data, dict):
        raise ValueError("the reply's JSON is not an object")
    return data


def _commitment(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).strip().lower()
    return text if text in COMMITMENT else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
