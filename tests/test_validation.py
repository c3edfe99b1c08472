"""Output validation: JSON in agent replies, the plain-English rules, and the validate_output
activity through the real SDK test environment."""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentrun.activities.validation import EMPTY_OUTPUT, validate_output
from agentrun.lang.rules import Rule, check_rule, extract_json, parse_rule
from agentrun.models.calls import ValidateCall, ValidateResult
from agentrun.worker.blobs import data_converter

PAIN_POINTS = [
    {"problem": "slow onboarding", "impact": "3 weeks lost", "solution": "templates"},
    {"problem": "manual reports", "impact": "10 h/week", "solution": "automation"},
    {"problem": "no audit trail", "impact": "compliance risk", "solution": "logging"},
]


def check(rule_text: str, value: Any) -> str | None:
    rule = parse_rule(rule_text)
    assert rule is not None, f"not recognised: {rule_text}"
    return check_rule(rule, value)


# ---------------------------------------------------------------- extract_json


def test_whole_text_is_json() -> None:
    assert extract_json('  {"a": [1, 2]}\n') == {"a": [1, 2]}
    assert extract_json("[1, 2]") == [1, 2]


def test_last_fenced_block_that_parses_wins() -> None:
    text = (
        'First draft:\n```json\n{"draft": true}\n```\n'
        'Final:\n```json\n{"final": true}\n```\n'
        "Broken retry:\n```json\n{final: }\n```\nDone."
    )
    assert extract_json(text) == {"final": True}


def test_bare_fence_counts_but_other_languages_do_not() -> None:
    text = '```python\nx = [1]\n```\nThe result:\n```\n{"ok": 1}\n```'
    assert extract_json(text) == {"ok": 1}


def test_code_fences_are_paired_in_order() -> None:
    # The text between a python block's closing fence and the json block is not a block.
    text = '```python\nprint(1)\n```\nprose [not json]\n```json\n{"b": 2}\n```'
    assert extract_json(text) == {"b": 2}


def test_prose_around_json() -> None:
    text = 'Here is what I found: {"score": 7, "notes": ["ok"]} Let me know [if] that helps.'
    assert extract_json(text) == {"score": 7, "notes": ["ok"]}


def test_first_span_that_parses_skips_bracketed_prose() -> None:
    assert extract_json('See [the docs] and [1, 2] then {"a": 1}') == [1, 2]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no structure at all", "no JSON object or array found"),
        ('{"a": 1,', "Expecting"),
        ("```json\n{a: 1}\n```", "no fenced block parses"),
        ("   \n", "empty"),
    ],
)
def test_invalid_json_says_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        extract_json(text)


# ---------------------------------------------------------------- parse_rule


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Output must include company_overview field",
            Rule("has", "", names=("company_overview",)),
        ),
        ("Must include overall_score field", Rule("has", "", names=("overall_score",))),
        ("must contain summary", Rule("has", "", names=("summary",))),
        ("Must include `summary` field.", Rule("has", "", names=("summary",))),
        ("Must include a 'summary' key", Rule("has", "", names=("summary",))),
        (
            "Output must include company overview field",
            Rule("has", "", names=("company_overview",)),
        ),
        (
            "Output must include key_challenges array",
            Rule("has", "", names=("key_challenges",), type="array"),
        ),
        ("Must include sources list", Rule("has", "", names=("sources",), type="array")),
        ("Must include passed boolean", Rule("has", "", names=("passed",), type="boolean")),
        ("MUST INCLUDE total NUMBER", Rule("has", "", names=("total",), type="number")),
        ("Must include title string", Rule("has", "", names=("title",), type="string")),
        ("Must include meta object", Rule("has", "", names=("meta",), type="object")),
        (
            "Must identify exactly 3 pain points",
            Rule("count", "", noun="pain points", low=3, high=3),
        ),
        ("must have exactly 2 items", Rule("count", "", noun="items", low=2, high=2)),
        ("Must return exactly three ideas", Rule("count", "", noun="ideas", low=3, high=3)),
        ("Must list at least 2 risks", Rule("count", "", noun="risks", low=2)),
        ("Output must contain at most 5 items", Rule("count", "", noun="items", high=5)),
        ("Must return between 3 and 5 ideas", Rule("count", "", noun="ideas", low=3, high=5)),
        (
            "Each pain point must have problem, impact, and solution fields",
            Rule("each", "", names=("problem", "impact", "solution"), noun="pain point"),
        ),
        ("Each item must include a and b", Rule("each", "", names=("a", "b"), noun="item")),
        ("Score must be between 0 and 100", Rule("range", "", field="Score", low=0, high=100)),
        (
            "The overall score must be between 1 and 10.",
            Rule("range", "", field="overall score", low=1, high=10),
        ),
        ("confidence must be at least 0.5", Rule("range", "", field="confidence", low=0.5)),
        (
            'status must be one of "approved", "rejected", or "pending"',
            Rule("one_of", "", field="status", choices=("approved", "rejected", "pending")),
        ),
        ("输出必须包含company_overview字段", Rule("has", "", names=("company_overview",))),
        (
            "输出必须包含key_challenges数组",
            Rule("has", "", names=("key_challenges",), type="array"),
        ),
        ("必须包含overall_score字段", Rule("has", "", names=("overall_score",))),
        ("必须包含passed布尔值", Rule("has", "", names=("passed",), type="boolean")),
        ("必须识别出恰好3个痛点", Rule("count", "", noun="痛点", low=3, high=3)),
        ("必须识别出恰好N个条目".replace("N", "5"), Rule("count", "", noun="条目", low=5, high=5)),
        (
            "每个痛点必须包含problem、impact和solution字段",
            Rule("each", "", names=("problem", "impact", "solution"), noun="痛点"),
        ),
        ("分数必须在0-100之间", Rule("range", "", field="分数", low=0, high=100)),
        (
            "status必须是approved、rejected之一",
            Rule("one_of", "", field="status", choices=("approved", "rejected")),
        ),
    ],
)
def test_rule_forms(text: str, expected: Rule) -> None:
    assert parse_rule(text) == Rule(**{**expected.__dict__, "text": text})


