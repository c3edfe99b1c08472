"""An Agentfile's statements read by the grammar into declarations, one per statement.

Both forms share the grammar; the draft form adds a GOAL with only a quoted title, sub-steps under
a goal and several names on one INPUT line. Which form a file is in is decided from what is read
here (`form_of`), before the declarations are compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NoReturn

from agentrun.lang import ir
from agentrun.lang.dialects.agentfile.lex import IDENT, STATEMENTS, Statement, Text, Token
from agentrun.lang.errors import Problem, did_you_mean

Form = Literal["line", "draft"]
_AFTER_BODY = ("USING", "SUPERVISED", "UNSUPERVISED", "HUMAN")
_SUPERVISION = ("SUPERVISED", "UNSUPERVISED")


@dataclass(frozen=True)
class Sup:
    """A supervision modifier as written, kept with its token to say where it is."""

    level: ir.Supervision
    token: Token


@dataclass
class Decl:
    """One statement: `keyword` says which; the fields its grammar has are filled in."""

    keyword: str
    token: Token
    name: Token | None = None
    names: list[Token] = field(default_factory=list)  # INPUT a, b
    default: Token | None = None
    text: Text | None = None  # an inline or \"\"\" string
    source: Token | None = None  # FROM path
    outputs: list[Token] = field(default_factory=list)
    using: list[Token] = field(default_factory=list)
    within: Token | None = None
    requires: str = ""
    sup: Sup | None = None
    substeps: list[Text] = field(default_factory=list)
    mode: str = ""  # SECURITY's
    scope: str = ""  # SECURITY research's


class _Stop(Exception):
    def __init__(self, at: tuple[int, int], message: str, hint: str):
        self.at, self.message, self.hint = at, message, hint


def parse(file: str, statements: list[Statement]) -> tuple[list[Decl], list[Problem]]:
    """Each statement's declaration; a statement that does not fit the grammar gives one problem."""
    decls, problems = [], []
    for statement in statements:
        try:
            decls.append(_Cursor(statement).statement())
        except _Stop as stop:
            problems.append(Problem(file, stop.at[0], stop.at[1], stop.message, stop.hint))
    return decls, problems


def form_of(decls: list[Decl]) -> Form:
    """The draft form has goals named only by a quoted title, sub-steps, or several inputs on a line."""
    for decl in decls:
        if decl.keyword == "GOAL" and (decl.name is None or decl.substeps):
            return "draft"
        if decl.keyword == "INPUT" and len(decl.names) > 1:
            return "draft"
    return "line"


