"""A pipeline's references and step order: every {{…}} checked before the run, dependencies
collected, cycles named, and the steps put in topological order (spec order breaks ties).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.lang import expressions, ir, scope
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.errors import did_you_mean
from agentrun.lang.yamlpos import PosDict, position, text_line

if TYPE_CHECKING:
    from agentrun.lang.dialects.pipeline.compiler import RawStep, RawWorkflow

# Names a template may read besides inputs and store_as names: every built-in (spec.scope) that a
# pipeline fills in; `item`, `index` and `feedback` only where a map's or a loop's agent runs.
LOCALS = scope.names("core", "data", "map", "loop")
# Locals set only where some agents run: a map's agent gets item and index, a loop's agent feedback.
SCOPED = {name: scope.BUILTINS[name].where for name in scope.names("map", "loop")}
_NOWHERE = frozenset(SCOPED)
# A reference to a gate's answer (`human.ID`), told apart from steps.ID until the step's own
# dependencies are known: a step may read the answer to its own approval, asked before it runs.
_GATE = "human:"
OUTPUT_HINT = "'output' is set only in compensate: (the output being undone); elsewhere read steps.ID.output"


class StepGraph(Builder):
    def __init__(self, file: str, data: PosDict, raw: RawWorkflow):
        super().__init__(file, data)
        self.raw = raw
        self.ids = [s.id for s in raw.steps]
        self.inputs = {i.name for i in raw.inputs}
        self.keys = {s.id: {b.output_key or b.agent for b in s.parallel or []} for s in raw.steps}
        self.stored = self._stored()
        self.branches = self._branches()
        # A step with prompt: but no type: is a human step its author forgot to mark (one error, not two).
        self.gates = [s.id for s in raw.steps if s.type == "human" or s.prompt is not None or s.approval is not None]
        places: dict[str, set[str]] = {}
        for step in raw.steps:
            for agent, place in self._runs(step):
                places.setdefault(agent, set()).add(place)
        agent_deps = {
            aid: self._template(a.prompt, ("workflow", "agents", aid, "prompt"), _unset(places.get(aid, set())))
            for aid, a in raw.agents.items()
        }
        deps = {s.id: self._step_deps(i, s, agent_deps) for i, s in enumerate(raw.steps)}
        self.order = self._order(deps) if not self.problems else []

    # -- names a template may use -----------------------------------------------------------

    def _stored(self) -> dict[str, str]:
        stored: dict[str, str] = {}
        for i, step in enumerate(self.raw.steps):
            name = step.output.store_as
            if not name:
                continue
            where = ("workflow", "steps", i, "output", "store_as")
            shadowed = scope.shadowing(name)
            if shadowed:
                self.problem(
                    where, f"store_as '{name}' would hide a name templates read: {shadowed}", "pick another name"
                )
            elif name in stored:
                self.problem(
                    where,
                    f"steps '{stored[name]}' and '{step.id}' both store_as '{name}'",
                    "each stored name must be unique",
                )
            stored.setdefault(name, step.id)
        return stored

    def _branches(self) -> dict[str, str]:
        """Steps named by a condition run only inside it: branch step id -> its conditional."""
        owners: dict[str, str] = {}
        for i, step in enumerate(self.raw.steps):
            for flag in ("true", "false"):
                target = getattr(step.condition, flag) if step.condition else None
                if target not in self.ids:
                    continue
                if target == step.id:
                    self.problem(
                        ("workflow", "steps", i, "condition", flag),
                        f"the condition of '{step.id}' names its own step",
                        "name another step, or an agent id to run",
                    )
                    continue
                if target in owners and owners[target] != step.id:
                    self.problem(
                        ("workflow", "steps", i, "condition", flag),
                        f"step '{target}' is already the branch of condition '{owners[target]}'",
                        "a step can be the branch of one condition; point the other at an agent id",
                    )
                owners.setdefault(target, step.id)
        return owners

    # -- references -------------------------------------------------------------------------

    def _template(
        self, source: str, path: tuple, unset: frozenset[str] = _NOWHERE, allowed: frozenset[str] = frozenset()
    ) -> set[str]:
        try:
            refs = expressions.template_references(source)
        except expressions.ExpressionError as exc:
            self.problem(
                path, f"template syntax: {exc}", "write references as {{ inputs.name }} or {{ steps.ID.output }}"
            )
            return set()
        base = text_line(self.data, path) or position(self.data, path)[0]
        return {
            d for ref, line in refs if ref[0] not in allowed and (d := self._ref(ref, path, base + line - 1, unset))
        }

    def _expression(self, source: str, path: tuple) -> set[str]:
        try:
            refs = expressions.references(source)  # compiles, so it raises on any refused construct
        except expressions.ExpressionError as exc:
            self.problem(path, str(exc), "conditions use ==, !=, <, <=, >, >=, and, or, not, in and literals")
            return set()
        line = text_line(self.data, path) or position(self.data, path)[0]
        return {d for ref in refs if (d := self._ref(ref, path, line, _NOWHERE))}

    def _reference(self, source: str, path: tuple) -> set[str]:
        """`over:` and `feedback_path:` name one value, which the run reads as data, not as text."""
        bare = "{{" not in source and expressions.is_reference("{{ " + source + " }}")
        if not (expressions.is_reference(source) or bare):
            example = "steps.split.output.chunks" if path[-1] == "over" else "steps.review.output.feedback"
            self.problem(
                path, f"'{source}' must be a single reference", f"write one reference, like {{{{ {example} }}}}"
            )
            return set()
        return self._expression(source, path)

    def _ref(self, ref: tuple, path: tuple, line: int, unset: frozenset[str]) -> str | None:
        """The step a reference depends on, if any; a Problem if it names nothing."""
        head, text = ref[0], ".".join(str(p) for p in ref)
        if head == "inputs":
            if len(ref) > 1 and ref[1] not in self.inputs:
                self.problem(
                    path,
                    f"undefined reference '{text}': no input '{ref[1]}'",
                    did_you_mean(str(ref[1]), self.inputs) or "declare it under inputs:",
                    line,
                )
            return None
        if head == "steps":
            return self._step_ref(ref, path, line) if len(ref) > 1 else None
        if head == "human":
            return self._gate_ref(ref, path, line) if len(ref) > 1 else None
        if head in self.stored:
            return self.stored[head]
        if head in unset:
            self.problem(
                path,
                f"'{head}' is not set here: only {_SCOPE_OWNER[SCOPED[head]]} gets it",
                _SCOPE_HINT[SCOPED[head]],
                line,
            )
            return None
        if head in LOCALS:
            return None
        if head in self.inputs or head in self.ids:
            form = f"inputs.{text}" if head in self.inputs else f"steps.{head}.output"
            self.problem(path, f"undefined reference '{text}'", f"did you mean '{form}'?", line)
        elif head == "output":
            self.problem(path, f"undefined reference '{text}'", OUTPUT_HINT, line)
        else:
            known = LOCALS | set(self.stored)
            self.problem(
                path,
                f"undefined reference '{text}'",
                did_you_mean(str(head), known) or "use inputs.NAME, steps.ID.output or a store_as name",
                line,
            )
        return None

    def _step_ref(self, ref: tuple, path: tuple, line: int) -> str | None:
        step, text = str(ref[1]), ".".join(str(p) for p in ref)
        if step not in self.ids:
            self.problem(
                path,
                f"undefined reference '{text}': no step '{step}'",
                did_you_mean(step, self.ids) or "steps: " + ", ".join(self.ids),
                line,
            )
            return None
        if len(ref) > 2 and ref[2] not in ("output", "outputs"):
            self.problem(path, f"undefined reference '{text}'", f"write steps.{step}.output", line)
        elif len(ref) > 3 and ref[2] == "outputs" and self.keys[step] and ref[3] not in self.keys[step]:
            self.problem(
                path,
                f"undefined reference '{text}': step '{step}' has no output_key '{ref[3]}'",
                did_you_mean(str(ref[3]), self.keys[step]) or "its keys: " + ", ".join(sorted(self.keys[step])),
                line,
            )
        return step

    def _gate_ref(self, ref: tuple, path: tuple, line: int) -> str | None:
        gate = str(ref[1])
        if gate in self.gates:
            return _GATE + gate
        hint = did_you_mean(gate, self.gates) or (
            "gates: " + ", ".join(self.gates)
            if self.gates
            else "no step asks a person: add a type: human step, or approval: true on a step"
        )
        self.problem(path, f"undefined gate '{gate}'", hint, line)
        return None

    # -- dependencies and order -------------------------------------------------------------

    def _step_deps(self, i: int, step: RawStep, agent_deps: dict[str, set[str]]) -> set[str]:
        path = ("workflow", "steps", i)
        deps: set[str] = set()
        if step.input is not None and step.input.strip().lower() == ir.ALL_PRIOR:
            deps |= set(self.ids[:i])
        elif step.input is not None:
            # A loop's input is filled in for its agent, each time with the latest feedback.
            unset = _NOWHERE - {"feedback"} if step.type == "loop" else _NOWHERE
            deps |= self._template(step.input, path + ("input",), unset)
        for n, branch in enumerate(step.parallel or []):
            if branch.input is not None:
                deps |= self._template(branch.input, path + ("parallel", n, "input"))
        if step.condition:
            deps |= self._expression(step.condition.eval, path + ("condition", "eval"))
        if step.map:
            deps |= self._reference(step.map.over, path + ("map", "over"))
        for agent in self._agents_run_by(step):
            deps |= agent_deps.get(agent, set())
        deps |= self._human_deps(step, path)
        if step.approval is not None:
            deps.discard(_GATE + step.id)  # its approval is asked before it runs
        deps = {d.removeprefix(_GATE) for d in deps}
        if step.id in deps:
            self.problem(
                path,
                f"step '{step.id}' reads its own output (steps.{step.id})",
                "a step can read the output of other steps only; a loop's feedback_path is the exception",
            )
        if step.loop and step.loop.feedback_path:
            # The loop's own id here is its validator's latest verdict, so it is no dependency.
            deps |= self._reference(step.loop.feedback_path, path + ("loop", "feedback_path")) - {step.id}
        return deps - {step.id}

    def _human_deps(self, step: RawStep, path: tuple) -> set[str]:
        """What a step's question, approval prompt and compensation read. A compensation runs after
        the run failed, in no order of the steps', so its references are checked but order nothing."""
        deps = self._template(step.prompt, path + ("prompt",)) if step.prompt is not None else set()
        if step.approval is not None and step.approval.prompt is not None:
            deps |= self._template(step.approval.prompt, path + ("approval", "prompt"))
        if step.compensate is not None:
            # `compensate: "text"` is its prompt, where the lines of the text are counted from.
            short = isinstance(self.data["workflow"]["steps"][path[-1]].get("compensate"), str)
            where = path + (("compensate",) if short else ("compensate", "prompt"))
            self._template(step.compensate.prompt, where, allowed=frozenset({"output"}))
        return deps

    def _agents_run_by(self, step: RawStep) -> set[str]:
        return {agent for agent, _ in self._runs(step)}

    def _runs(self, step: RawStep) -> list[tuple[str, str]]:
        """(agent, place) for each agent a step runs, fallbacks included (they run in the place of the
        agent they stand in for): "map" for a map's agent, "loop" for a loop's agent, else "step"."""
        runs = [(step.agent, "step")] if step.agent and step.type == "sequential" else []
        runs += [(b.agent, "step") for b in step.parallel or []]
        if step.loop:
            runs += [(step.loop.agent, "loop"), (step.loop.validator, "step")]
        if step.map:
            runs += [(step.map.agent, "map")] + ([(step.map.reduce, "step")] if step.map.reduce else [])
        if step.condition:
            runs += [
                (t, "step")
                for t in (step.condition.true, step.condition.false)
                if t in self.raw.agents and t not in self.ids
            ]
        fallbacks = []
        for agent, place in runs:
            other = self.raw.agents[agent].retry.fallback_agent if agent in self.raw.agents else None
            if other:
                fallbacks.append((other, place))
        return runs + fallbacks

    def _order(self, deps: dict[str, set[str]]) -> list[str]:
        graph = {s: set(d) for s, d in deps.items()}
        for target, owner in self.branches.items():
            graph[owner].add(target)  # a conditional's output is its branch's
        cycle = _find_cycle(graph, self.ids)
        if cycle:
            i = self.ids.index(cycle[0])
            self.problem(
                ("workflow", "steps", i),
                "circular dependency between steps: " + " → ".join(cycle),
                "a step can only read the output of steps that do not read its own",
            )
            return []
        top = [s for s in self.ids if s not in self.branches]
        needs = {s: {self._owner(d) for d in _closure(graph, s)} - {s} for s in top}
        order: list[str] = []
        while len(order) < len(top):
            ready = next(s for s in top if s not in order and needs[s] <= set(order))
            order.append(ready)
        return order

    def _owner(self, step: str) -> str:
        while step in self.branches:
            step = self.branches[step]
        return step


_SCOPE_OWNER = {"map": "a map's agent (map: agent:)", "loop": "a loop's agent (loop: agent:)"}
_SCOPE_HINT = {
    "map": "read {{ input }} instead, which every agent gets, or give the map its own agent",
    "loop": "give the loop its own agent, or leave {{ feedback }} out: an agent that does not place "
    "it gets the feedback appended",
}


def _unset(places: set[str]) -> frozenset[str]:
    """The scoped locals an agent cannot read, because at least one place it runs does not set them."""
    return frozenset(name for name, place in SCOPED.items() if places - {place})


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    """Everything `start` depends on, through the branches it contains."""
    seen, stack = set(), [start]
    while stack:
        for dep in graph[stack.pop()]:
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def _find_cycle(graph: dict[str, set[str]], ids: list[str]) -> list[str] | None:
    """The first cycle found, as a closed path of step ids (a → b → a)."""
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        trail.append(node)
        for dep in sorted(graph[node], key=ids.index):
            if state.get(dep) == 1:
                return trail[trail.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        state[node] = 2
        trail.pop()
        return None

    for node in ids:
        if node not in state and (found := visit(node)):
            return found
    return None
