"""A body run once per item of a list, at most so many at a time, its results maybe combined by a reducer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.blocks import Block
from agentrun.explain.views.base import Entry, Scope, Shown, View
from agentrun.explain.views.words import bare, step_timeout, stored, sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class MapView(View[ir.Map]):
    def describe(self, node: ir.Map, at: Entry, gets: str, inspect: Describer) -> list[str]:
        who = inspect.who
        body_tag = sub_tag(at.tag, 0) if node.reduce else at.tag
        last = node.reduce or node.body
        text = f"map: {who(node.body)} runs once per item of {source(node)}, at most {node.concurrency} at a time"
        if node.outcomes:
            text += "; " + outcome_text(node)
        text += _batches(node)
        if node.reduce:
            text += f"; {who(node.reduce)} combines the results"
        lines = [at.head + text + stored(node, getattr(last, "output_format", None)) + step_timeout(node)]
        if node.reduce:
            lines += inspect.step(node.body, body_tag, at.indent, "one item")
            lines += inspect.step(node.reduce, sub_tag(at.tag, 1), at.indent, f"the list of {body_tag} outputs")
        else:
            lines += [at.indent + line for line in inspect.details(node.body)]
        return lines

    def dry_run(self, node: ir.Map, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        over = dry.fill(node.over, scope) if node.over else source(node)
        first = (
            f"map over {over}, at most {node.concurrency} at a time{_batches(node)}" + stored(node) + step_timeout(node)
        )
        item = Shown(f"<one item of {over}>")
        body_tag = sub_tag(at.tag, 0) if node.reduce else at.tag
        index = Shown("<its index>")
        given = scope.get("input")
        context = {
            **(given if isinstance(given, dict) else {}),
            "map_item": item,
            "map_index": index,
            "map_total": Shown("<how many items>"),
        }
        each = {**scope, "item": item, "index": index, "input": context if node.outcomes else item}
        lines = [at.head + first] + dry.step(node.body, body_tag, at.indent, each, "once per item: ")
        if node.reduce:
            results = Shown(f"<the list of {node.body.id} outputs>")
            lines += dry.step(node.reduce, sub_tag(at.tag, 1), at.indent, {**scope, "input": results})
        return lines

    def draw(self, node: ir.Map, tag: str, follows: bool, drawer: Drawer) -> Block:
        reduce = node.reduce
        head = "+--> " + drawer.box(node.body, sub_tag(tag, 0) if reduce else tag, " × N")
        right = "end"
        if reduce is not None or follows:
            head, right = head + " --+", "wire"
        if reduce is not None:
            head, right = head + "--> " + drawer.box(reduce, sub_tag(tag, 1)), "box"
        return Block((head, f"     (each of {source(node)})"), left="joint", right=right)


def source(node: ir.Map) -> str:
    """Where a map's items come from, in words."""
    if node.items is not None:
        return f"{len(node.items)} fixed items"
    return node.items_path or bare(node.over)


def outcome_text(node: ir.Map) -> str:
    limit = f"at most {node.max_items} items; " if node.max_items is not None else ""
    if node.error_strategy == "best_effort":
        return limit + "a failed item is recorded and the others go on"
    return limit + "the first failed item fails the map"


def _batches(node: ir.Map) -> str:
    return f" (over {node.batch} items: in batches of {node.batch}, each a child workflow)"
