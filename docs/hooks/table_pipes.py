"""MkDocs hook: a `|` inside code in a table row is written `\\|` in the pages, as GitHub needs it to
keep the cell whole; Python-Markdown already keeps code spans whole and would show the backslash, so
the site gets the plain `|`."""

from __future__ import annotations

import re
from typing import Any

CODE = re.compile(r"`[^`\n]*`")


def on_page_markdown(markdown: str, **_: Any) -> str:
    return "\n".join(_unescape(line) if line.lstrip().startswith("|") else line for line in markdown.split("\n"))


def _unescape(row: str) -> str:
    return CODE.sub(lambda code: code.group(0).replace("\\|", "|"), row)