@pytest.mark.parametrize(
    "text",
    [
        "The output must be concise and friendly",
        "Must include a detailed explanation of the approach",
        "Must include a list",
        "Output must be valid JSON",
        "Must include at least 2 and at most 5 items",
        "Must have exactly 3 fields",
        "必须包含3个字段",
        "语气必须专业",
        "",
    ],
)
def test_rules_of_no_known_form(text: str) -> None:
    assert parse_rule(text) is None


def test_a_single_summary_field_is_not_a_count() -> None:
    assert parse_rule("Must include one summary field") == Rule(
        "has", "Must include one summary field", names=("summary",)
    )
    assert parse_rule("必须包含一个summary字段") == Rule("has", "必须包含一个summary字段", names=("summary",))


# ---------------------------------------------------------------- check_rule: the seed's rules


@pytest.mark.parametrize(
    "rule",
    ["Output must include company_overview field", "输出必须包含company_overview字段"],
)
def test_field_present(rule: str) -> None:
    assert check(rule, {"company_overview": "", "key_challenges": []}) is None
    assert check(rule, {"overview": "x"}) == f'rule "{rule}": missing company_overview (found overview)'
    assert check(rule, ["company_overview"]) == f'rule "{rule}": expected a JSON object, found an array'


def test_field_present_even_when_null() -> None:
    assert check("Must include overall_score field", {"overall_score": None}) is None


@pytest.mark.parametrize("rule", ["Output must include key_challenges array", "输出必须包含key_challenges数组"])
def test_array_field(rule: str) -> None:
    assert check(rule, {"key_challenges": ["hiring"]}) is None
    found = check(rule, {"key_challenges": "hiring"})
    assert found == f'rule "{rule}": key_challenges is a string, expected an array'


@pytest.mark.parametrize("rule", ["Must include passed boolean", "必须包含passed布尔值"])
def test_boolean_field(rule: str) -> None:
    assert check(rule, {"passed": False}) is None
    assert check(rule, {"passed": 1}) == f'rule "{rule}": passed is a number, expected a boolean'
    assert check(rule, {"passed": "true"}) is not None


def test_number_field_refuses_booleans() -> None:
    assert check("Must include total number", {"total": 2.5}) is None
    assert check("Must include total number", {"total": True}) is not None


def test_field_names_match_loosely_and_by_path() -> None:
    assert check("Must include company overview field", {"companyOverview": 1}) is None
    assert check("Must include Company_Overview field", {"company_overview": 1}) is None
    assert check("Must include meta.version field", {"meta": {"version": 2}}) is None
    assert check("Must include meta.version field", {"meta": {}}) is not None


@pytest.mark.parametrize("rule", ["Must identify exactly 3 pain points", "必须识别出恰好3个痛点"])
def test_exact_count(rule: str) -> None:
    assert check(rule, PAIN_POINTS) is None
    assert check(rule, {"findings": PAIN_POINTS, "total": 3}) is None  # the only list
    noun = "pain points" if rule.isascii() else "痛点"
    assert check(rule, PAIN_POINTS[:2]) == f'rule "{rule}": expected exactly 3 {noun}, found 2'


