"""Conditions and references in specs: a small comparison language read by Jinja's own parser.

Pure (no I/O, clocks or randomness) because the workflow evaluates conditions during replay.

Agent output is data and is never parsed. A `{{ ref }}` in a condition is turned into the bare
reference in the *source*, one expression is compiled from that, and references are looked up in
the context only when it is evaluated. Rendering first and parsing the result would let an agent
that replies "hot' or 'x" rewrite the condition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, cast

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.lexer import describe_token
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment

from agentrun.lang import ir
from agentrun.lang.render import depth_guard, render

Path = tuple[str | int, ...]

_STRING = re.compile(r"""'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*\"""", re.DOTALL)
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "lteq": "<=", "gt": ">", "gteq": ">=", "in": "in", "notin": "not in"}
_CHAIN = (nodes.Name, nodes.Getattr, nodes.Getitem)
# Statements whose `set` stays inside them; anything else (if, output) lets it reach later siblings.
_SCOPES = (nodes.Block, nodes.Scope, nodes.FilterBlock, nodes.ScopedEvalContextModifier)
_EXAMPLE = "{{ steps.split.output.chunks }}"
_Found = list[tuple[Path, int]]  # reference paths with their template lines, in the order met


class ExpressionError(Exception):
    """A syntax error, a construct outside the condition language, or a value that could not be computed."""

    def __init__(self, message: str, *, reason: str | None = None, line: int | None = None):
        super().__init__(message)
        self.reason = reason or message  # the part after "could not evaluate …:", for warnings
        self.line = line  # 1-based line within a template, for template syntax errors


class _DataEnvironment(SandboxedEnvironment):
    """Sandbox where `a.b` and `a['b']` on a mapping read only its keys.

    Agent output is JSON, so `output.items` must be the agent's "items" field, never dict.items.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            return self._key(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Mapping):
            return self._key(obj, argument)
        return super().getitem(obj, argument)

    def _key(self, obj: Mapping, key: Any) -> Any:
        try:
            return obj[key]
        except (KeyError, TypeError):
            return self.undefined(obj=obj, name=key)


_ENV = _DataEnvironment(undefined=StrictUndefined, autoescape=False)


# ---- from source to one checked expression ----------------------------------------------------


def _bare(source: str) -> str:
    """`source` with each `{{ expr }}` replaced by the expression; quoted text is copied as it is."""
    parts: list[str] = []
    pos = 0
    while pos < len(source):
        quoted = _STRING.match(source, pos)
        if quoted:
            parts.append(_literal_text(quoted.group()))
            pos = quoted.end()
        elif source.startswith("{{", pos):
            inner, pos = _braced(source, pos)
            parts.append(_operand(inner))
        else:
            parts.append(source[pos])
            pos += 1
    return "".join(parts).strip()


def _operand(inner: str) -> str:
    # A lone reference needs no parentheses, and without them `{{a}} {{b}}` reads as two values
    # side by side rather than as the call `(a)(b)`.
    return inner if isinstance(_parse(inner), _CHAIN) else f"({inner})"


def _literal_text(quoted: str) -> str:
    # Quoting a reference is a habit from render-then-parse; here it would silently compare the
    # literal text '{{ … }}', so it is refused with the fix instead.
    if "{{" in quoted:
        raise ExpressionError(
            f"'{{{{ … }}}}' inside quotes is not a reference: {quoted}; "
            "write it without quotes, e.g. {{ steps.classify.output.category }} == 'hot'"
        )
    return quoted


def _braced(source: str, start: int) -> tuple[str, int]:
    """The expression inside the `{{ … }}` opening at `start`, and the position after it."""
    pos = start + 2
    while pos < len(source):
        quoted = _STRING.match(source, pos)
        if quoted:
            _literal_text(quoted.group())
            pos = quoted.end()
        elif source.startswith("{{", pos):
            raise ExpressionError(f"'{{{{' inside '{{{{ … }}}}' in {source!r}")
        elif source.startswith("}}", pos):
            return _strip_controls(source[start + 2 : pos], source), pos + 2
        else:
            pos += 1
    raise ExpressionError(f"'{{{{' is not closed with '}}}}' in {source!r}")


def _strip_controls(inner: str, source: str) -> str:
    # Jinja reads `{{-`, `{{+` and `-}}` as whitespace control, so they are not part of the value.
    if inner[:1] in ("-", "+"):
        inner = inner[1:]
    inner = inner.removesuffix("-").strip()
    if not inner:
        raise ExpressionError(f"empty '{{{{ }}}}' in {source!r}")
    return inner


@lru_cache(maxsize=1024)
def _parse(text: str) -> nodes.Expr:
    """Jinja's AST for one expression; raises ExpressionError on bad syntax or trailing text."""
    parser = Parser(_ENV, text, state="variable")
    try:
        with depth_guard():
            node = parser.parse_expression()
    except TemplateSyntaxError as exc:
        message = (exc.message or "").replace("template", "expression")  # Jinja words it for templates
        raise ExpressionError(f"syntax error in '{text}': {message}") from None
    if not parser.stream.eos:
        extra = describe_token(parser.stream.current)
        raise ExpressionError(f"syntax error in '{text}': unexpected '{extra}' after a complete expression")
    return node


