"""How much a person (or a program) may send a run: the size of a note, an answer, a comment, a
name, a budget raise, and how many notes may wait undelivered. The page, the CLI and the MCP server
check these before sending, and the run's update validators check them again, so a client that
skips its own check is refused all the same.

Why these numbers: a note or an answer is read by an agent in its next prompt and shown on the run's
page; a few pages of text is already more than a person types into a form. Undelivered notes are
capped so a burst cannot pile megabytes onto the next prompt.
"""

from __future__ import annotations

import math

from agentrun.models.contract import AnswerInput, BudgetInput, NoteInput

NOTE_CHARS = 8_000  # a note's text
ANSWER_CHARS = 8_000  # an answer's value (a correction for a supervised agent can be a paragraph)
COMMENT_CHARS = 2_000  # the comment beside an answer or a budget raise
BY_CHARS = 100  # who sent it
STEP_CHARS = 200  # the step a note is for
UNDELIVERED_NOTES = 20  # notes of a run waiting for a prompt
MAX_TOKENS = 10**12  # a raised token budget
MAX_USD = 1_000_000.0  # a raised budget in US dollars
MAX_ITERATIONS = 1_000_000  # a raised budget of prompts


def note_refusal(given: NoteInput) -> str | None:
    """Why the note is too large to take, or None."""
    return _too_long(("note", given.text, NOTE_CHARS), ("step", given.step, STEP_CHARS), ("name", given.by, BY_CHARS))


def answer_refusal(given: AnswerInput) -> str | None:
    return _too_long(
        ("answer", given.value, ANSWER_CHARS), ("comment", given.comment, COMMENT_CHARS), ("name", given.by, BY_CHARS)
    )


def budget_refusal(given: BudgetInput) -> str | None:
    """Why the raise is out of bounds: a text too long, or a limit no run could reach (or not a number)."""
    if given.usd is not None and not (math.isfinite(given.usd) and given.usd <= MAX_USD):
        return f"a budget in US dollars is at most {MAX_USD:,.0f}"
    if given.tokens is not None and given.tokens > MAX_TOKENS:
        return f"a token budget is at most {MAX_TOKENS:,}"
    if given.iterations is not None and given.iterations > MAX_ITERATIONS:
        return f"a budget of prompts is at most {MAX_ITERATIONS:,}"
    return _too_long(("comment", given.comment, COMMENT_CHARS), ("name", given.by, BY_CHARS))


def refusal(given: NoteInput | AnswerInput | BudgetInput) -> str | None:
    """Why what a person sends is too large, whichever it is."""
    if isinstance(given, NoteInput):
        return note_refusal(given)
    return answer_refusal(given) if isinstance(given, AnswerInput) else budget_refusal(given)


def undelivered_refusal(waiting: int) -> str | None:
    """Why one more note cannot wait, when `waiting` notes already do."""
    if waiting >= UNDELIVERED_NOTES:
        return (
            f"{waiting} notes are already waiting for the run's next prompts (at most {UNDELIVERED_NOTES}): "
            "send this one once they are delivered"
        )
    return None


def _too_long(*fields: tuple[str, str, int]) -> str | None:
    for name, text, most in fields:
        if len(text) > most:
            return f"the {name} is {len(text):,} characters long; at most {most:,} are taken"
    return None
