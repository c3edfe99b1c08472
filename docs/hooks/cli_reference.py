"""MkDocs hook: the command-line reference in docs/cli.md is made from the argparse definitions at
build time (agentrun.cli.reference), so the page says what the commands accept today."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

MARK = "<!-- cli-reference -->"
PAGE = "cli.md"


def on_config(config: Any, **_: Any) -> Any:
    # The checkout being documented comes first, whatever else the environment has installed.
    sys.path.insert(0, str(Path(config.config_file_path).parent))
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARK not in markdown:
        raise ValueError(f"docs/{PAGE} lost the mark {MARK} where the command-line reference goes")
    from agentrun.cli import reference

    return markdown.replace(MARK, reference.markdown())
