"""Read a spec file, find its language, compile it to a Plan."""

from __future__ import annotations

import os
from collections.abc import Iterable

from agentrun.lang import ir
from agentrun.lang.dialects import DIALECTS, compile, marks
from agentrun.lang.errors import Problem, SpecError
from agentrun.lang.source import noting, read_text
from agentrun.lang.yamlpos import load_mapping, yaml_text


def load(path: str, given_params: Iterable[str] = (), text: str | None = None) -> ir.Plan:
    """The Plan for the spec at `path` (or `text`, the spec's own, as if it were that file); SpecError
    with file:line problems if it is not valid."""
    with noting() as files:
        text = yaml_text(path, read_text(path) if text is None else text)
        for dialect in DIALECTS:
            if dialect.detect(path, text):
                plan = compile(dialect, path, text, set(given_params))
                return plan.model_copy(update={"traits": dialect.TRAITS, "files": [*files, *_scripts(plan)]})
    raise SpecError([_unknown_language(path, text)])


def _scripts(plan: ir.Plan) -> list[str]:
    """The success checks' script files, which a run reads again at every check."""
    return [
        os.path.realpath(os.path.join(plan.spec_dir, n.criteria.script))
        for n in plan.walk_all()
        if isinstance(n, ir.Task | ir.Provider) and n.criteria is not None and n.criteria.script
    ]


def _unknown_language(path: str, text: str) -> Problem:
    """Why no dialect took the file: what is wrong with it as YAML, else that its keys fit none."""
    load_mapping(text, path)  # a YAML syntax error or a top level that is no mapping, said as such
    return Problem(path, 1, 1, "cannot tell which spec language this file is in", marks())
