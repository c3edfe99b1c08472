"""The condition language: operators, literals, references, refusals, and agent output kept as data."""

from __future__ import annotations

import pytest

from agentrun.lang.expressions import (
    ExpressionError,
    compile_expression,
    condition,
    evaluate,
    references,
    resolve,
    template_references,
)

CONTEXT = {
    "inputs": {"company_name": "Acme", "threshold": 80, "regions": ["eu", "us"]},
    "item": {"name": "chunk-1", "size": 3},
    "steps": {
        "classify": {"output": {"category": "hot", "score": 85, "passed": True, "text_score": "85"}},
        "split": {"output": {"chunks": ["a", "b", "c"], "items": [{"id": 7}], "count": 3}},
        "review": {"output": {"feedback": {"notes": ["tighten intro"], "passed": False}}},
        "nested": {"output": {"rows": [{"tags": ["x", "y"], "meta": {"owner": "ana"}}], "empty": None}},
    },
}


def value(source: str):
    return evaluate(source, CONTEXT)


def refusal(source: str) -> str:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source)
    return str(info.value)


# ---- operators and literals -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("steps.classify.output.score == 85", True),
        ("steps.classify.output.score == 84", False),
        ("steps.classify.output.score != 84", True),
        ("steps.classify.output.score != 85", False),
        ("steps.classify.output.score < 86", True),
        ("steps.classify.output.score < 85", False),
        ("steps.classify.output.score <= 85", True),
        ("steps.classify.output.score <= 84", False),
        ("steps.classify.output.score > 84", True),
        ("steps.classify.output.score > 85", False),
        ("steps.classify.output.score >= 85", True),
        ("steps.classify.output.score >= 86", False),
        ("80 < steps.classify.output.score < 90", True),
        ("80 < steps.classify.output.score < 85", False),
        ("true and true", True),
        ("true and false", False),
        ("false or true", True),
        ("false or false", False),
        ("not false", True),
        ("not true", False),
        ("not (1 == 1 and 2 == 3)", True),
        ("not 1 == 1 and 2 == 3", False),
        ("(false or true) and false", False),
        ("false or true and false", False),
    ],
)
def test_each_operator(source, expected):
    assert value(source) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'single'", "single"),
        ('"double"', "double"),
        ("'it\\'s'", "it's"),
        ('"line\\nbreak"', "line\nbreak"),
        ("'café ☕'", "café ☕"),
        ("42", 42),
        ("-7", -7),
        ("2.5", 2.5),
        ("-0.5", -0.5),
        ("true", True),
        ("True", True),
        ("false", False),
        ("False", False),
        ("none", None),
        ("None", None),
        ("null", None),
        ("['a', 'b']", ["a", "b"]),
        ("[1, [2, null]]", [1, [2, None]]),
        ("[]", []),
        ("('a', 1)", ("a", 1)),
    ],
)
def test_literals(source, expected):
    result = value(source)
    assert result == expected
    assert type(result) is type(expected)


def test_null_compares_with_a_missing_value():
    assert value("steps.nested.output.empty == null") is True
    assert value("steps.nested.output.empty != None") is False


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("steps.classify.output.category in ['hot', 'warm']", True),
        ("steps.classify.output.category in ['cold']", False),
        ("steps.classify.output.category not in ['cold']", True),
        ("steps.classify.output.category not in ['hot']", False),
        ("'ho' in steps.classify.output.category", True),
        ("'x' in steps.classify.output.category", False),
        ("'eu' in inputs.regions", True),
        ("'asia' not in inputs.regions", True),
        ("'feedback' in steps.review.output", True),
    ],
)
def test_in_with_lists_strings_and_mappings(source, expected):
    assert value(source) is expected


# ---- the seed's examples ----------------------------------------------------------------------


def test_seed_condition_on_category():
    source = "{{steps.classify.output.category}} == 'hot'"
    assert condition(source, CONTEXT) == (True, None)
    cold = {"steps": {"classify": {"output": {"category": "cold"}}}}
    assert condition(source, cold) == (False, None)


def test_seed_condition_on_score():
    assert condition("{{steps.classify.output.score}} >= 80", CONTEXT) == (True, None)
    assert condition("{{ steps.classify.output.score }} < {{ inputs.threshold }}", CONTEXT) == (False, None)


