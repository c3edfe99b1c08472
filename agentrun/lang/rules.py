"""Plain-English output rules ("Must identify exactly 3 pain points") and JSON in agent replies.

Pure functions, shared by `validate` (which flags rules of no known form) and the
validate_output activity (which checks the rules it knows and leaves the rest to a model).
A rule is recognised only when its wording is unambiguous; anything else is "of no known form"
rather than guessed at, because a wrongly parsed rule would fail good output.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

# Stands for "not there" where None is a value (JSON null).
_MISSING: Any = object()

RuleKind = Literal["has", "count", "each", "range", "one_of"]


@dataclass(frozen=True)
class Rule:
    """One recognised rule. Bounds are inclusive; None leaves that side open."""

    kind: RuleKind
    text: str  # the rule as written, quoted in failure messages
    names: tuple[str, ...] = ()  # has, each: the required fields
    type: str = ""  # has: the JSON type the fields must have ("array", "boolean", …); "" = any
    noun: str = ""  # count, each: what the list holds, as written ("pain points", "痛点")
    field: str = ""  # range, one_of: the value's field as written ("Score", "overall_score")
    low: float | None = None  # count, range
    high: float | None = None  # count, range
    choices: tuple[str, ...] = ()  # one_of


# ---------------------------------------------------------------- JSON in replies

_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([^\s`]*)[^\n]*\n?", re.MULTILINE)


def extract_json(text: str) -> Any:
    """The JSON value in an agent reply: the whole text, else the last ```json (or bare ```)
    block that parses, else the first {...} or [...] span that parses."""
    body = text.strip().lstrip("\ufeff")
    if not body:
        raise ValueError("the reply is empty")
    try:
        return json.loads(body)
    except ValueError as e:
        whole = e
    blocks = [code for tag, code in _fenced_blocks(body) if tag in ("", "json")]
    block_error = ""  # the last block's, as the one the agent most likely meant
    for code in reversed(blocks):
        try:
            return json.loads(code)
        except ValueError as e:
            block_error = block_error or str(e)
    found = _first_span(body)
    if found is not _MISSING:
        return found
    if blocks:
        raise ValueError(f"no fenced block parses ({block_error})")
    if body[0] in "{[":
        raise ValueError(str(whole))
    raise ValueError("no JSON object or array found in the reply")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, code) of each ``` block, fences paired in order as Markdown does."""
    blocks: list[tuple[str, str]] = []
    opening: re.Match[str] | None = None
    for fence in _FENCE_LINE.finditer(text):
        if opening is None:
            opening = fence
        else:
            blocks.append((opening.group(1).lower(), text[opening.end() : fence.start()]))
            opening = None
    return blocks


def _first_span(text: str) -> Any:
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "{[":
            try:
                return decoder.raw_decode(text, start)[0]
            except ValueError:
                continue
    return _MISSING


# ---------------------------------------------------------------- parsing rules

# Quotes and backticks around names carry no meaning in a rule; they are dropped before matching.
_QUOTES = str.maketrans("", "", "\"'`“”‘’「」『』")
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_NUMBER = r"-?\d+(?:\.\d+)?"
_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5,
    "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
}  # fmt: skip
_COUNT = r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|[一两二三四五六七八九十]"
_TYPES = {
    "field": "", "key": "", "property": "", "fields": "", "keys": "", "properties": "",
    "array": "array", "list": "array", "arrays": "array", "lists": "array",
    "boolean": "boolean", "bool": "boolean", "booleans": "boolean",
    "number": "number", "numeric": "number", "numbers": "number",
    "integer": "integer", "int": "integer", "integers": "integer",
    "string": "string", "text": "string", "strings": "string",
    "object": "object", "dict": "object", "objects": "object",
    "字段": "", "键": "", "属性": "", "数组": "array", "列表": "array", "布尔值": "boolean",
    "布尔": "boolean", "数字": "number", "数值": "number", "整数": "integer",
    "字符串": "string", "对象": "object",
}  # fmt: skip
_TYPE_WORDS = "|".join(sorted((t for t in _TYPES if t.isascii()), key=len, reverse=True))
_ZH_TYPE_WORDS = "|".join(sorted((t for t in _TYPES if not t.isascii()), key=len, reverse=True))
_SUBJECT = r"(?:(?:the\s+)?(?:output|result|response|reply|answer|json)\s+)?"
_ARTICLE = r"(?:(?:an?|the)\s+)?"
_HAVE = r"(?:include|includes|contain|contains|have|has)"

