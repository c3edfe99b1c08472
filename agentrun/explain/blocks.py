"""Text figures built from blocks: what the execution graph (`client.graph`) is drawn with.

Each block has an anchor row where arrows come in and go out; a chain joins blocks on their anchor
rows, and a fan stacks blocks between `/-->`, `+-->`, `\\-->` junctions.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from rich.cells import cell_len

# How two neighbours meet, by the right edge of the first and the left edge of the second.
# "box" ends or starts with a box, "joint" starts with a junction, "wire" ends in a line that
# still needs its arrowhead.
_LINKS = {("box", "box"): " --> ", ("box", "joint"): " -", ("wire", "box"): "--> ", ("wire", "joint"): "--"}


@dataclass(frozen=True)
class Block:
    """Rows of text, with the row arrows meet and what its left and right edges are."""

    lines: tuple[str, ...]
    row: int = 0  # the anchor row
    left: str = "box"  # or "joint"
    right: str = "box"  # or "wire", or "end" when nothing may follow

    @property
    def width(self) -> int:
        return max(cell_len(line) for line in self.lines)


_CONTINUED = Block(("",), right="wire")  # opens a row that goes on from the previous one
_GOES_ON = Block(("",))  # closes a row whose chain goes on below


@dataclass
class _Stack:
    """A fan's branches one under another, before its sides are drawn."""

    lines: list[str] = field(default_factory=list)
    anchors: list[int] = field(default_factory=list)  # each branch's anchor row
    joints: set[int] = field(default_factory=set)  # anchor rows starting with a junction: no arrowhead
    wires: set[int] = field(default_factory=set)  # anchor rows ending in a wire, which the fan-in continues
    entry: int = -1  # the row the fan is entered and left by


def _stack(branches: list[tuple[Block, str]]) -> _Stack:
    stack = _Stack()
    for i, (block, note) in enumerate(branches):
        if len(branches) % 2 == 0 and i == len(branches) // 2:
            stack.entry = len(stack.lines)  # an even fan enters between its middle branches, as in the seed
            stack.lines.append("")
        rows = list(block.lines)
        anchor = len(stack.lines) + block.row
        if note and block.right == "box":
            rows[block.row] += " " + note  # the seed's place: after the agent the branch runs
        elif note:  # after a figure it would read as part of it, so it goes in front
            lead = note + (" -" if block.left == "joint" else " ")
            rows = [(lead if n == block.row else " " * cell_len(lead)) + row for n, row in enumerate(rows)]
        elif block.left == "joint":
            stack.joints.add(anchor)
        if block.right == "wire":
            stack.wires.add(anchor)
        stack.anchors.append(anchor)
        stack.lines += rows
    if stack.entry < 0:
        stack.entry = stack.anchors[len(stack.anchors) // 2]
    return stack


def fan(branches: list[tuple[Block, str]], closed: bool) -> Block:
    """Branches between a fan-out and, when something follows, a fan-in."""
    stack = _stack(branches)
    inner = max(cell_len(line) for line in stack.lines)
    out = []
    for at, line in enumerate(stack.lines):
        mark = _mark(stack, at, "/", "\\")
        close = _mark(stack, at, "\\", "/")
        if at in stack.anchors:
            text = mark + ("----" if at in stack.joints else "--> ") + line
            if closed:  # the branch runs on to the fan-in: `/--> [2a. X] -----\`
                text += ("-" if at in stack.wires else " ") + "-" * (inner - cell_len(line) + 2) + close
        else:
            text = mark + "    " + line
            if closed and mark != " ":
                text = _pad(text, inner + 8) + close
        out.append(text.rstrip())
    return Block(tuple(out), stack.entry, left="joint", right="wire" if closed else "end")


def _mark(stack: _Stack, at: int, top: str, bottom: str) -> str:
    """The junction character on a side of a fan at row `at`."""
    anchors = stack.anchors
    if at == stack.entry:
        return "+" if at in anchors else "|"
    if at == anchors[0]:
        return top
    if at == anchors[-1]:
        return bottom
    if at in anchors:
        return "+"
    return "|" if anchors[0] < at < anchors[-1] else " "


def chain(blocks: list[Block]) -> Block:
    """The blocks one after another, joined by arrows."""
    result = blocks[0]
    for block in blocks[1:]:
        result = _join(result, block)
    return result


def rows(blocks: list[Block], width: int) -> list[str]:
    """The chain of blocks, wrapped before any block that would pass `width`."""
    wrapped: list[Block] = []
    current = blocks[0]
    for block in blocks[1:]:
        joined = _join(current, block)
        if joined.width <= width:
            current = joined
            continue
        wrapped.append(_join(current, _GOES_ON))
        current = _join(_CONTINUED, block)
    wrapped.append(current)
    lines = list(wrapped[0].lines)
    for before, row in itertools.pairwise(wrapped):
        # a blank line keeps a figure's lower rows apart from the row that goes on below it
        lines += ([""] if len(before.lines) > 1 else []) + list(row.lines)
    return lines


def _join(a: Block, b: Block) -> Block:
    """`a` then `b`, anchor rows level. Rows of `a` that `b` does not reach may run on under it,
    so a note under a figure does not push everything after it to the right."""
    top = max(a.row, b.row)
    a_at, b_at = top - a.row, top - b.row
    beside = range(b_at, b_at + len(b.lines))
    edge = max(cell_len(_line(a, i - a_at)) for i in beside)
    a = _reach_edge(a, edge)
    link = _LINKS[(a.right, b.left)]
    lines = []
    for i in range(max(a_at + len(a.lines), b_at + len(b.lines))):
        if i not in beside:
            lines.append(_line(a, i - a_at))
            continue
        middle = link if i == top else " " * len(link)
        lines.append((_pad(_line(a, i - a_at), edge) + middle + _line(b, i - b_at)).rstrip())
    return Block(tuple(lines), top, a.left, b.right)


def _reach_edge(block: Block, edge: int) -> Block:
    """Run the anchor row out to `edge`, so the next arrow starts there."""
    anchor = block.lines[block.row]
    gap = edge - cell_len(anchor)
    if gap <= 0:
        return block
    anchor += (" " + "-" * gap) if block.right == "box" else "-" * gap
    lines = block.lines[: block.row] + (anchor,) + block.lines[block.row + 1 :]
    return replace(block, lines=lines, right="wire")


def _line(block: Block, index: int) -> str:
    return block.lines[index] if 0 <= index < len(block.lines) else ""


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cell_len(text))
