"""The validate_output activity: check an agent's reply against its format, schema and rules.

It is an activity, not workflow code, so the workflow stays free of jsonschema and every verdict
is recorded in the history where `inspect` can show it. Rules of no known form are returned in
`unchecked` for the caller to judge (with a model), never failed here.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.lang.rules import Rule, check_rule, extract_json, parse_rule
from agentrun.models.calls import VALIDATE_OUTPUT, ValidateCall, ValidateResult

EMPTY_OUTPUT = "the agent returned an empty output"
# A schema error quotes the offending value; a whole reply quoted back helps no one.
MAX_MESSAGE = 300


@activity.defn(name=VALIDATE_OUTPUT)
async def validate_output(call: ValidateCall) -> ValidateResult:
    parsed = [(text, parse_rule(text)) for text in call.rules]
    rules = [rule for _, rule in parsed if rule is not None]
    unchecked = [text for text, rule in parsed if rule is None]
    as_text = call.format != "json"
    if not call.text.strip():
        value = call.text if as_text else None
        return ValidateResult(ok=False, value=value, errors=[EMPTY_OUTPUT], unchecked=unchecked)
    try:
        data, reason = extract_json(call.text), ""
    except ValueError as e:
        data, reason = None, str(e)
    errors = _errors(call, rules, data, reason)
    value = call.text if as_text else data
    return ValidateResult(ok=not errors, value=value, errors=errors, unchecked=unchecked)


def _errors(call: ValidateCall, rules: list[Rule], data: Any, reason: str) -> list[str]:
    if reason and (call.format == "json" or call.json_schema is not None):
        return [f"output is not JSON: {reason}"]
    if reason:
        # Free text was asked for, so only the rules that need structure fail, each saying why.
        return [f'rule "{rule.text}": the output is not JSON ({reason})' for rule in rules]
    errors = _schema_errors(call.json_schema, data) if call.json_schema is not None else []
    for rule in rules:
        problem = check_rule(rule, data)
        if problem is not None:
            errors.append(problem)
    return errors


def _schema_errors(schema: dict[str, Any], data: Any) -> list[str]:
    # Loaded on the first schema check, not with the worker: 55 ms of every `start` before its first prompt.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        # The spec is wrong, not the agent: asking the agent again cannot help.
        raise ApplicationError(
            f"the output schema is invalid: {e.message}", type="BadSchema", non_retryable=True
        ) from e
    found = sorted(cls(schema).iter_errors(data), key=lambda error: error.json_path)
    return [_clip(f"{error.json_path}: {error.message}") for error in found]


def _clip(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."