def _unparse(node: nodes.Node) -> str:
    """Canonical text of `node`; raises ExpressionError on anything outside the condition language."""
    if isinstance(node, nodes.Compare):
        tail = "".join(f" {_COMPARISONS[op.op]} {_group(op.expr)}" for op in node.ops)
        return _group(node.expr) + tail
    if isinstance(node, (nodes.And, nodes.Or)):
        word = "and" if isinstance(node, nodes.And) else "or"
        return f"{_group(node.left)} {word} {_group(node.right)}"
    if isinstance(node, nodes.Not):
        return f"not {_group(node.node)}"
    if isinstance(node, nodes.List):
        return "[" + ", ".join(_unparse(item) for item in node.items) + "]"
    if isinstance(node, nodes.Tuple):
        items = [_unparse(item) for item in node.items]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(node, _CHAIN) and not _is_null(node):
        return _reference_text(node)
    literal = _literal(node)
    if literal is not None:
        return literal
    raise ExpressionError(_refusal(node))


def _group(node: nodes.Node) -> str:
    # Parenthesise compound operands so the canonical text keeps the parsed grouping.
    text = _unparse(node)
    return f"({text})" if isinstance(node, (nodes.Compare, nodes.And, nodes.Or, nodes.Not)) else text


def _literal(node: nodes.Node) -> str | None:
    """Jinja text of a constant (with `null` as none and `-5` as a number), or None."""
    if _is_null(node):
        return "none"
    if isinstance(node, nodes.Const):
        return _const_text(node.value)
    if isinstance(node, (nodes.Neg, nodes.Pos)) and _is_number(node.node):
        return f"{node.operator}{_const_text(cast(nodes.Const, node.node).value)}"
    return None


def _is_null(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "null"


def _is_number(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Const) and type(node.value) in (int, float)


def _const_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (str, int, float)):
        return repr(value)  # Python's escapes are the ones Jinja's lexer decodes
    raise ExpressionError(f"the constant {value!r} is not allowed in conditions")


def _reference_text(node: nodes.Node) -> str:
    """`steps.x.output['k'][0]` for a reference whose every key is a constant."""
    if isinstance(node, nodes.Name):
        return _safe_name(node.name)
    if isinstance(node, nodes.Getattr):
        return f"{_reference_base(node.node)}.{_safe_name(node.attr)}"
    assert isinstance(node, nodes.Getitem)  # a reference chain is names, attributes and subscripts
    key = _constant_key(node.arg)
    if key is None:
        raise ExpressionError(f"subscripts must be constant, like [0] or ['key'], not {_describe(node.arg)}")
    if isinstance(key, str):
        _safe_name(key)
    return f"{_reference_base(node.node)}[{key!r}]"


def _reference_base(node: nodes.Node) -> str:
    if not isinstance(node, _CHAIN) or _is_null(node):
        raise ExpressionError("'.' and '[…]' apply only to references, like steps.x.output['key']")
    return _reference_text(node)


def _safe_name(name: str) -> str:
    # The sandbox already hides these on objects; refusing them up front gives a clear message.
    if name.startswith("__"):
        raise ExpressionError(f"dunder names are not allowed in conditions: {name}")
    return name


def _constant_key(node: nodes.Node) -> str | int | None:
    """The key of a `[…]` subscript when it is a constant string or int (including -1), else None."""
    if isinstance(node, nodes.Const) and type(node.value) in (str, int):
        return node.value
    if isinstance(node, nodes.Neg) and isinstance(node.node, nodes.Const) and type(node.node.value) is int:
        return -node.node.value
    return None


def _refusal(node: nodes.Node) -> str:
    """Why `node` is refused, naming the construct the user wrote."""
    if isinstance(node, nodes.Call):
        return f"function calls are not allowed in conditions: {_callee(node)}()"
    if isinstance(node, nodes.Filter):
        return f"filters are not allowed in conditions: |{node.name}"
    if isinstance(node, nodes.Test):
        return f"tests are not allowed in conditions: is {node.name}"
    if isinstance(node, nodes.Concat):
        return "string concatenation is not allowed in conditions: ~"
    if isinstance(node, (nodes.BinExpr, nodes.UnaryExpr)):
        return f"arithmetic is not allowed in conditions: {node.operator}"
    if isinstance(node, nodes.CondExpr):
        return "conditional expressions are not allowed in conditions: … if … else …"
    return f"{_describe(node)} is not allowed in conditions"


