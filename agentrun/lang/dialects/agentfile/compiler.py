"""Compiling an Agentfile to the IR: `compile`, which the registry calls (the package
says what the language is and which files are in it)."""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from agentrun.lang import grants, ir
from agentrun.lang.dialects.agentfile import NAME, agent_toml
from agentrun.lang.dialects.agentfile.goals import GoalBuilder
from agentrun.lang.dialects.agentfile.lex import Text, Token, read
from agentrun.lang.dialects.agentfile.parse import Decl, Form, form_of, parse
from agentrun.lang.dialects.agentfile.skills import SkillError, skill_prompt
from agentrun.lang.errors import Problem, SpecError, did_you_mean
from agentrun.lang.source import note


def _error(problems: list[Problem], form: Form) -> SpecError:
    said = f" (Agentfile {form} form)"
    ordered = sorted(problems, key=lambda p: (p.line, p.column))
    return SpecError([Problem(p.file, p.line, p.column, p.message + said, p.hint) for p in ordered])


POLICY_FILE = "policy.toml"  # read beside the Agentfile, as its real system does


class _Compiler:
    def __init__(self, file: str, decls: list[Decl], form: Form):
        self.file, self.decls, self.form = file, decls, form
        self.folder = os.path.dirname(os.path.abspath(file))
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.sup_global: tuple[ir.Supervision, int] = ("none", 0)
        self.goals: dict[str, Decl] = {}
        self.agents: dict[str, Decl] = {}
        self.bodies: dict[int, Text] = {}  # each declaration's text, by id(decl), FROM files read
        self.run_order: list[tuple[str, ir.Supervision | None, list[Decl]]] = []

    # ---- the plan ----

    def plan(self) -> ir.Plan:
        names = [d for d in self.decls if d.keyword == "NAME"]
        if not names:
            self.problem(1, 1, "NAME is required", "add a line NAME <workflow-name>, e.g. NAME deploy-service")
        name = names[0].name.value if names and names[0].name else os.path.basename(self.file)
        security = next((d for d in self.decls if d.keyword == "SECURITY"), None)
        self.scope = security.scope if security is not None and security.mode == "research" else ""
        params = self._params()
        self.policy = self._policy()
        self.mcp_servers = agent_toml.mcp_servers(self.folder, self.problem)
        self._declarations()
        steps = self._steps(params)
        return ir.Plan(
            name=name,
            dialect=NAME,
            source=os.path.abspath(self.file),
            spec_dir=self.folder,
            params=params,
            root=ir.Sequence(id=name, title=name, children=steps),
            agents={aid: self._agent_info(d) for aid, d in self.agents.items()},
            warnings=[str(w) for w in self.warnings],
            undefined="error",
            security=_security(security),
            research_scope=self.scope,
            **({"tool_policy": self.policy, "policy_file": self._policy_path()} if self.policy is not None else {}),
            mcp_servers=self.mcp_servers,
        )

    def _policy_path(self) -> str:
        return os.path.join(self.folder, POLICY_FILE)

    def _policy(self) -> dict[str, Any] | None:
        """The policy.toml beside the Agentfile, which its real system reads: it turns tools off
        (`enabled = false`, `default_deny`) and confines the rest."""
        if not os.path.exists(self._policy_path()):
            return None
        tables, why, hint = grants.read_policy(self._policy_path())
        if tables is None:
            self.problem(
                1, 1, f"the policy beside it cannot be read: {why}", hint or "fix the TOML, or move policy.toml away"
            )
        return tables

    def grant(self) -> ir.ToolGrant | None:
        """What every goal's agent is offered: the built-in tools the policy leaves on, and every tool
        of the MCP servers agent.toml declares."""
        mcp = [ir.McpGrant(server=server) for server in self.mcp_servers]  # agent.toml's, every tool
        return grants.grant(grants.enabled(self.policy), mcp)

    def _params(self) -> dict[str, ir.Param]:
        params: dict[str, ir.Param] = {}
        for decl in self.decls:
            for token in decl.names if decl.keyword == "INPUT" else []:
                if token.value in params:
                    self.twice(token, "input", params[token.value].line)
                default = _default(decl.default)
                params.setdefault(
                    token.value,
                    ir.Param(
                        name=token.value,
                        type="number" if isinstance(default, (int, float)) else "string",
                        required=decl.default is None,
                        default=default,
                        line=token.line,
                    ),
                )
        return params

    def _declarations(self) -> None:
        """Agents and goals by name, each one's text read, and the global and per-goal supervision."""
        pending: Decl | None = None  # a draft form's bare SUPERVISED, for the next GOAL
        for decl in self.decls:
            if decl.keyword in ("SUPERVISED", "UNSUPERVISED"):
                pending = self._bare_supervision(decl, pending)
            elif decl.keyword in ("AGENT", "GOAL", "CONVERGE"):
                if pending is not None and decl.keyword != "AGENT" and decl.sup is None:
                    decl.sup = pending.sup
                pending = None if decl.keyword != "AGENT" else pending
                self._declare(decl)
        if pending is not None:
            self.warn(pending.token, f"{pending.keyword} here comes before no GOAL and applies to nothing")
        self._no_downgrade()

    def _bare_supervision(self, decl: Decl, pending: Decl | None) -> Decl | None:
        goals_yet = any(d.keyword in ("GOAL", "CONVERGE") for d in self.decls[: self.decls.index(decl)])
        if self.form == "draft" and goals_yet:
            return decl
        if decl.keyword == "UNSUPERVISED" or decl.sup is None:
            hint = "write UNSUPERVISED at the end of a GOAL, CONVERGE, AGENT or RUN line"
            self.problem(decl.token.line, decl.token.col, "a bare UNSUPERVISED is not a global default", hint)
            return pending
        self.sup_global = (decl.sup.level, decl.token.line)
        return pending

    def _declare(self, decl: Decl) -> None:
        table = self.agents if decl.keyword == "AGENT" else self.goals
        key = decl.name.value if decl.name is not None else self._draft_id(decl)
        if decl.name is not None and key in table:
            self.twice(decl.name, decl.keyword.lower(), table[key].token.line)
        table.setdefault(key, decl)
        body = self._body(decl)
        if body is not None:
            self.bodies[id(decl)] = body

    def _draft_id(self, decl: Decl) -> str:
        """A draft goal's id from its title: "Deploy to {environment}" is deploy-to-environment."""
        title = decl.text.value if decl.text is not None else "goal"
        base = "-".join(re.findall(r"[a-z0-9]+", title.lower())) or "goal"
        key, n = base, 1
        while key in self.goals:
            n += 1
            key = f"{base}-{n}"
        return key

    def _body(self, decl: Decl) -> Text | None:
        if decl.source is None:
            return decl.text
        path = os.path.join(self.folder, decl.source.value)
        if decl.keyword == "AGENT" and os.path.isdir(path):
            return self._skill(decl.source, path)
        note(path)
        try:
            with open(path, encoding="utf-8") as fh:
                return Text.of_file(path, fh.read())
        except OSError as exc:
            hint = "the path is relative to the Agentfile's folder"
            message = f'cannot read "{decl.source.value}": {exc.strerror}'
            self.problem(decl.source.line, decl.source.col, message, hint)
            return None

    def _skill(self, source: Token, folder: str) -> Text | None:
        try:
            path, prompt = skill_prompt(folder)
        except SkillError as exc:
            self.problem(source.line, source.col, str(exc), exc.hint)
            return None
        return Text.of_file(path, prompt)

    def _no_downgrade(self) -> None:
        if self.sup_global[0] != "human":
            return
        for decl in self.decls:
            if decl.sup is not None and decl.sup.level == "none" and decl.keyword != "UNSUPERVISED":
                what = f'{decl.keyword} "{decl.name.value if decl.name else decl.token.value}"'
                hint = (
                    f"the global SUPERVISED HUMAN (line {self.sup_global[1]}) puts a person over every step; "
                    "drop UNSUPERVISED, or write SUPERVISED for a supervisor without a person"
                )
                message = f"{what} cannot be UNSUPERVISED under a global SUPERVISED HUMAN"
                self.problem(decl.sup.token.line, decl.sup.token.col, message, hint)

    def _agent_info(self, decl: Decl) -> ir.AgentInfo:
        body = self.bodies.get(id(decl))
        role = (body.value.strip().splitlines() or [""])[0].lstrip("# ").strip() if body else ""
        return ir.AgentInfo(name=decl.name.value if decl.name else "", role=role, requires=decl.requires)

    # ---- the steps ----

    def _steps(self, params: dict[str, ir.Param]) -> list[ir.Node]:
        builder = GoalBuilder(self, params)
        if self.form == "draft":
            for decl in self.decls:
                if decl.keyword == "RUN":
                    hint = 'draft-form goals run in file order; to use RUN steps, name every goal: GOAL build "…"'
                    self.problem(decl.token.line, decl.token.col, "RUN is not part of the draft form", hint)
            return [builder.goal(d, key, None) for key, d in self.goals.items()]
        return self._runs(builder)

    def _runs(self, builder: GoalBuilder) -> list[ir.Node]:
        runs = [d for d in self.decls if d.keyword == "RUN"]
        if not runs:
            self.problem(
                1, 1, "at least one RUN step is required", "add RUN main USING <goal>, <goal>: goals run in that order"
            )
        used = {t.value for run in runs for t in run.using}
        for key, decl in self.goals.items():
            if key not in used and decl.name is not None:
                self.warn(decl.name, f'goal "{key}" is in no RUN step and does not run')
        return [builder.run(run) for run in runs if run.name is not None]

    # ---- problems ----

    def problem(self, line: int, col: int, message: str, hint: str) -> None:
        self.problems.append(Problem(self.file, line, col, message, hint))

    def warn(self, token: Token, message: str) -> None:
        self.warnings.append(Problem(self.file, token.line, token.col, message, severity="warning"))

    def twice(self, token: Token, what: str, line: int) -> None:
        self.problem(token.line, token.col, f'{what} "{token.value}" is declared twice', f"the other is at line {line}")

    def unknown(self, token: Token, message: str, known: list[str], what: str) -> None:
        hint = did_you_mean(token.value, known) or (f"{what}: " + ", ".join(known) if known else f"no {what} declared")
        self.problem(token.line, token.col, message, hint)


def _security(decl: Decl | None) -> Literal["default", "paranoid", "research"]:
    if decl is None or decl.mode == "default":
        return "default"
    return "paranoid" if decl.mode == "paranoid" else "research"


def _default(token: Token | None) -> str | int | float | None:
    if token is None:
        return None
    if token.kind == "word" and re.fullmatch(r"-?\d+", token.value):
        return int(token.value)
    if token.kind == "word" and re.fullmatch(r"-?\d+\.\d+", token.value):
        return float(token.value)
    return token.value


def compile(path: str, text: str, params: set[str]) -> ir.Plan:
    """`params` is not read: every name a goal uses must be an INPUT or an earlier output."""
    statements, problems = read(path, text)
    decls, more = parse(path, statements)
    form = form_of(decls)
    if problems or more:  # a statement that did not read is not checked further: one cause, one error
        raise _error(problems + more, form)
    compiler = _Compiler(path, decls, form)
    plan = compiler.plan()
    if compiler.problems:
        raise _error(compiler.problems, form)
    return plan
