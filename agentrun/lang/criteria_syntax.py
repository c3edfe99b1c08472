"""A success check's inline Python must compile: a syntax error is found before anything runs, not
after an agent has done its work."""

from __future__ import annotations

import re

from agentrun.lang import ir
from agentrun.lang.errors import Problem

_EXPRESSION = re.compile(r"\{\{.*?\}\}", re.DOTALL)


def python_syntax(plan: ir.Plan) -> list[Problem]:
    problems = []
    for node in plan.walk():
        for owner in (node, node.compensation):
            crit = getattr(owner, "criteria", None)
            if owner is not None and crit is not None and crit.python is not None:
                problem = _compile(plan, owner, crit.python)
                if problem:
                    problems.append(problem)
    return problems


def _placeholder(match: re.Match[str]) -> str:
    """A name where the expression was, on as many lines, so line numbers stay the code's own."""
    return "_" + "\n" * match.group(0).count("\n")


def _compile(plan: ir.Plan, node: ir.NodeBase, code: str) -> Problem | None:
    """The check's code as it runs once its `{{ }}` are filled in (with a name in their place);
    code with `{% %}` blocks is only known then."""
    if "{%" in code:
        return None
    try:
        compile(_EXPRESSION.sub(_placeholder, code), "<success_criteria>", "exec")
    except SyntaxError as exc:
        lines = code.splitlines()
        line = lines[exc.lineno - 1].strip() if exc.lineno and exc.lineno <= len(lines) else ""
        quoted = f": {line}" if line else ""
        return Problem(
            plan.source,
            node.line,
            1,
            f"the success_criteria python of '{node.label}' does not compile: {exc.msg} at its line {exc.lineno}{quoted}",
            "fix the Python: it runs as written, with each {{ }} filled in",
        )
    return None
