"""Phrases that several kinds' views and the walkers share, so a step reads the same wherever it appears."""

from __future__ import annotations

import re
import string
from collections.abc import Callable

from agentrun.lang import ir
from agentrun.lang.amounts import limits_text

PREVIEW_LINES = 6  # of each prompt and agent input a dry run shows
_BRACES = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def sub_tag(tag: str, index: int) -> str:
    """The label of a step's index-th agent: 2 -> 2a, 2b; one level deeper 2a -> 2a1, 2a2."""
    if tag[-1].isdigit():
        return tag + (string.ascii_lowercase[index] if index < 26 else f"_{index + 1}")
    return f"{tag}{index + 1}"


def bare(text: str) -> str:
    """A condition or reference without its {{ }}: what a reader needs in a figure."""
    return _BRACES.sub(r"\1", text).strip()


def agent_name(node: ir.NodeBase, agents: dict[str, ir.AgentInfo]) -> str:
    """A declared agent's name, else the node's title or id."""
    agent = agents.get(getattr(node, "agent", ""))
    return (agent.name if agent else "") or node.label


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def undo_who(comp: ir.NodeBase, agents: dict[str, ir.AgentInfo]) -> str:
    """Who runs a compensation: a provider call, or an agent by its declared name and id."""
    if isinstance(comp, ir.Provider):
        return f"provider {comp.call.provider}.{comp.call.method}"
    agent_id = getattr(comp, "agent", comp.id)
    agent = agents.get(agent_id)
    name = agent.name if agent else ""
    return f"{name} ({agent_id})" if name else agent_id


def marks(node: ir.NodeBase, agents: dict[str, ir.AgentInfo]) -> list[str]:
    """What guards, undoes and limits a node, in a few words each."""
    found = []
    if node.gate is not None:
        found.append("needs approval" if node.gate.approval else f"asks a person first: {node.gate.id}")
    if node.compensation is not None:
        found.append("undo: " + undo_who(node.compensation, agents))
    if node.budget is not None:
        found.append("budget " + limits_text(node.budget))
    return found


def stored(node: ir.NodeBase, fmt: str | None = None) -> str:
    """Where later steps find a step's output."""
    if not node.step:
        return ""
    where = f"stored as {node.store_as}" if node.store_as else f"in steps.{node.id}.output"
    return f"; output {where}" + (f" ({fmt})" if fmt else "")


def kept(node: ir.NodeBase) -> str:
    """Where a dry run says a step's value goes."""
    return f"stored as {node.store_as}" if node.store_as else f"as steps.{node.id}.output"


def step_timeout(node: ir.NodeBase) -> str:
    return f"; step timeout {duration(node.timeout_s)}" if node.timeout_s else ""


def policy_text(node: ir.NodeBase, who: Callable[[ir.Node], str]) -> str:
    """Retries, failure policy and timeout, where they differ from a single try that stops the run."""
    parts = []
    if node.retry.attempts > 1:
        backoff = f", {node.retry.backoff} backoff" if node.retry.backoff != "none" else ""
        parts.append(f"up to {node.retry.attempts} attempts{backoff}")
    if node.on_failure == "skip":
        parts.append("on failure: skipped, the run goes on")
    elif node.on_failure == "fallback" and node.fallback is not None:
        parts.append(f"on failure: falls back to {who(node.fallback)}")
    elif node.retry.attempts > 1:
        parts.append("on failure: the run stops")
    if node.timeout_s:
        parts.append(f"timeout {duration(node.timeout_s)}")
    return "; ".join(parts)


def duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    secs += seconds - int(seconds)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs:g}s" if secs else "")
    return text or "0s"


def preview(pad: str, text: str, limit: int = PREVIEW_LINES) -> list[str]:
    """The first lines of a prompt as a dry run shows it."""
    lines = text.strip("\n").splitlines()
    shown = [f"{pad}prompt ({len(lines)} line{'s' if len(lines) != 1 else ''}):"]
    shown += [f"{pad}  | {line}".rstrip() for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"{pad}  | … {len(lines) - limit} more lines")
    return shown


def labelled(pad: str, label: str, text: str, limit: int = PREVIEW_LINES) -> list[str]:
    """`label` then text, continued under it, cut after `limit` lines."""
    lines = text.splitlines() or [""]
    out = [f"{pad}{label}{lines[0]}"] + [f"{pad}{' ' * len(label)}{line}" for line in lines[1:limit]]
    if len(lines) > limit:
        out.append(f"{pad}{' ' * len(label)}… {len(lines) - limit} more lines")
    return [line.rstrip() for line in out]