def test_seed_over_gives_the_list_itself():
    chunks = resolve("{{steps.split.output.chunks}}", CONTEXT)
    assert chunks == ["a", "b", "c"]
    assert chunks is CONTEXT["steps"]["split"]["output"]["chunks"]


def test_seed_feedback_path_gives_the_mapping_itself():
    feedback = resolve("{{steps.review.output.feedback}}", CONTEXT)
    assert feedback == {"notes": ["tighten intro"], "passed": False}


def test_resolve_accepts_bare_references_and_whitespace_control():
    assert resolve("steps.split.output.chunks[1]", CONTEXT) == "b"
    assert resolve("{{- item.size -}}", CONTEXT) == 3


@pytest.mark.parametrize(
    "source",
    [
        "{{ steps.a.output }} {{ steps.b.output }}",
        "prefix {{ steps.split.output.chunks }}",
        "{{ x == 1 }}",
        "['a']",
        "'text'",
    ],
)
def test_resolve_refuses_anything_but_one_reference(source):
    with pytest.raises(ExpressionError, match="must be a single reference"):
        resolve(source, CONTEXT)


def test_resolve_refuses_undefined_references():
    with pytest.raises(ExpressionError, match=r"steps\.missing is undefined"):
        resolve("{{ steps.missing.output.chunks }}", CONTEXT)


# ---- references and nesting -------------------------------------------------------------------


def test_nested_mapping_and_list_access():
    assert value("steps.nested.output.rows[0].tags[-1]") == "y"
    assert value("steps.nested.output.rows[0]['meta'].owner") == "ana"
    assert value("steps.nested.output['rows'][0].meta['owner'] == 'ana'") is True
    assert value("steps.split.output.items.0.id") == 7


def test_dots_read_keys_even_when_they_are_method_names():
    # The agent's "items" and "count" fields, not dict.items or list.count.
    assert value("steps.split.output.items") == [{"id": 7}]
    assert value("steps.split.output.count == 3") is True


def test_references_inside_braces_and_bare_are_the_same_expression():
    braced = compile_expression("{{ steps.classify.output.category }} == 'hot'")
    assert braced == compile_expression("steps.classify.output.category == 'hot'")
    assert braced == "steps.classify.output.category == 'hot'"


def test_canonical_text_keeps_grouping_and_spells_null_as_none():
    assert compile_expression("{{ a or b }} == c") == "(a or b) == c"
    assert compile_expression("a == null or not b") == "(a == none) or (not b)"
    assert compile_expression("x.0 in [1,2,]") == "x[0] in [1, 2]"


def test_references_lists_paths_with_constant_keys():
    source = "{{steps.classify.output.category}} == 'hot' and item.tags[0] in inputs['allowed'] or item.size > -1"
    assert references(source) == [
        ("steps", "classify", "output", "category"),
        ("item", "tags", 0),
        ("inputs", "allowed"),
        ("item", "size"),
    ]


def test_references_are_listed_once_and_exclude_literals():
    assert references("a.b == 1 or a.b == 2 or c == null or d == true") == [("a", "b"), ("c",), ("d",)]
    assert references("'steps.x' == 'y'") == []


# ---- failures: undefined, ambiguous, type errors ------------------------------------------------


def test_undefined_reference_is_an_error_naming_the_missing_part():
    with pytest.raises(ExpressionError) as info:
        evaluate("{{steps.classify.output.sentiment}} == 'happy'", CONTEXT)
    assert str(info.value) == (
        "could not evaluate '{{steps.classify.output.sentiment}} == 'happy'': "
        "steps.classify.output.sentiment is undefined"
    )


def test_undefined_bare_name_is_an_error_even_on_its_own():
    with pytest.raises(ExpressionError, match="could not evaluate 'nothing': nothing is undefined"):
        evaluate("nothing", {})


def test_undefined_reference_takes_the_false_branch_with_a_warning():
    result, warning = condition("{{steps.skipped.output.category}} == 'hot'", CONTEXT)
    assert result is False
    assert warning == (
        "condition '{{steps.skipped.output.category}} == 'hot'' could not be evaluated "
        "(steps.skipped is undefined); taking the false branch"
    )


