"""The report's markdown as HTML for the run page, with markdown-it (CommonMark and GFM tables).

Raw HTML is off: anything an agent wrote that looks like a tag is shown as text, never run, and
markdown-it's own link check refuses `javascript:` and other unsafe addresses."""

from __future__ import annotations

from markdown_it import MarkdownIt

# A line break an agent wrote stays one (CommonMark would join the lines of a paragraph).
_MD = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")


def to_html(markdown: str) -> str:
    return _MD.render(markdown)
