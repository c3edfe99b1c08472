"""Read a spec file, find its language, compile it to a Plan."""

from __future__ import annotations

from collections.abc import Iterable

from spec import ir
from spec.dialects import pipeline, task_tree
from spec.errors import Problem, SpecError
from spec.yamlpos import PosDict, load_yaml

DIALECTS = {"task-tree": task_tree, "pipeline": pipeline}


def load(path: str, given_params: Iterable[str] = ()) -> ir.Plan:
    """The Plan for the spec at `path`; SpecError with file:line problems if it is not valid."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SpecError(
            [
                Problem(
                    path,
                    0,
                    0,
                    f"cannot read spec: {exc.strerror}",
                    "check the path; it is relative to the current folder",
                )
            ]
        ) from None
    data = load_yaml(text, path)
    if not isinstance(data, PosDict):
        raise SpecError(
            [
                Problem(
                    path,
                    1,
                    1,
                    "a spec must be a YAML mapping at the top level",
                    "start with keys such as name:, params:, subtasks:",
                )
            ]
        )
    for dialect in DIALECTS.values():
        if dialect.detect(data):
            return dialect.compile_plan(data, path, set(given_params))
    raise SpecError(
        [
            Problem(
                path,
                1,
                1,
                "cannot tell which spec language this file is in",
                "a task tree has 'subtasks:' or 'instructions:' at the top level; "
                "a pipeline has 'workflow:' with agents: and steps:",
            )
        ]
    )
