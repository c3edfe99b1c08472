"""An Agentfile's RUN steps and goals as IR nodes, in the order they run, so that a reference in a
goal's text can only name an input or the output of something that ran before it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.lang import ir
from agentrun.lang.dialects.agentfile.lex import Text, Token
from agentrun.lang.dialects.agentfile.parse import Decl
from agentrun.lang.dialects.agentfile.refs import literal, template

if TYPE_CHECKING:
    from agentrun.lang.dialects.agentfile.compiler import _Compiler

CONVERGED = "CONVERGED"


class GoalBuilder:
    def __init__(self, compiler: _Compiler, params: dict[str, ir.Param]):
        self.c = compiler
        self.params = params
        self.known: dict[str, str] = {name: "an input" for name in params}
        self.later: dict[str, str] = {}
        for key, decl in [*compiler.goals.items(), *compiler.agents.items()]:
            for token in decl.outputs:
                self.later.setdefault(token.value, f'{decl.keyword.lower()} "{key}"')

    def run(self, run: Decl) -> ir.Node:
        """A RUN step: its goals one after another, in the order its USING names them."""
        assert run.name is not None
        step = run.name.value
        children = []
        for token in run.using:
            decl = self.c.goals.get(token.value)
            if decl is None:
                self.c.unknown(token, f'undefined goal "{token.value}" in RUN step', list(self.c.goals), "goals")
                continue
            children.append(self.goal(decl, f"{step}.{token.value}", run))
        return ir.Sequence(id=step, title=f"RUN {step}", line=run.token.line, children=children)

    def goal(self, decl: Decl, node_id: str, run: Decl | None) -> ir.Node:
        """One goal: a checkpoint task, or its agents in parallel and a task merging their outputs."""
        sup = self._supervision(decl, run)
        title = decl.name.value if decl.name is not None else (decl.text.value if decl.text else node_id)
        prompt = self._prompt(decl)
        agents = [a for a in (self._agent(t) for t in decl.using) if a is not None]
        if not agents:
            node = self._task(decl, node_id, title, prompt, sup)
        else:
            node = self._fan_out(decl, node_id, title, prompt, sup, agents)
        self.known.update({t.value: f'an output of goal "{title}"' for t in decl.outputs})
        return node

    def _task(
        self, decl: Decl, node_id: str, title: str, prompt: str, sup: ir.Supervision, spawn: bool = True
    ) -> ir.Task:
        """A goal's own task. Its agent may start sub-agents, as every goal's can in the real system;
        the agents of a USING clause and the task merging their outputs may not."""
        return ir.Task(
            id=node_id,
            title=title,
            line=decl.token.line,
            agent="default",
            prompt=prompt,
            system=self._research() or None,
            protocol="checkpoint",
            outputs=[t.value for t in decl.outputs],
            supervision=sup,
            loop_until=self._loop(decl),
            spawn=spawn,
            grant=self.c.grant(),
        )

    def _fan_out(
        self, decl: Decl, node_id: str, title: str, prompt: str, sup: ir.Supervision, agents: list[Decl]
    ) -> ir.Sequence:
        """The agents work on the goal at once; then the default agent merges what they gave."""
        together = ir.Parallel(
            id=f"{node_id}.agents",
            title=f"{title}: agents",
            line=decl.token.line,
            step=True,  # kept as steps.<id>.output, which the merging task is given
            children=[self._agent_task(a, node_id, prompt, sup) for a in agents],
        )
        for agent in agents:
            self.known.update({t.value: f'an output of agent "{_name(agent)}"' for t in agent.outputs})
        merge = self._task(decl, f"{node_id}.synthesize", f"{title}: synthesize", "", sup, spawn=False)
        names = ", ".join(_name(a) for a in agents)
        merge.prompt = f"Merge the outputs of {literal(names)} into one answer to: {prompt}"
        merge.input = '{{ steps["' + together.id + '"].output }}'
        return ir.Sequence(id=node_id, title=title, line=decl.token.line, children=[together, merge])

    def _agent_task(self, agent: Decl, node_id: str, prompt: str, sup: ir.Supervision) -> ir.Task:
        body = self.c.bodies.get(id(agent))
        system = self._text(body).strip() if body is not None else ""
        research = self._research()
        return ir.Task(
            id=f"{node_id}.{_name(agent)}",
            title=_name(agent),
            line=agent.token.line,
            agent=_name(agent),
            prompt=prompt,
            system="\n\n".join(part for part in (system, research) if part) or None,
            protocol="checkpoint",
            outputs=[t.value for t in agent.outputs],
            supervision=agent.sup.level if agent.sup is not None else sup,
            output_key=_name(agent),
            grant=self.c.grant(),
        )

    def _agent(self, token: Token) -> Decl | None:
        decl = self.c.agents.get(token.value)
        if decl is None:
            message = f'undefined agent "{token.value}" in USING clause'
            self.c.unknown(token, message, list(self.c.agents), "agents")
        return decl

    def _supervision(self, decl: Decl, run: Decl | None) -> ir.Supervision:
        """The goal's own modifier, else its RUN step's, else the global default."""
        for own in (decl.sup, run.sup if run is not None else None):
            if own is not None:
                return own.level
        return self.c.sup_global[0]

    def _prompt(self, decl: Decl) -> str:
        body = self.c.bodies.get(id(decl))
        if body is None and decl.substeps:
            # A goal with no text of its own: the lines under it are its text.
            return "\n".join(self._steps(decl.substeps)).strip()
        text = self._text(body).strip() if body is not None else ""
        if decl.substeps:
            steps = [f"{i}. {step}" for i, step in enumerate(self._steps(decl.substeps), 1)]
            text += "\n\nDo these steps in order:\n" + "\n".join(steps)
        return text

    def _steps(self, lines: list[Text]) -> list[str]:
        """The sub-steps; a line indented deeper than the first belongs to the step above it, kept
        as indented (the seed's `spawn_agents:` list of tasks is one step)."""
        base = lines[0].at(0)[1]
        steps: list[str] = []
        for line in lines:
            deeper = line.at(0)[1] - base
            if deeper > 0 and steps:
                steps[-1] += "\n" + " " * (deeper + 3) + self._text(line)
            else:
                steps.append(self._text(line))
        return steps

    def _text(self, text: Text) -> str:
        # Text read FROM a file (an agent's or a goal's prompt) warns of a name it does not know.
        read = text.file != self.c.file
        return template(
            text, self.known, self.later, self.c.form == "draft", self.c.problems, self.c.warnings if read else None
        )

    def _loop(self, decl: Decl) -> ir.LoopUntil | None:
        token = decl.within
        if token is None:
            return None
        if token.kind != "var":
            return ir.LoopUntil(status=CONVERGED, max_iterations=int(token.value))
        if token.value not in self.params:
            self.c.unknown(token, f"undefined reference ${token.value}", list(self.params), "inputs")
        return ir.LoopUntil(status=CONVERGED, max_iterations_param=token.value)

    def _research(self) -> str:
        if not self.c.scope:
            return ""
        return f"Security research, authorized in this scope only: {literal(self.c.scope)}. Do nothing outside it."


def _name(decl: Decl) -> str:
    return decl.name.value if decl.name is not None else ""