_EN_COUNT = re.compile(
    rf"{_SUBJECT}must\s+(?:identify|include|contain|have|return|list|produce|give|provide|"
    rf"find|output|be\s+an?\s+(?:array|list)\s+of)\s+"
    rf"(?P<bound>exactly|at\s+least|at\s+most|no\s+more\s+than|no\s+fewer\s+than|"
    rf"no\s+less\s+than|between)?\s*(?P<n>{_COUNT})(?:\s*(?:and|to|-)\s*(?P<m>{_COUNT}))?"
    rf"\s+(?P<noun>(?!(?:and|or|to)\b)[A-Za-z_][\w\s\-]*)",
    re.IGNORECASE,
)
_ZH_COUNT = re.compile(
    r"(?:输出)?必须(?:识别出|识别|包含|返回|列出|给出|提供|找出|有)?"
    r"(?P<bound>恰好|正好|刚好|至少|最少|不少于|至多|最多|不超过)?\s*"
    rf"(?P<n>{_COUNT})\s*(?:个|条|项|点|种|份)?\s*(?P<noun>.+)",
)
_EN_EACH = re.compile(
    rf"(?:each|every)\s+(?P<noun>[A-Za-z_][\w\s\-]*?)\s+must\s+{_HAVE}\s+"
    rf"(?P<names>.+?)(?:\s+(?P<type>{_TYPE_WORDS}))?",
    re.IGNORECASE,
)
_ZH_EACH = re.compile(
    rf"(?:每个|每一个|每项|每一项|每条|每一条)(?P<noun>.+?)都?必须(?:包含|含有|有)\s*"
    rf"(?P<names>.+?)\s*(?P<type>{_ZH_TYPE_WORDS})?",
)
_EN_HAS = re.compile(
    rf"{_SUBJECT}must\s+{_HAVE}\s+(?P<names>.+?)(?:\s+(?P<type>{_TYPE_WORDS}))?",
    re.IGNORECASE,
)
_ZH_HAS = re.compile(
    rf"(?:输出)?必须(?:包含|含有|有)\s*(?P<names>.+?)\s*(?P<type>{_ZH_TYPE_WORDS})?",
)
_EN_RANGE = re.compile(
    rf"{_ARTICLE}(?P<field>[A-Za-z_][\w\s.\-]*?)\s+must\s+be\s+(?:between|from|in\s+the\s+range)\s+"
    rf"(?P<lo>{_NUMBER})\s*(?:and|to|-|–)\s*(?P<hi>{_NUMBER})(?:\s*\(?inclusive\)?)?",
    re.IGNORECASE,
)
_EN_BOUND = re.compile(
    rf"{_ARTICLE}(?P<field>[A-Za-z_][\w\s.\-]*?)\s+must\s+be\s+"
    rf"(?P<bound>at\s+least|at\s+most|no\s+more\s+than|no\s+less\s+than)\s+(?P<n>{_NUMBER})",
    re.IGNORECASE,
)
_ZH_RANGE = re.compile(
    rf"(?P<field>.+?)必须(?:在|介于|位于)\s*(?P<lo>{_NUMBER})\s*(?:-|–|~|到|至|和|与)\s*"
    rf"(?P<hi>{_NUMBER})\s*(?:之间|以内|范围内)?",
)
_EN_ONE_OF = re.compile(
    rf"{_ARTICLE}(?P<field>[A-Za-z_][\w\s.\-]*?)\s+must\s+be\s+one\s+of\s*:?\s*(?P<choices>.+)",
    re.IGNORECASE,
)
_ZH_ONE_OF = re.compile(r"(?P<field>.+?)必须(?:是|为)\s*(?P<choices>.+?)(?:之一|中的一个)")
_SEPARATORS = re.compile(r"\s*(?:,|，|、|;|\band\b|\bor\b|以及|和|及|与|或)\s*", re.IGNORECASE)
_LEADING_ARTICLE = re.compile(r"^(?:(?:an?|the|one)\s+|一个\s*)(?=\S)", re.IGNORECASE)
_QUANTITY_WORDS = {
    "exactly",
    "at",
    "least",
    "most",
    "no",
    "more",
    "fewer",
    "less",
    "than",
    "between",
}
_LOWER_BOUNDS = {"at least", "no fewer than", "no less than", "至少", "最少", "不少于"}
_UPPER_BOUNDS = {"at most", "no more than", "至多", "最多", "不超过"}