def test_undefined_reference_fails_even_where_the_answer_might_not_need_it():
    # `x != 'a'` would be true for any value; a missing value is still a mistake worth a warning.
    result, warning = condition("steps.skipped.output != 'a'", CONTEXT)
    assert result is False and "could not be evaluated" in str(warning)


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("{{steps.classify.output.category}}", "'hot'"),
        ("steps.classify.output.score", "85"),
        ("steps.split.output.chunks", "['a', 'b', 'c']"),
        ("null", "None"),
    ],
)
def test_non_boolean_result_is_ambiguous(source, shown):
    assert condition(source, CONTEXT) == (
        False,
        f"condition '{source}' is ambiguous (it gave {shown}, not true or false); taking the false branch",
    )


def test_a_boolean_field_is_a_clean_condition():
    assert condition("{{ steps.classify.output.passed }}", CONTEXT) == (True, None)
    assert condition("steps.review.output.feedback.passed", CONTEXT) == (False, None)


def test_long_ambiguous_values_are_shortened_in_the_warning():
    _, warning = condition("text", {"text": "x" * 500})
    assert warning is not None and len(warning) < 200 and "..." in warning


def test_type_error_is_an_error_not_a_guess():
    with pytest.raises(ExpressionError, match="could not evaluate .*'>=' not supported"):
        evaluate("{{steps.classify.output.text_score}} >= 80", CONTEXT)
    result, warning = condition("'85' >= 80", CONTEXT)
    assert result is False
    assert "could not be evaluated ('>=' not supported between instances of 'str' and 'int')" in str(warning)


def test_in_with_mismatched_types_is_an_error():
    with pytest.raises(ExpressionError, match="could not evaluate"):
        evaluate("1 in steps.classify.output.category", CONTEXT)


def test_syntax_errors_take_the_false_branch_with_a_warning():
    result, warning = condition("{{ steps.classify.output.score }} >=", CONTEXT)
    assert result is False
    expected = "condition '{{ steps.classify.output.score }} >=' could not be evaluated (syntax error"
    assert warning.startswith(expected)


# ---- refused constructs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("steps.x.output.category.upper() == 'HOT'", "function calls are not allowed in conditions: upper()"),
        ("range(3) == [0, 1, 2]", "function calls are not allowed in conditions: range()"),
        ("steps.x.output.category | upper == 'HOT'", "filters are not allowed in conditions: |upper"),
        ("steps.x.output is defined", "tests are not allowed in conditions: is defined"),
        ("steps.x.output ~ 'a' == 'ba'", "string concatenation is not allowed in conditions: ~"),
        ("steps.x.output.score + 1 > 80", "arithmetic is not allowed in conditions: +"),
        ("steps.x.output.score * 2 > 80", "arithmetic is not allowed in conditions: *"),
        ("-steps.x.output.score < 0", "arithmetic is not allowed in conditions: -"),
        ("'a' if x else 'b'", "conditional expressions are not allowed in conditions"),
        ("{'a': 1} == x", "a dict literal {…} is not allowed in conditions"),
        ("x.__class__ == 1", "dunder names are not allowed in conditions: __class__"),
        ("x['__globals__'] == 1", "dunder names are not allowed in conditions: __globals__"),
        ("__builtins__ == 1", "dunder names are not allowed in conditions: __builtins__"),
        ("x[y] == 1", "subscripts must be constant, like [0] or ['key'], not y"),
        ("x[1:2] == []", "subscripts must be constant, like [0] or ['key'], not a slice"),
        ("x[1.5] == 1", "subscripts must be constant"),
        ("(a or b).c == 1", "'.' and '[…]' apply only to references"),
        ("'abc'[0] == 'a'", "'.' and '[…]' apply only to references"),
        ("{{ steps.x.output | length }} > 2", "filters are not allowed in conditions: |length"),
    ],
)
def test_disallowed_constructs_are_refused_by_name(source, message):
    assert message in refusal(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "the expression is empty"),
        ("{{ }} == 1", "empty '{{ }}'"),
        ("{{ steps.x.output == 1", "is not closed with '}}'"),
        ("{{ {{ x }} }}", "'{{' inside '{{ … }}'"),
        ("x == ", "syntax error in 'x ==': unexpected 'end of expression'"),
        ("x == 1 y", "unexpected 'y' after a complete expression"),
        ("{{ a }} {{ b }}", "unexpected 'b' after a complete expression"),
        ("'{{ steps.x.output.category }}' == 'hot'", "'{{ … }}' inside quotes is not a reference"),
    ],
)
def test_syntax_errors_say_what_is_wrong(source, message):
    assert message in refusal(source)


