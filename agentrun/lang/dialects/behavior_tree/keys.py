"""The keys of a behaviour tree file as written: the abtree wrapper, `state`, `running` and the
nodes' own keys. Raw models only; `nodes` and `behavior_tree` compile them.

A node's `steps:` and `children:` are read by the node compiler (their items may be `$ref`s into
other files), so here they are only lists. Keys whose absence needs its own words (a node's name,
its steps or children, the wrapper's name, version and tree) are optional here and said missing by
the compilers, unless a misspelled key beside them already explains it.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from agentrun.lang.dialects.common_keys import VALUE_HINTS, RawApproval, RawBudget, Strict, approval_shorthand

NodeType = Literal["action", "sequence", "selector", "parallel"]
NODE_TYPES: tuple[NodeType, ...] = ("action", "sequence", "selector", "parallel")
StepKind = Literal["evaluate", "instruct"]
STEP_KINDS: tuple[StepKind, ...] = ("evaluate", "instruct")
_NOT_IN_NAMES = "/@"  # node ids join names with '/' and number steps after '@'


def _name(value: Any) -> Any:
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("a name cannot be empty")
        bad = [c for c in _NOT_IN_NAMES if c in value]
        if bad:
            raise ValueError(f"'{value}' contains " + " and ".join(f"'{c}'" for c in bad))
    return value


def _whole_number(value: Any) -> Any:
    """At least 1; a YAML boolean (true, yes, on) is no number of times."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is a boolean, not a whole number")
    if isinstance(value, int) and value < 1:
        raise ValueError(f"must be at least 1, not {value}")
    if not isinstance(value, int):
        raise ValueError(f"{value!r} is not a whole number")
    return value


def _text(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be the text of an instruct step")
    return value


def _version(value: Any) -> Any:
    """`version: 1` or `1.2` reads as a number in YAML; it means the text."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


Name = Annotated[str, BeforeValidator(_name)]
Count = Annotated[int, BeforeValidator(_whole_number)]
Text = Annotated[str, BeforeValidator(_text)]
Duration = float | str


class RawState(Strict):
    """The blackboard's seed: `var`/`local` is $VAR ($LOCAL), `const`/`global` is $CONST ($GLOBAL)."""

    var: dict[str, Any] | None = None
    const: dict[str, Any] | None = None
    local: dict[str, Any] | None = None
    global_: dict[str, Any] | None = Field(None, alias="global")


class RawRunning(Strict):
    """How a step the agent says is still running is asked again (`ir.Running`)."""

    wait: Duration | None = None
    max_wait: Duration | None = None
    max_asks: Count | None = None


class RawTop(Strict):
    """What applies to the whole tree: on the abtree wrapper, or on the top node of a file whose
    root is a node (behaviors-sh). On any other node these are refused as misplaced."""

    state: RawState | None = None
    running: RawRunning | None = None
    budget: RawBudget | None = None


class RawWrapper(RawTop):
    schema_: str | None = Field(None, alias="$schema")
    name: Name | None = None
    version: Annotated[str | None, BeforeValidator(_version)] = None
    description: str = ""
    tree: Any = None


class RawNode(RawTop):
    type: NodeType
    name: Name | None = None
    retries: Count | None = None
    approval: Annotated[RawApproval | None, BeforeValidator(approval_shorthand)] = None
    compensate: Text | None = None


class RawAction(RawNode):
    steps: list[Any] | None = None


class RawComposite(RawNode):
    children: list[Any] | None = None


TOP_KEYS = tuple(RawTop.model_fields)

# Hints for values a validator refused, by the key holding the value.
HINTS = {
    **VALUE_HINTS,
    "name": "names make the node's id (Deploy_Service/Run_Tests, a step Run_Tests@1), so they cannot "
    "hold '/' or '@'; write it with '_' or '-' instead",
    "retries": "retries: N gives the node N more attempts after it fails; write a whole number, at least 1 "
    "(retries: 2), or leave it out",
    "max_asks": "how many times in all a step that is still running is asked; a whole number, at least 1",
    "compensate": 'write compensate: "Remove the tag $VAR.image_tag." — an instruct step asked when the run rolls back',
}


def explained(missing: str, data: dict[str, Any], known: set[str]) -> bool:
    """Whether an unknown key beside a missing one is it misspelled (`childern` for `children`),
    so the one mistake is said once, as the unknown key."""
    unknown = [str(k) for k in data if k not in known]
    return bool(difflib.get_close_matches(missing, unknown, n=1))


def known_keys(model: type[Strict]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}