def parse_rule(rule: str) -> Rule | None:
    """The rule's meaning, or None when it is of no known form."""
    text = rule.strip()
    body = _clean(text)
    for parse in (_parse_count, _parse_each, _parse_range, _parse_one_of, _parse_has):
        found = parse(text, body)
        if found is not None:
            return found
    return None


def _clean(text: str) -> str:
    body = text.translate(_QUOTES).strip()
    body = re.sub(r"[\s.。!！]+$", "", body)
    return re.sub(r"\s+", " ", body)


def _parse_count(text: str, body: str) -> Rule | None:
    m = _EN_COUNT.fullmatch(body) or _ZH_COUNT.fullmatch(body)
    if m is None:
        return None
    bound = re.sub(r"\s+", " ", (m.group("bound") or "exactly").lower())
    n, noun = _count(m.group("n")), m.group("noun").strip()
    upto = m.groupdict().get("m")
    counted = _type_of(noun)
    # "Must have 3 fields" could mean the object's keys or a list's items: leave it to a model.
    # "Must include one summary field" names a field; it is not a count.
    if counted == "" or (counted and n == 1 and m.group("bound") is None):
        return None
    if upto is not None:
        if bound not in ("between", "exactly"):
            return None
        return Rule("count", text, noun=noun, low=n, high=_count(upto))
    if bound == "between":
        return None
    low = None if bound in _UPPER_BOUNDS else n
    high = None if bound in _LOWER_BOUNDS else n
    return Rule("count", text, noun=noun, low=low, high=high)


def _type_of(noun: str) -> str | None:
    """The JSON type a noun's last word names ("" for field, key, property), else None."""
    last = noun.split()[-1].lower()
    if last in _TYPES:
        return _TYPES[last]
    return next((_TYPES[t] for t in _TYPES if not t.isascii() and noun.endswith(t)), None)


def _count(word: str) -> float:
    return float(_WORDS.get(word.lower(), word))


def _parse_each(text: str, body: str) -> Rule | None:
    m = _EN_EACH.fullmatch(body) or _ZH_EACH.fullmatch(body)
    if m is None:
        return None
    names = _names(m.group("names"), loose=False)
    if names is None:
        return None
    return Rule("each", text, names=names, noun=m.group("noun").strip())


def _parse_has(text: str, body: str) -> Rule | None:
    m = _EN_HAS.fullmatch(body) or _ZH_HAS.fullmatch(body)
    if m is None:
        return None
    type_word = m.group("type")
    # A multi-word name is taken as a field name only when a type word says it is one.
    names = _names(m.group("names"), loose=type_word is not None)
    # "Must include a list" asks for a list, not for a field called "a".
    if names is None or names in (("a",), ("an",), ("the",)):
        return None
    return Rule("has", text, names=names, type=_TYPES[type_word.lower()] if type_word else "")


def _names(phrase: str, loose: bool) -> tuple[str, ...] | None:
    parts = [p.strip() for p in _SEPARATORS.split(phrase) if p and p.strip()]
    # An article belongs to the phrase ("a summary"), unless it is the whole name ("a and b").
    parts = [_LEADING_ARTICLE.sub("", p) for p in parts]
    if not parts:
        return None
    names = []
    for part in parts:
        if re.fullmatch(_NAME, part):
            names.append(part)
        elif loose and _is_phrase_name(part):
            names.append(_snake(part))
        else:
            return None
    return tuple(names)