def test_count_finds_the_list_by_its_noun() -> None:
    assert check("Must identify exactly 3 pain points", {"pain_points": PAIN_POINTS, "x": []}) is None
    value = {"pain_points": PAIN_POINTS[:1], "sources": ["a", "b", "c"]}
    found = check("Must identify exactly 3 pain points", value)
    assert found == 'rule "Must identify exactly 3 pain points": expected exactly 3 pain points, found 1'


def test_count_cannot_guess_between_lists() -> None:
    found = check("must have exactly 2 items", {"a": [1], "b": [2, 3]})
    assert found is not None and "several arrays" in found and "a, b" in found


def test_count_named_field_must_be_a_list() -> None:
    found = check("Must identify exactly 3 pain points", {"pain_points": "three"})
    assert found is not None and "pain_points is a string, expected an array" in found


def test_count_bounds() -> None:
    assert check("Must list at least 2 risks", ["a", "b", "c"]) is None
    assert check("Must list at least 2 risks", ["a"]) == (
        'rule "Must list at least 2 risks": expected at least 2 risks, found 1'
    )
    assert check("Output must contain at most 2 items", [1, 2]) is None
    assert check("Output must contain at most 2 items", [1, 2, 3]) is not None
    assert check("Must return between 3 and 5 ideas", [1, 2, 3, 4, 5]) is None
    assert check("Must return between 3 and 5 ideas", [1, 2, 3, 4, 5, 6]) == (
        'rule "Must return between 3 and 5 ideas": expected between 3 and 5 ideas, found 6'
    )


@pytest.mark.parametrize(
    "rule",
    [
        "Each pain point must have problem, impact, and solution fields",
        "每个痛点必须包含problem、impact和solution字段",
    ],
)
def test_each_item_has_fields(rule: str) -> None:
    assert check(rule, PAIN_POINTS) is None
    assert check(rule, {"pain_points": PAIN_POINTS}) is None
    broken = [PAIN_POINTS[0], {"problem": "x", "impact": "y"}, "just text"]
    found = check(rule, broken)
    noun = "pain point" if rule.isascii() else "痛点"
    assert found == f'rule "{rule}": {noun} 2 lacks solution; {noun} 3 is a string, not an object'


def test_each_lists_at_most_three_problems() -> None:
    found = check("Each item must include a and b", [{}] * 5)
    assert found is not None and found.endswith("(and 2 more)")


def test_score_between() -> None:
    rule = "Score must be between 0 and 100"
    assert check(rule, {"score": 0}) is None
    assert check(rule, {"score": 100}) is None
    assert check(rule, 42) is None  # the output is the number itself
    assert check(rule, {"score": 100.5}) == (f'rule "{rule}": score is 100.5, expected between 0 and 100')
    assert check(rule, {"score": "high"}) == f'rule "{rule}": score is "high", expected a number'
    assert check(rule, {"grade": 3}) == f'rule "{rule}": no Score field (found grade)'


def test_score_names_the_key_it_read() -> None:
    # The prose says "Score"; the reviewer's output has overall_score and nothing else like it.
    rule = "Score must be between 0 and 100"
    assert check(rule, {"overall_score": 120, "passed": False}) == (
        f'rule "{rule}": overall_score is 120, expected between 0 and 100'
    )
    assert check(rule, {"overall_score": 1, "style_score": 2}) is not None  # ambiguous


def test_chinese_range() -> None:
    assert check("分数必须在0-100之间", {"分数": 80}) is None
    assert (
        check("分数必须在0-100之间", 101) == 'rule "分数必须在0-100之间": the output is 101, expected between 0 and 100'
    )


def test_lower_bound_on_a_value() -> None:
    assert check("confidence must be at least 0.5", {"confidence": 0.5}) is None
    assert check("confidence must be at least 0.5", {"confidence": 0.2}) is not None


def test_one_of() -> None:
    rule = "status must be one of approved, rejected, or pending"
    assert check(rule, {"status": "approved"}) is None
    assert check(rule, {"status": "Rejected"}) is None
    assert check(rule, {"status": "maybe"}) == (
        f'rule "{rule}": status is "maybe", expected one of approved, rejected, pending'
    )
    assert check("level must be one of 1, 2, 3", {"level": 2}) is None
    assert check("level must be one of 1, 2, 3", {"level": 4}) is not None
    assert check("status必须是approved、rejected之一", {"status": "pending"}) is not None


# ---------------------------------------------------------------- the activity


async def validate(text: str, **kw: Any) -> ValidateResult:
    return await ActivityEnvironment().run(validate_output, ValidateCall(task_id="t", text=text, **kw))


SEED_RULES = [
    "Must identify exactly 3 pain points",
    "Each pain point must have problem, impact, and solution fields",
]