def _callee(node: nodes.Call) -> str:
    if isinstance(node.node, nodes.Getattr):
        return node.node.attr
    if isinstance(node.node, nodes.Name):
        return node.node.name
    return _describe(node.node)


def _describe(node: nodes.Node) -> str:
    """A short human name for `node` in error messages."""
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Const):
        return repr(node.value)
    if isinstance(node, nodes.Slice):
        return "a slice [a:b]"
    if isinstance(node, nodes.Dict):
        return "a dict literal {…}"
    return f"a {type(node).__name__.lower()} expression"


# ---- public API --------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def compile_expression(source: str) -> str:
    """The checked, canonical Jinja expression for `source`; raises ExpressionError."""
    if not source.strip():
        raise ExpressionError("the expression is empty")
    return _unparse(_parse(_bare(source)))


def references(source: str) -> list[Path]:
    """The reference paths `source` reads, like ("steps", "classify", "output", "category")."""
    found: _Found = []
    _scan(_parse(compile_expression(source)), frozenset(), found)
    return list(dict.fromkeys(path for path, _ in found))


def template_references(template: str) -> list[tuple[Path, int]]:
    """Reference paths a Jinja template reads, each with its 1-based line in the template."""
    try:
        with depth_guard():
            tree = _ENV.parse(template)
            found: _Found = []
            _scan(tree, frozenset(), found)
    except TemplateSyntaxError as exc:
        message = f"template syntax error on line {exc.lineno}: {exc.message}"
        raise ExpressionError(message, line=exc.lineno) from None
    return sorted(dict.fromkeys(found), key=lambda hit: hit[1])


def evaluate(source: str, context: Mapping[str, Any]) -> Any:
    """The value of `source` with its references read from `context`; raises ExpressionError."""
    text = compile_expression(source)
    try:
        value = _evaluator(text)(context)
        if isinstance(value, Undefined):
            str(value)  # StrictUndefined raises here, so a bare missing reference is an error too
    except (UndefinedError, SecurityError, TypeError) as exc:
        reason = _missing(source, context) or str(exc)
        raise ExpressionError(f"could not evaluate '{source}': {reason}", reason=reason) from None
    return value