def _is_phrase_name(part: str) -> bool:
    """Whether words like "company overview" can be a field's name: a few plain words, none of
    which says how many ("exactly 3 fields" counts fields, it names none)."""
    words = part.lower().split()
    plain = all(re.fullmatch(r"[a-z_][a-z_\-]*", w) for w in words) and len(words) <= 4
    return plain and not any(w in _QUANTITY_WORDS or w in _WORDS for w in words)


def _parse_range(text: str, body: str) -> Rule | None:
    m = _EN_RANGE.fullmatch(body) or _ZH_RANGE.fullmatch(body)
    if m is not None:
        low, high = float(m.group("lo")), float(m.group("hi"))
        return Rule("range", text, field=m.group("field").strip(), low=low, high=high)
    m = _EN_BOUND.fullmatch(body)
    if m is None:
        return None
    bound, n = re.sub(r"\s+", " ", m.group("bound").lower()), float(m.group("n"))
    low, high = (n, None) if bound in _LOWER_BOUNDS else (None, n)
    return Rule("range", text, field=m.group("field").strip(), low=low, high=high)


def _parse_one_of(text: str, body: str) -> Rule | None:
    m = _EN_ONE_OF.fullmatch(body) or _ZH_ONE_OF.fullmatch(body)
    if m is None:
        return None
    choices = tuple(c.strip() for c in _SEPARATORS.split(m.group("choices")) if c and c.strip())
    if not choices:
        return None
    return Rule("one_of", text, field=m.group("field").strip(), choices=choices)


# ---------------------------------------------------------------- checking rules


def check_rule(rule: Rule, value: Any) -> str | None:
    """None when `value` (the parsed output) keeps the rule, else why not, in one line."""
    problem = _CHECKS[rule.kind](rule, value)
    return None if problem is None else f'rule "{rule.text}": {problem}'