def test_sandbox_still_hides_private_attributes_of_objects():
    class Thing:
        _secret = "s"

    with pytest.raises(ExpressionError, match="could not evaluate"):
        evaluate("thing._secret == 's'", {"thing": Thing()})


# ---- agent output is data ---------------------------------------------------------------------


def agent_said(text: str) -> dict:
    return {"steps": {"classify": {"output": {"category": text}}}, "inputs": {"same": text}}


def test_template_syntax_in_agent_output_is_not_rendered():
    context = agent_said("{{ 7*7 }}")
    assert evaluate("{{ steps.classify.output.category }} == '49'", context) is False
    assert evaluate("{{ steps.classify.output.category }} == inputs.same", context) is True
    assert resolve("{{ steps.classify.output.category }}", context) == "{{ 7*7 }}"


@pytest.mark.parametrize("reply", ["x' or true or 'x", "== 'x' or true", "hot' == 'hot", "') or ('1' == '1"])
def test_expression_syntax_in_agent_output_is_compared_as_data(reply):
    assert condition("{{steps.classify.output.category}} == 'hot'", agent_said(reply)) == (False, None)
    listed = "steps.classify.output.category in ['x', 'hot', true]"
    assert condition(listed, agent_said(reply)) == (False, None)
    assert evaluate("{{steps.classify.output.category}}", agent_said(reply)) == reply


def test_agent_output_containing_a_reference_is_not_followed():
    context = {**agent_said("{{ inputs.secret }}"), "inputs": {"secret": "hot"}}
    assert condition("{{steps.classify.output.category}} == 'hot'", context) == (False, None)


# ---- references in whole templates ------------------------------------------------------------


PROMPT = """\
Research {{inputs.company_name}} for {{ inputs.goal }}.
{% for chunk in steps.split.output.chunks %}
- {{ chunk.title }} ({{ loop.index }} of {{ steps.split.output.count }})
{% endfor %}
{% set summary = steps.research.output | tojson %}{{ summary }}
Previous: {{ steps.research.output.text.upper() }} {{ range(3) | list }}
Pick {{ steps[inputs.which].output.rows[0] }}
"""


def test_template_references_with_lines():
    assert template_references(PROMPT) == [
        (("inputs", "company_name"), 1),
        (("inputs", "goal"), 1),
        (("steps", "split", "output", "chunks"), 2),
        (("steps", "split", "output", "count"), 3),
        (("steps", "research", "output"), 5),
        (("steps", "research", "output", "text"), 6),
        (("inputs", "which"), 7),
        (("steps",), 7),
    ]


def test_template_references_skip_names_the_template_binds():
    found = [path for path, _ in template_references(PROMPT)]
    assert not any(path[0] in ("chunk", "loop", "summary", "range") for path in found)


def test_a_bound_name_used_outside_its_loop_is_a_reference():
    text = "{% for x in xs %}{{ x.a }}{% endfor %}\n{{ x.b }}"
    assert template_references(text) == [(("xs",), 1), (("x", "b"), 2)]


def test_macro_parameters_and_with_targets_are_bound():
    text = (
        "{% macro card(who) %}{{ who.name }} {{ caller() }}{% endmacro %}\n"
        "{% with lead = steps.find.output.lead %}{{ card(lead) }}{{ lead.email }}{% endwith %}\n"
        "{% call card(inputs.owner) %}{{ inputs.note }}{% endcall %}"
    )
    assert template_references(text) == [
        (("steps", "find", "output", "lead"), 2),
        (("inputs", "owner"), 3),
        (("inputs", "note"), 3),
    ]


def test_a_set_inside_if_is_visible_afterwards():
    text = "{% if inputs.flag %}{% set tone = 'warm' %}{% endif %}\n{{ tone }}"
    assert template_references(text) == [(("inputs", "flag"), 1)]


def test_plain_text_has_no_references():
    assert template_references("No placeholders here.\n") == []


def test_template_syntax_error_names_the_line():
    with pytest.raises(ExpressionError) as info:
        template_references("line one\nline two\n{{ steps.x.output }\n")
    assert info.value.line == 3
    assert str(info.value).startswith("template syntax error on line 3:")
