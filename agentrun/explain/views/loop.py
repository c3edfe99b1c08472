"""A body repeated until a condition holds or a checker passes it: the seed's feedback loop figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len

from agentrun.explain.blocks import Block
from agentrun.explain.views.base import Entry, Scope, Shown, View
from agentrun.explain.views.words import agent_name, bare, step_timeout, stored, sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer


class LoopView(View[ir.Loop]):
    def describe(self, node: ir.Loop, at: Entry, gets: str, inspect: Describer) -> list[str]:
        who = inspect.who
        if node.validator:
            feedback = bare(node.feedback) if node.feedback else "the check's feedback field"
            text = (
                f"loop: {who(node.body)} produces, {who(node.validator)} checks, until the check "
                f"passes (its reply has passed: true), at most {node.max_iterations} iterations; "
                f"feedback from {feedback}"
            )
        else:
            text = f"loop: {who(node.body)} runs until {_until(node)}, at most {node.max_iterations} iterations"
        fmt = getattr(node.body, "output_format", None)
        lines = [at.head + text + stored(node, fmt) + step_timeout(node)]
        lines += inspect.step(node.body, sub_tag(at.tag, 0), at.indent, gets)
        if node.validator:
            checked = f"the output of {sub_tag(at.tag, 0)}"
            lines += inspect.step(node.validator, sub_tag(at.tag, 1), at.indent, checked)
        return lines

    def dry_run(self, node: ir.Loop, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        until = f"{agent_name(node.validator, dry.agents)} passes it" if node.validator else _until(node)
        first = f"loop, at most {node.max_iterations} iterations, until {until}" + stored(node) + step_timeout(node)
        body_tag, judge_tag = sub_tag(at.tag, 0), sub_tag(at.tag, 1)
        lines = [at.head + first]
        # The first iteration, as the engine runs it: no feedback yet.
        lines += dry.step(node.body, body_tag, at.indent, {**scope, "feedback": None, "iteration": 1})
        if node.validator:
            feedback = dry.fill(node.feedback, scope) if node.feedback else "the check's feedback field"
            lines.append(
                f"{at.indent}{' ' * (len(body_tag) + 2)}from iteration 2 it also gets the feedback: {feedback}"
            )
            checked = {**scope, "input": Shown(f"<output of {node.body.id}>")}
            lines += dry.step(node.validator, judge_tag, at.indent, checked)
            lines.append(f"{at.indent}{' ' * (len(judge_tag) + 2)}the loop ends when its reply has passed: true")
        return lines

    def draw(self, node: ir.Loop, tag: str, follows: bool, drawer: Drawer) -> Block:
        body = drawer.box(node.body, sub_tag(tag, 0))
        if node.validator is not None:
            judge = drawer.box(node.validator, sub_tag(tag, 1))
        else:
            judge = f"(until {bare(node.until)})" if node.until else "(until it passes)"
        head = f"{body} --> {judge} --PASS" + ("" if follows else "--> done")
        back = cell_len(body) // 2  # the column of ^, under the producing agent
        fail = cell_len(body) + 5 + cell_len(judge) // 2  # the column of |, under the checker
        span = fail - back - 1
        label = " feedback " if span >= 12 else ""
        dashes = span - len(label)
        fail_at = max(fail - 2, back + 2)
        lines = (
            head,
            " " * back + "^" + " " * span + "|",
            " " * back + "|" + " " * (fail_at - back - 1) + "FAIL",
            " " * back + "\\" + "-" * (dashes // 2) + label + "-" * (dashes - dashes // 2) + "/",
            " " * back + f"(max {node.max_iterations} iterations)",
        )
        return Block(lines, right="wire" if follows else "end")


def _until(node: ir.Loop) -> str:
    return f"{bare(node.until)} holds" if node.until else "it passes"
