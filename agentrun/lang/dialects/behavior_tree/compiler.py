"""Compiling a behaviour tree file to the IR: `compile`, which the registry calls (the package
says what the language is and which files are in it)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import ValidationError

from agentrun.lang import ir
from agentrun.lang.dialects.behavior_tree import NAME, NODE_KEYS
from agentrun.lang.dialects.behavior_tree.keys import HINTS, RawTop, RawWrapper, explained, known_keys
from agentrun.lang.dialects.behavior_tree.nodes import NodeCompiler, Slot, Walk
from agentrun.lang.dialects.behavior_tree.refs import Located, Refs, is_ref, parse
from agentrun.lang.dialects.common_keys import budget_of
from agentrun.lang.errors import Problem, SpecError
from agentrun.lang.schema_errors import problems_from
from agentrun.lang.yamlpos import PosDict, plain, position

_WRAPPER_NEEDS = {
    "name": "add name: — the tree's name (runs are named after it)",
    "version": "add version: 1.0.0",
    "tree": "add tree: with the top node (type: sequence, name: ..., children: [...])",
}


class _TreeFile:
    def __init__(self, path: str, data: PosDict):
        self.path, self.data = path, data
        self.here = Located(data, path)
        self.wrapped = "tree" in data or not NODE_KEYS & set(data)
        self.refs = Refs(path, data)
        where = "at the top level, beside tree:" if self.wrapped else "on the tree's top node (the file's root)"
        self.nodes = NodeCompiler(self.refs, f"put it {where}")

    def plan(self) -> ir.Plan:
        name, version, description, top, root = self._wrapper() if self.wrapped else self._bare()
        memory, constants = self._state(top)
        running = self._running(top)
        if self.refs.problems:
            raise SpecError(self.refs.problems)
        assert root is not None  # without a root node there is a problem
        path = os.path.abspath(self.path)
        return ir.Plan(
            name=name or root.title,
            description=description,
            version=version,
            dialect=NAME,
            source=path,
            spec_dir=os.path.dirname(path),
            root=root,
            budget=budget_of(top.budget) if top else None,
            memory=memory,
            constants=constants,
            running=running,
            warnings=[str(w) for w in self.nodes.undeclared(constants)],
        )

    def _wrapper(self) -> tuple[str, str, str, RawTop | None, ir.Node | None]:
        raw = None
        try:
            raw = RawWrapper.model_validate(self.data)
        except ValidationError as exc:
            self.refs.problems += problems_from(exc, self.data, self.path, RawWrapper, HINTS)
        for key, hint in _WRAPPER_NEEDS.items():
            if key not in self.data and not explained(key, self.data, known_keys(RawWrapper)):
                self._at((), f"the tree file has no {key}:", hint)
        root = None
        if "tree" in self.data:
            walk = Walk(label=self.refs.label(self.path, "/tree"))
            root = self.nodes.node(Slot(self.here, ("tree",)), self.data["tree"], walk, set())
        if raw is None:
            return "", "", "", None, root
        return raw.name or "", raw.version or "", raw.description, raw, root

    def _bare(self) -> tuple[str, str, str, RawTop | None, ir.Node | None]:
        """A file whose root is a node: its top keys are the tree's, unless it is a $ref (then
        they are in a fragment, where they are refused as misplaced)."""
        walk = Walk(label=self.refs.label(self.path))
        root = self.nodes.node(Slot(self.here, ()), self.data, walk, set(), is_top=not is_ref(self.data))
        return "", "", "", self.nodes.top, root

    def _state(self, top: RawTop | None) -> tuple[dict[str, Any], dict[str, Any]]:
        state = top.state if top else None
        if state is None:
            return {}, {}
        for ours, theirs, alias in (("var", "local", "local"), ("const", "global_", "global")):
            if getattr(state, ours) is not None and getattr(state, theirs) is not None:
                hint = f"{alias}: is abtree's name for {ours}: (the same scope); keep one"
                self._at(("state", alias), f"state has both {ours}: and {alias}:", hint)
        memory = plain(state.var or state.local or {})
        constants = plain(state.const or state.global_ or {})
        for name in sorted(set(memory) & set(constants)):
            hint = f"a $VAR write to '{name}' would be refused as a write to a constant; rename one of them"
            self._at(("state",), f"'{name}' is both a $VAR and a $CONST name", hint)
        return memory, constants

    def _running(self, top: RawTop | None) -> ir.Running:
        default = ir.Running()
        raw = top.running if top else None
        if raw is None:
            return default
        wait = self.nodes.duration(self.here, raw.wait, ("running", "wait")) or default.wait_s
        most = self.nodes.duration(self.here, raw.max_wait, ("running", "max_wait")) or default.max_wait_s
        if wait > most:
            key = "max_wait" if raw.max_wait is not None else "wait"
            hint = "the wait doubles after each ask, up to max_wait; make max_wait at least as long as wait"
            self._at(("running", key), f"running: wait ({wait:g}s) is longer than max_wait ({most:g}s)", hint)
        return ir.Running(wait_s=wait, max_wait_s=most, max_asks=raw.max_asks or default.max_asks)

    def _at(self, path: tuple, message: str, hint: str) -> None:
        line, column = position(self.data, path)
        self.refs.problems.append(Problem(self.path, line, column, message, hint))


def compile(path: str, text: str, params: set[str]) -> ir.Plan:
    """A tree reads no params: what its steps read is the blackboard ($VAR, $CONST)."""
    data = parse(path, text)
    if not isinstance(data, PosDict):
        hint = "start with name:, version: and tree:, or with the top node's type:, name: and children:"
        raise SpecError([Problem(path, 1, 1, "a behaviour tree file is a mapping", hint)])
    return _TreeFile(path, data).plan()