def condition(source: str, context: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(result, warning): anything but a clean true or false takes the false branch with a warning."""
    try:
        value = evaluate(source, context)
    except ExpressionError as exc:
        return False, f"condition '{source}' could not be evaluated ({exc.reason}); taking the false branch"
    if isinstance(value, bool):
        return value, None
    gave = f"it gave {_show(value)}, not true or false"
    return False, f"condition '{source}' is ambiguous ({gave}); taking the false branch"


def resolve(source: str, context: Mapping[str, Any]) -> Any:
    """The value (not its text) of one `{{ ref }}` or bare reference, for `over:` and `feedback_path:`."""
    try:
        node = _parse(compile_expression(source))
    except ExpressionError as exc:
        raise ExpressionError(f"'{source}' must be a single reference like {_EXAMPLE} ({exc})") from None
    if not isinstance(node, _CHAIN):
        raise ExpressionError(f"'{source}' must be a single reference like {_EXAMPLE}")
    return evaluate(source, context)


def is_reference(template: str) -> bool:
    """True for a template that is exactly one `{{ ref }}`: its value is used as is, not as text."""
    text = template.strip()
    if not (text.startswith("{{") and text.endswith("}}")) or text.count("{{") != 1:
        return False
    try:
        return isinstance(_parse(compile_expression(text)), _CHAIN)
    except ExpressionError:
        return False


# ---- evaluation helpers ------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _evaluator(text: str) -> TemplateExpression:
    with depth_guard():
        return _ENV.compile_expression(text, undefined_to_none=False)


def _missing(source: str, context: Mapping[str, Any]) -> str | None:
    """'steps.classify is undefined' for the shortest missing prefix of a reference, if any."""
    for path in references(source):
        value: Any = context
        for depth, key in enumerate(path):
            value = _ENV.getitem(value, key)
            if isinstance(value, Undefined):
                return f"{_dotted(path[: depth + 1])} is undefined"
    return None


def _dotted(path: Path) -> str:
    text = str(path[0])
    for key in path[1:]:
        text += f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"
    return text


def _show(value: Any) -> str:
    # Agent replies can be long; the warning only needs enough to recognise the value.
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ---- finding references ------------------------------------------------------------------------


def _scan(node: nodes.Node, bound: frozenset[str], found: _Found) -> frozenset[str]:
    """Record references under `node` not bound by the template; returns the names bound after it."""
    if isinstance(node, _CHAIN):
        _scan_chain(node, bound, found)
    elif isinstance(node, nodes.Call):
        _scan_call(node, bound, found)
    elif isinstance(node, nodes.For):
        inner = bound | _targets(node.target) | {"loop"}
        _scan(node.iter, bound, found)
        _scan_all([node.test] if node.test else [], inner, found)
        _scan_all(node.body, inner, found)
        _scan_all(node.else_, bound, found)
    elif isinstance(node, nodes.Assign):
        _scan(node.node, bound, found)
        return bound | _targets(node.target)
    elif isinstance(node, nodes.AssignBlock):
        _scan_all([*node.body, *([node.filter] if node.filter else [])], bound, found)
        return bound | _targets(node.target)
    elif isinstance(node, nodes.With):
        _scan_all(node.values, bound, found)
        _scan_all(node.body, bound.union(*map(_targets, node.targets)), found)
    elif isinstance(node, (nodes.Macro, nodes.CallBlock)):
        return _scan_callable(node, bound, found)
    elif isinstance(node, (nodes.Import, nodes.FromImport)):
        _scan(node.template, bound, found)
        return bound | _imported(node)
    else:
        inner = _scan_all(node.iter_child_nodes(), bound, found)
        return bound if isinstance(node, _SCOPES) else inner
    return bound


def _scan_all(body: Iterable[nodes.Node], bound: frozenset[str], found: _Found) -> frozenset[str]:
    for node in body:
        bound = _scan(node, bound, found)
    return bound


def _scan_chain(node: nodes.Node, bound: frozenset[str], found: _Found) -> None:
    """Record the constant path of `a.b['c'][x].d` (here a.b.c); keys that are expressions are scanned too."""
    keys: list[str | int] = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        key = node.attr if isinstance(node, nodes.Getattr) else _constant_key(node.arg)
        if key is not None:
            keys.append(key)
        elif isinstance(node, nodes.Getitem):
            _scan(node.arg, bound, found)
            keys.clear()  # the path stops before the first part that is not a constant
        node = node.node
    if not isinstance(node, nodes.Name):
        _scan(node, bound, found)
    elif node.ctx == "load" and node.name not in bound:
        found.append(((node.name, *reversed(keys)), node.lineno))


def _scan_call(node: nodes.Call, bound: frozenset[str], found: _Found) -> None:
    # A called name (range, a macro) is a function, and a called attribute is a method of the
    # value before it: neither is data the context must provide.
    callee = node.node
    if isinstance(callee, nodes.Getattr):
        _scan(callee.node, bound, found)
    elif not isinstance(callee, nodes.Name):
        _scan(callee, bound, found)
    extras = [node.dyn_args, node.dyn_kwargs]
    _scan_all([*node.args, *node.kwargs, *(e for e in extras if e is not None)], bound, found)


def _scan_callable(node: nodes.Macro | nodes.CallBlock, bound: frozenset[str], found: _Found) -> frozenset[str]:
    """Scan a macro or call block, whose parameters are bound inside it; a macro's name is bound after it."""
    _scan_all(node.defaults, bound, found)
    if isinstance(node, nodes.CallBlock):
        _scan(node.call, bound, found)
    params = {arg.name for arg in node.args} | {"caller", "varargs", "kwargs"}
    _scan_all(node.body, bound | params, found)
    return bound | {node.name} if isinstance(node, nodes.Macro) else bound


def _targets(node: nodes.Node) -> frozenset[str]:
    """Names a `for` or `set` target binds (a namespace attribute binds none)."""
    if isinstance(node, nodes.Name):
        return frozenset({node.name})
    if isinstance(node, (nodes.Tuple, nodes.List)):
        return frozenset().union(*map(_targets, node.items))
    return frozenset()


def _imported(node: nodes.Import | nodes.FromImport) -> frozenset[str]:
    if isinstance(node, nodes.Import):
        return frozenset({node.target})
    return frozenset(name if isinstance(name, str) else name[1] for name in node.names)


__all__ = [
    "ExpressionError",
    "Path",
    "compile_expression",
    "condition",
    "evaluate",
    "references",
    "resolve",
    "template_references",
]


def step_input(source: str | None, context: Mapping[str, Any], all_prior: Any) -> Any:
    """The value a step's `input:` gives its agent: the enclosing value when it has none, every
    earlier output for "all prior context", the value a single reference names, else the
    rendered text. The engine and `dry-run` both read inputs through this."""
    if source is None:
        return context.get("input")
    if source == ir.ALL_PRIOR:
        return all_prior
    if is_reference(source):
        return resolve(source, context)
    return render(source, dict(context))
