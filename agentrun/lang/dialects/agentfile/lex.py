"""An Agentfile's text as statements of tokens, each token knowing its line and column.

One statement per line, except that a `\"\"\"` string runs on over the lines until it closes. An
indented line under a GOAL that does not start with a keyword is one of the goal's sub-steps (the
draft form) and is kept as text. Problems are collected, not raised: the caller says which form
of the language they are about once it knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from agentrun.lang.errors import Problem

KEYWORDS = frozenset(
    "NAME INPUT AGENT GOAL CONVERGE RUN FROM USING WITHIN DEFAULT REQUIRES SUPERVISED HUMAN UNSUPERVISED SECURITY".split()
)
STATEMENTS = ("NAME", "INPUT", "AGENT", "GOAL", "CONVERGE", "RUN", "SUPERVISED", "UNSUPERVISED", "SECURITY")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_WORD = re.compile(r"[^\s\",#]+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}
Place = tuple[int, int]


@dataclass(frozen=True)
class Text:
    """Text as written, with the line and column of each of its characters, so that a reference
    inside it is reported where it stands (in the Agentfile or in a file it reads)."""

    value: str
    file: str
    places: tuple[Place, ...]

    def at(self, index: int) -> Place:
        if not self.places:
            return (0, 0)
        return self.places[min(index, len(self.places) - 1)]

    @classmethod
    def of_file(cls, file: str, value: str) -> Text:
        places, line, col = [], 1, 1
        for char in value:
            places.append((line, col))
            line, col = (line + 1, 1) if char == "\n" else (line, col + 1)
        return cls(value, file, tuple(places))


TokenKind = Literal["word", "string", "var", "arrow", "comma"]


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    value: str
    line: int
    col: int
    text: Text | None = None  # a string's value with its places


@dataclass
class Statement:
    tokens: list[Token]
    end: Place  # just past the statement's last character, where a missing part is said to be
    substeps: list[Text] = field(default_factory=list)


def first_word(text: str) -> str:
    """The first word of the first statement, past blank lines and comments."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped.split()[0]
    return ""


def read(file: str, text: str) -> tuple[list[Statement], list[Problem]]:
    lexer = _Lexer(file, text)
    lexer.run()
    return lexer.statements, lexer.problems


class _Lexer:
    def __init__(self, file: str, text: str):
        self.file, self.lines = file, text.splitlines()
        self.statements: list[Statement] = []
        self.problems: list[Problem] = []

    def run(self) -> None:
        number = 0
        while number < len(self.lines):
            line = self.lines[number]
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                number += 1
            elif self._is_substep(line, stripped):
                col = len(line) - len(line.lstrip()) + 1
                places = tuple((number + 1, col + i) for i in range(len(stripped)))
                self.statements[-1].substeps.append(Text(stripped, self.file, places))
                number += 1
            else:
                number = self._statement(number)

    def _is_substep(self, line: str, stripped: str) -> bool:
        # Keywords stay statements even when indented: the line form does not care about indentation.
        if not line[0].isspace() or not self.statements or stripped.split()[0] in KEYWORDS:
            return False
        tokens = self.statements[-1].tokens
        return bool(tokens) and tokens[0].value in ("GOAL", "CONVERGE")

    def _statement(self, number: int) -> int:
        """Reads the statement starting on line `number`; returns the number of the line after it."""
        tokens: list[Token] = []
        col = 0
        line = self.lines[number]
        while True:
            while col < len(line) and line[col].isspace():
                col += 1
            if col >= len(line) or line[col] == "#":
                break
            if line.startswith('"""', col):
                token, number, col = self._long_string(number, col)
                line = self.lines[number] if number < len(self.lines) else ""
            else:
                token, col = self._token(line, number, col)
            if token is not None:
                tokens.append(token)
        self.statements.append(Statement(tokens, (number + 1, len(line) + 1)))
        return number + 1

    def _token(self, line: str, number: int, col: int) -> tuple[Token | None, int]:
        here = (number + 1, col + 1)
        if line[col] == '"':
            return self._string(line, number, col)
        if line.startswith("->", col):
            return Token("arrow", "->", *here), col + 2
        if line[col] == ",":
            return Token("comma", ",", *here), col + 1
        if line[col] == "$":
            name = IDENT.match(line, col + 1)
            if name is None:
                self._problem(here, "'$' is not followed by a name", "a reference is $ and a name: $version")
                return None, col + 1
            return Token("var", name.group(), *here), name.end()
        word = _WORD.match(line, col)
        assert word is not None  # the character at col is neither space, quote, comma nor '#'
        return Token("word", word.group(), *here), word.end()

    def _string(self, line: str, number: int, col: int) -> tuple[Token, int]:
        """A one-line string with its escapes; unclosed, it takes the rest of the line."""
        chars: list[str] = []
        places: list[Place] = []
        i = col + 1
        while i < len(line) and line[i] != '"':
            if line[i] == "\\" and i + 1 < len(line) and line[i + 1] in _ESCAPES:
                chars.append(_ESCAPES[line[i + 1]])
                places.append((number + 1, i + 1))
                i += 2
                continue
            chars.append(line[i])
            places.append((number + 1, i + 1))
            i += 1
        if i >= len(line):
            hint = 'close it with " on the same line; for text over several lines use """ … """'
            self._problem((number + 1, col + 1), "unclosed string", hint)
        text = Text("".join(chars), self.file, tuple(places))
        return Token("string", text.value, number + 1, col + 1, text), i + 1

    def _long_string(self, number: int, col: int) -> tuple[Token, int, int]:
        """A \"\"\" string, as written (no escapes); the statement goes on after its end."""
        start = (number + 1, col + 1)
        chars: list[str] = []
        places: list[Place] = []
        i, row = col + 3, number
        while row < len(self.lines):
            line = self.lines[row]
            end = line.find('"""', i)
            stop = end if end >= 0 else len(line)
            chars += line[i:stop]
            places += [(row + 1, c + 1) for c in range(i, stop)]
            if end >= 0:
                return self._long_token(chars, places, start), row, end + 3
            chars.append("\n")
            places.append((row + 1, len(line) + 1))
            row, i = row + 1, 0
        self._problem(start, 'unclosed """ string', 'end the text with """')
        return self._long_token(chars, places, start), row, 0

    def _long_token(self, chars: list[str], places: list[Place], start: Place) -> Token:
        # The line break right after the opening quotes and the indentation before the closing
        # ones belong to the layout, not to the text.
        value = "".join(chars)
        head = 1 if value.startswith("\n") else 0
        tail = len(value.rstrip())
        text = Text(value[head:tail], self.file, tuple(places[head:tail]))
        return Token("string", text.value, *start, text)

    def _problem(self, at: Place, message: str, hint: str) -> None:
        self.problems.append(Problem(self.file, at[0], at[1], message, hint))