async def test_seed_pain_points_pass() -> None:
    reply = f"Here they are:\n```json\n{json.dumps(PAIN_POINTS)}\n```"
    result = await validate(reply, format="json", rules=SEED_RULES)
    assert result == ValidateResult(ok=True, value=PAIN_POINTS)


async def test_seed_pain_points_fail_with_every_reason() -> None:
    reply = '[{"problem": "a", "impact": "b"}, {"problem": "c", "impact": "d", "solution": "e"}]'
    result = await validate(reply, format="json", rules=SEED_RULES)
    assert not result.ok
    assert result.errors == [
        f'rule "{SEED_RULES[0]}": expected exactly 3 pain points, found 2',
        f'rule "{SEED_RULES[1]}": pain point 1 lacks solution',
    ]


async def test_schema_errors_carry_their_json_path() -> None:
    schema = {
        "type": "object",
        "required": ["overall_score", "passed"],
        "properties": {
            "overall_score": {"type": "integer", "minimum": 1, "maximum": 10},
            "feedback": {"type": "array", "items": {"type": "string"}},
        },
    }
    reply = '{"overall_score": 12, "feedback": ["ok", 3]}'
    result = await validate(reply, format="json", json_schema=schema)
    assert not result.ok
    assert result.value == {"overall_score": 12, "feedback": ["ok", 3]}
    assert result.errors == [
        "$: 'passed' is a required property",
        "$.feedback[1]: 3 is not of type 'string'",
        "$.overall_score: 12 is greater than the maximum of 10",
    ]


async def test_schema_draft_follows_dollar_schema() -> None:
    # Draft 4 reads exclusiveMaximum as a boolean; 2020-12 would reject this schema as invalid.
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "number",
        "maximum": 10,
        "exclusiveMaximum": True,
    }
    assert (await validate("9", format="json", json_schema=schema)).ok
    assert (await validate("10", format="json", json_schema=schema)).errors == [
        "$: 10 is greater than or equal to the maximum of 10"
    ]


async def test_schema_passes_with_rules() -> None:
    schema = {"type": "object", "required": ["overall_score"]}
    rules = ["Must include overall_score field", "Must include passed boolean"]
    result = await validate('{"overall_score": 8, "passed": true}', json_schema=schema, rules=rules)
    assert result.ok and result.errors == []
    assert result.value == '{"overall_score": 8, "passed": true}'  # format text keeps the text


async def test_invalid_schema_is_not_the_agents_fault() -> None:
    with pytest.raises(ApplicationError) as raised:
        await validate("{}", format="json", json_schema={"type": "no-such-type"})
    assert raised.value.type == "BadSchema" and raised.value.non_retryable


@pytest.mark.parametrize("text", ["", "  \n\t "])
async def test_empty_output(text: str) -> None:
    result = await validate(text, format="json", rules=["Must include x field", "Be nice"])
    assert not result.ok
    assert result.errors == [EMPTY_OUTPUT]
    assert result.unchecked == ["Be nice"]


async def test_not_json() -> None:
    result = await validate("I could not find anything.", format="json")
    assert not result.ok and result.value is None
    assert result.errors == ["output is not JSON: no JSON object or array found in the reply"]


async def test_text_needs_no_json_until_a_rule_does() -> None:
    assert await validate("# Proposal\n\nAll good.", format="markdown") == ValidateResult(
        ok=True, value="# Proposal\n\nAll good."
    )
    result = await validate("# Proposal", format="markdown", rules=["Must include summary field"])
    assert result.errors == [
        ('rule "Must include summary field": the output is not JSON (no JSON object or array found in the reply)')
    ]


async def test_text_rules_apply_to_embedded_json() -> None:
    reply = 'Review done.\n```json\n{"overall_score": 8}\n```'
    result = await validate(reply, format="markdown", rules=["Must include passed boolean"])
    assert result.value == reply
    assert result.errors == ['rule "Must include passed boolean": missing passed (found overall_score)']


async def test_unchecked_rules_are_not_errors() -> None:
    rules = ["Must include overall_score field", "Feedback must be constructive", "语气必须专业"]
    result = await validate('{"overall_score": 8}', format="json", rules=rules)
    assert result.ok
    assert result.unchecked == ["Feedback must be constructive", "语气必须专业"]


async def test_result_survives_the_data_converter() -> None:
    result = await validate(json.dumps(PAIN_POINTS), format="json", rules=SEED_RULES)
    converter = data_converter().payload_converter
    (back,) = converter.from_payloads(converter.to_payloads([result]), [ValidateResult])
    assert back == result and back.value == PAIN_POINTS
