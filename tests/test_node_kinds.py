"""Every kind of node in the IR (`spec.ir.Node`) has what using it needs, one test per concern, so a
new kind is not half done. Kinds listed in `ir.NOT_RUNNABLE_YET` are placeholders and are skipped."""

from __future__ import annotations

import typing

import pytest

from agentrun.explain.views import VIEWS
from agentrun.explain.views.base import View
from agentrun.lang import ir
from agentrun.lang.check import check
from agentrun.lang.errors import SpecError
from agentrun.workflows.nodes import HANDLERS, RUNNABLE_KINDS

MODELS = typing.get_args(typing.get_args(ir.Node)[0])
KINDS = [model.model_fields["kind"].default for model in MODELS]
USABLE = [kind for kind in KINDS if kind not in ir.NOT_RUNNABLE_YET]


def has_view(kind: str, method: str) -> bool:
    """The kind is registered in client.views and its view writes `method` itself."""
    view = VIEWS.get(kind)
    return view is not None and getattr(type(view), method) is not getattr(View, method)


def missing_view(kind: str, what: str) -> str:
    return (
        f"node kind '{kind}' has no {what}: write explain/views/{kind}.py and register it in explain/views/__init__.py"
    )


@pytest.mark.parametrize("kind", USABLE)
def test_every_kind_has_a_runtime_handler(kind: str):
    assert kind in HANDLERS, (
        f"node kind '{kind}' has no runtime: write workflows/nodes/{kind}.py and register it in workflows/nodes/__init__.py"
    )


@pytest.mark.parametrize("kind", USABLE)
def test_every_kind_has_an_inspect_description(kind: str):
    assert has_view(kind, "describe"), missing_view(kind, "inspect description")


@pytest.mark.parametrize("kind", USABLE)
def test_every_kind_has_a_dry_run_description(kind: str):
    assert has_view(kind, "dry_run"), missing_view(kind, "dry-run description")


@pytest.mark.parametrize("kind", USABLE)
def test_every_kind_has_a_drawing(kind: str):
    assert has_view(kind, "draw"), missing_view(kind, "drawing in the graph")


def test_views_are_only_for_kinds_of_the_ir():
    assert set(VIEWS) <= set(KINDS), f"views for kinds spec.ir.Node does not list: {set(VIEWS) - set(KINDS)}"
    assert ir.NOT_RUNNABLE_YET <= set(KINDS), "NOT_RUNNABLE_YET names kinds spec.ir.Node does not list"
    assert RUNNABLE_KINDS == set(KINDS) - ir.NOT_RUNNABLE_YET, "a kind both runs and is listed as not runnable yet"


@pytest.mark.parametrize("kind", sorted(ir.NOT_RUNNABLE_YET))
def test_a_plan_using_a_kind_not_runnable_yet_is_refused_before_the_run(kind: str):
    model = next(m for m in MODELS if m.model_fields["kind"].default == kind)
    fields = {"body": ir.Sequence(id="b"), "start": "b"}
    node = model(id="x", **{k: v for k, v in fields.items() if k in model.model_fields})
    plan = ir.Plan(name="p", dialect="test", source="p.yaml", spec_dir=".", root=ir.Sequence(id="r", children=[node]))
    with pytest.raises(SpecError, match=f"is a {kind} node, which this engine does not run yet"):
        check(plan)


def test_every_reply_protocol_of_the_ir_has_its_module_and_its_first_prompt():
    from agentrun.models.texts.prompts import FIRST_PROMPTS
    from agentrun.workflows.protocols.registry import PROTOCOLS

    assert set(PROTOCOLS) == set(typing.get_args(ir.Protocol))
    assert set(FIRST_PROMPTS) == set(PROTOCOLS)