def _check_has(rule: Rule, value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"expected a JSON object, found {_type_name(value)}"
    missing = [name for name in rule.names if _lookup(value, name) is _MISSING]
    if missing:
        return f"missing {_fields(missing)} (found {_fields(list(value)) or 'no fields'})"
    for name in rule.names:
        found = _lookup(value, name)
        if rule.type and not _is_type(found, rule.type):
            return f"{name} is {_type_name(found)}, expected {_article(rule.type)}"
    return None


def _check_count(rule: Rule, value: Any) -> str | None:
    items = _find_list(value, rule.noun)
    if isinstance(items, str):
        return items
    if _within(len(items), rule.low, rule.high):
        return None
    return f"expected {_bounds(rule.low, rule.high)} {rule.noun}, found {len(items)}"


def _check_each(rule: Rule, value: Any) -> str | None:
    items = _find_list(value, rule.noun)
    if isinstance(items, str):
        return items
    problems = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            problems.append(f"{rule.noun} {number} is {_type_name(item)}, not an object")
            continue
        missing = [name for name in rule.names if _lookup(item, name) is _MISSING]
        if missing:
            problems.append(f"{rule.noun} {number} lacks {_fields(missing)}")
    if not problems:
        return None
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more


def _check_range(rule: Rule, value: Any) -> str | None:
    found, where = _value_of(value, rule.field)
    if found is _MISSING:
        return where
    if not _is_type(found, "number"):
        return f"{where} is {_describe(found)}, expected a number"
    if _within(found, rule.low, rule.high):
        return None
    return f"{where} is {_describe(found)}, expected {_bounds(rule.low, rule.high)}"


def _check_one_of(rule: Rule, value: Any) -> str | None:
    found, where = _value_of(value, rule.field)
    if found is _MISSING:
        return where
    if _as_choice(found) in {_as_choice(c) for c in rule.choices}:
        return None
    return f"{where} is {_describe(found)}, expected one of {', '.join(rule.choices)}"


_CHECKS = {
    "has": _check_has,
    "count": _check_count,
    "each": _check_each,
    "range": _check_range,
    "one_of": _check_one_of,
}


# ---------------------------------------------------------------- finding things in the output


def _lookup(obj: dict[str, Any], name: str, loose: bool = False) -> Any:
    """obj[name], matched case-insensitively and by snake_case; a dotted name walks down.

    `loose` also accepts the one key that ends in the name ("Score" → overall_score), because
    prose often names a quantity by its last word.
    """
    key = _key(obj, name, loose)
    if key is not None:
        return obj[key]
    if "." in name:
        head, _, rest = name.partition(".")
        inner = _lookup(obj, head)
        if isinstance(inner, dict):
            return _lookup(inner, rest, loose)
    return _MISSING


def _key(obj: dict[str, Any], name: str, loose: bool) -> str | None:
    if name in obj:
        return name
    wanted = _snake(name)
    keys = [k for k in obj if isinstance(k, str) and _snake(k) == wanted]
    if not keys and loose:
        keys = [k for k in obj if isinstance(k, str) and _snake(k).endswith("_" + wanted)]
    return keys[0] if len(keys) == 1 else None


def _find_list(value: Any, noun: str) -> list[Any] | str:
    """The list a count or each rule speaks of, or why there is none."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        return f"expected a JSON array or object, found {_type_name(value)}"
    for name in _noun_forms(noun):
        found = _lookup(value, name)
        if found is not _MISSING:
            if isinstance(found, list):
                return found
            return f"{name} is {_type_name(found)}, expected an array"
    lists = [k for k, v in value.items() if isinstance(v, list)]
    if len(lists) == 1:
        return value[lists[0]]
    if not lists:
        return f"no array of {noun} found (fields: {_fields(list(value)) or 'none'})"
    return f"no {_snake(noun)} field, and several arrays to choose from ({_fields(lists)})"


def _noun_forms(noun: str) -> list[str]:
    """The keys a noun may be stored under: 'pain point' → pain_point, pain_points."""
    base = _snake(noun)
    forms = [base, base + "s"]
    if base.endswith("ies"):
        forms.append(base[:-3] + "y")
    elif base.endswith("s"):
        forms.append(base[:-1])
    if base.endswith("y"):
        forms.append(base[:-1] + "ies")
    return forms


def _value_of(value: Any, field: str) -> tuple[Any, str]:
    """The value a range or one_of rule speaks of, and how to name it; or _MISSING and why."""
    if not isinstance(value, dict):
        # A bare number or string is the value itself, whatever the rule calls it.
        if isinstance(value, (list, type(None))):
            return _MISSING, f"expected a JSON object with {field}, found {_type_name(value)}"
        return value, "the output"
    found = _lookup(value, field, loose=True)
    if found is _MISSING:
        return _MISSING, f"no {field} field (found {_fields(list(value)) or 'no fields'})"
    # Name the key actually read, which may differ from the rule's wording (overall_score).
    return found, _key(value, field, loose=True) or field


def _snake(name: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.strip())
    text = re.sub(r"^(?:the|an?)\s+", "", text, flags=re.IGNORECASE)
    return re.sub(r"[\s\-]+", "_", text).lower()


# ---------------------------------------------------------------- describing values


def _is_type(value: Any, json_type: str) -> bool:
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if json_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    kinds = {"array": list, "string": str, "object": dict}
    return isinstance(value, kinds[json_type])


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    for json_type in ("boolean", "number", "string", "array", "object"):
        if _is_type(value, json_type):
            return _article(json_type)
    return type(value).__name__


def _article(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields(names: list[Any]) -> str:
    shown = ", ".join(str(n) for n in names[:8])
    return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _within(n: float, low: float | None, high: float | None) -> bool:
    return (low is None or n >= low) and (high is None or n <= high)


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and low == high:
        return f"exactly {low:g}"
    if high is None:
        return f"at least {low:g}"
    if low is None:
        return f"at most {high:g}"
    return f"between {low:g} and {high:g}"


def _as_choice(value: Any) -> str:
    """A value as it would be written in a rule, so 'true', '3' and 'Approved' compare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = str(value).strip()
    try:
        return f"{float(text):g}"
    except ValueError:
        return text.casefold()
