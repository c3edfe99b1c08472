"""The Agentfile (vinayprograms/agent): a line-based language of goals, agents and RUN steps.

Two forms are accepted (see the reference's "both forms"): the real parser's line form, whose goals
run through RUN steps, and the seed's draft form, whose goals run in file order. Every goal compiles
to a checkpoint task (COMMIT → EXECUTE, then RECONCILE and SUPERVISE when supervised); a goal
USING agents to those agents' tasks in parallel followed by one that merges their outputs.
Reading the text is `lex`, the grammar `parse`, references `refs`,
the goals in the order they run `goals`.
"""

from __future__ import annotations

import os

from agentrun.lang import ir
from agentrun.lang.dialects.agentfile.lex import STATEMENTS, first_word

NAME = "agentfile"
MARKS = (
    "an Agentfile is a file named Agentfile or *.agent, or starts with one of its keywords (NAME, AGENT, GOAL, RUN…)"
)
TRAITS = ir.Traits(numbered_steps=True, stores_with="a goal's outputs (`-> NAME`)")
EXAMPLES = ("agentfile/Agentfile", "agentfile/*/Agentfile")  # under examples/: what the README runs


def detect(path: str, text: str) -> bool:
    """A file named Agentfile or *.agent, or one whose first statement is an Agentfile keyword."""
    base = os.path.basename(path)
    return base == "Agentfile" or base.endswith(".agent") or first_word(text) in STATEMENTS