class _Cursor:
    def __init__(self, statement: Statement):
        self.tokens, self.end, self.pos = statement.tokens, statement.end, 0
        self.decl = Decl(statement.tokens[0].value, statement.tokens[0], substeps=statement.substeps)

    def statement(self) -> Decl:
        head = self.take()
        keyword = head.value
        if head.kind != "word" or keyword not in STATEMENTS:
            hint = did_you_mean(keyword.upper(), STATEMENTS) or "a statement starts with " + ", ".join(STATEMENTS)
            raise _Stop((head.line, head.col), f'unknown statement "{keyword}"', hint)
        getattr(self, "_" + keyword.lower())()
        self.finish()
        return self.decl

    # ---- the statements ----

    def _name(self) -> None:
        self.decl.name = self.ident("NAME needs the workflow's name", "NAME deploy-service")

    def _input(self) -> None:
        self.decl.names = self.idlist("INPUT needs a name", 'INPUT version DEFAULT "1.0"')
        if self.word("DEFAULT"):
            self.decl.default = self.value()

    def _agent(self) -> None:
        self.decl.name = self.ident(
            "AGENT needs a name", 'AGENT reviewer "You review code." or AGENT reviewer FROM reviewer.md'
        )
        self.body('AGENT needs its prompt: a "string" or FROM path')
        self.outputs()
        if self.word("REQUIRES"):
            self.decl.requires = self.string("REQUIRES needs a capability in quotes", 'REQUIRES "reasoning-heavy"')
        self.supervision()

    def _goal(self) -> None:
        nxt = self.peek()
        if nxt is not None and nxt.kind == "word" and nxt.value != "FROM":
            self.decl.name = self.ident("GOAL needs a name", 'GOAL build "Build the service"')
        if not (self.decl.substeps and self._ends_head()):
            self.body('GOAL needs its text: a "string" or FROM path')
        self.outputs()
        self.using()
        self.supervision()

    def _converge(self) -> None:
        self.decl.name = self.ident("CONVERGE needs a name", 'CONVERGE polish "Polish the draft" WITHIN 5')
        self.body('CONVERGE needs its text: a "string" or FROM path')
        self.outputs()
        self.using()
        if not self.word("WITHIN"):
            self.missing("CONVERGE needs WITHIN and the most rounds it may take", "… WITHIN 5, or WITHIN $rounds")
        token = self.take("WITHIN needs a number of rounds or an input: WITHIN 5, WITHIN $rounds")
        if not (token.kind == "var" or (token.kind == "word" and token.value.isdigit() and int(token.value) > 0)):
            raise _Stop(
                (token.line, token.col), f"WITHIN takes a whole number above 0 or $input, not {token.value}", "WITHIN 5"
            )
        self.decl.within = token
        self.supervision()

    def _run(self) -> None:
        self.decl.name = self.ident("RUN needs a step name", "RUN main USING build, deploy")
        if not self.word("USING"):
            self.missing("RUN needs USING and the goals it runs", "RUN main USING build, deploy")
        self.decl.using = self.idlist("USING needs the goals to run", "RUN main USING build, deploy")
        self.supervision()

    def _supervised(self) -> None:
        self.pos = 0
        self.supervision()

    def _unsupervised(self) -> None:
        self._supervised()

    def _security(self) -> None:
        token = self.take('SECURITY needs a mode: default, paranoid, or research "scope"')
        modes = ("default", "paranoid", "research")
        if token.kind != "word" or token.value not in modes:
            hint = (
                did_you_mean(token.value, modes) or 'SECURITY default, SECURITY paranoid or SECURITY research "scope"'
            )
            raise _Stop((token.line, token.col), f'unknown SECURITY mode "{token.value}"', hint)
        self.decl.mode = token.value
        if token.value == "research":
            hint = 'SECURITY research "authorized testing of our staging servers"'
            self.decl.scope = self.string("SECURITY research needs its scope in quotes", hint)

    # ---- the parts ----

    def body(self, need: str) -> None:
        token = self.peek()
        if token is not None and token.kind == "string":
            self.decl.text = self.take().text
        elif self.word("FROM"):
            path = self.take("FROM needs a path")
            if path.kind not in ("word", "string"):
                raise _Stop((path.line, path.col), "FROM needs a path", "FROM agents/reviewer.md")
            self.decl.source = path
        else:
            self.missing(need, 'GOAL build "Build the service", or GOAL build FROM goals/build.md')

    def _ends_head(self) -> bool:
        """Nothing but outputs, USING or supervision follows: a draft goal whose indented lines
        under it are its text (`GOAL research` then the lines of what to research)."""
        token = self.peek()
        return token is None or token.kind == "arrow" or (token.kind == "word" and token.value in _AFTER_BODY)

    def outputs(self) -> None:
        if self.kind("arrow"):
            self.decl.outputs = self.idlist("-> needs the names of the outputs", "-> summary, risks")

    def using(self) -> None:
        if self.word("USING"):
            self.decl.using = self.idlist("USING needs agent names", "USING reviewer, tester")

    def supervision(self) -> None:
        token = self.peek()
        if token is None or token.value not in _SUPERVISION:
            return
        self.take()
        if token.value == "UNSUPERVISED":
            self.decl.sup = Sup("none", token)
        else:
            self.decl.sup = Sup("human" if self.word("HUMAN") else "supervised", token)

    def finish(self) -> None:
        token = self.peek()
        if token is None:
            return
        expected = self._could_follow()
        hint = did_you_mean(token.value.upper(), expected) if token.kind == "word" else ""
        if not hint:
            hint = ("what may come here: " + ", ".join(expected)) if expected else "this statement ends before it"
        if self.decl.sup is not None and token.kind == "word":
            hint += "; SUPERVISED, HUMAN and UNSUPERVISED go last on the line"
        raise _Stop((token.line, token.col), f'unexpected "{token.value}"', hint)

    def _could_follow(self) -> list[str]:
        """The parts that may still come, in the grammar's order, after what was read."""
        d = self.decl
        sup = ["SUPERVISED", "UNSUPERVISED"]
        if d.sup is not None:
            return ["HUMAN"] if d.sup.level == "supervised" else []
        if d.keyword == "AGENT":
            return (["->"] if not d.outputs and not d.requires else []) + ([] if d.requires else ["REQUIRES"]) + sup
        if d.keyword == "GOAL":
            return (["->"] if not d.outputs and not d.using else []) + ([] if d.using else ["USING"]) + sup
        return sup if d.keyword in ("CONVERGE", "RUN") else []

    # ---- tokens ----

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, need: str = "") -> Token:
        token = self.peek()
        if token is None:
            self.missing(need, "")
        self.pos += 1
        return token

    def kind(self, kind: str) -> bool:
        """Takes the next token if it is of this kind."""
        token = self.peek()
        if token is not None and token.kind == kind:
            self.pos += 1
            return True
        return False

    def word(self, keyword: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.value == keyword:
            self.pos += 1
            return True
        return False

    def ident(self, need: str, example: str) -> Token:
        token = self.peek()
        if token is None or token.kind != "word":
            self.missing(need, example)
        if not IDENT.fullmatch(token.value):
            hint = "a name is a letter or _, then letters, digits, _ or -"
            raise _Stop((token.line, token.col), f'"{token.value}" is not a name', hint)
        self.pos += 1
        return token

    def idlist(self, need: str, example: str) -> list[Token]:
        names = [self.ident(need, example)]
        while self.kind("comma"):
            names.append(self.ident("a name is missing after ','", example))
        return names

    def string(self, need: str, example: str) -> str:
        token = self.peek()
        if token is None or token.kind != "string":
            self.missing(need, example)
        self.pos += 1
        return token.value

    def value(self) -> Token:
        token = self.take('DEFAULT needs a value: a "string", a number or a word')
        if token.kind not in ("string", "word"):
            raise _Stop((token.line, token.col), f'DEFAULT cannot be "{token.value}"', 'DEFAULT "1.0", DEFAULT 3')
        return token

    def missing(self, need: str, example: str) -> NoReturn:
        token = self.peek()
        at = (token.line, token.col) if token is not None else self.end
        raise _Stop(at, need, example)
