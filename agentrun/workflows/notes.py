"""Notes people send a running run (`say`): refused for a step that will prompt no more, else kept
until the next prompt of their step (or of any step) carries them, marked as a person's."""

from __future__ import annotations

from collections.abc import Iterable

from agentrun.models import limits
from agentrun.models.contract import TERMINAL, Note, NoteInput, RunState

FINISHED = ("completed", "failed", "skipped", "cancelled")


def refusal(state: RunState, given: NoteInput) -> str | None:
    """Why the note cannot reach an agent, or None."""
    if not given.text.strip():
        return "a note needs some text"
    if state.status in TERMINAL:
        return f"the run has ended ({state.status}): no agent will read the note"
    # Checked by the update's validator only, which replay does not run: no patch needed.
    too_much = limits.note_refusal(given) or limits.undelivered_refusal(sum(not n.delivered_to for n in state.notes))
    if too_much:
        return too_much
    if not given.step:
        return None
    tasks = [task for key, task in state.tasks.items() if _is_of(key, given.step)]
    if not tasks:
        return _no_step(state, given.step)
    if all(task.status in FINISHED for task in tasks):
        return f"step '{given.step}' has finished ({tasks[-1].status}): it will send no more prompts"
    return None


def _no_step(state: RunState, step: str) -> str:
    """Why a note for a step the run has no row of is refused: an element of a batched map (its rows
    are in its batches) or a step that is not there."""
    for summary in state.maps.values():
        if step.startswith(f"{summary.key}["):
            return (
                f"step '{step}' is an element of the long map '{summary.key}', whose elements run in batches: "
                f"send the note to step '{summary.key}' and the next batch's first prompt carries it"
            )
    return f"the run has no step '{step}'; its steps: {', '.join(state.tasks) or 'none yet'}"


def take(state: RunState, given: NoteInput) -> Note:
    note = Note(n=len(state.notes) + 1, text=given.text.strip(), step=given.step, by=given.by)
    state.add_note(note)
    return note


def deliver(state: RunState, key: str, turn: int, text: str) -> str:
    """The prompt `text` of run key `key` with the notes waiting for it, which are delivered now."""
    waiting = _waiting_for(state, [key])
    if not text or not waiting:
        return text
    for note in waiting:
        note.deliver(key, turn)
    said = "\n".join(f"- from {n.sender}: {n.text}" for n in waiting)
    return f"{text}\n\nNotes from a person watching this run (not from the workflow), sent while it ran:\n{said}"


def hand(state: RunState, batch: str, steps: set[str]) -> list[Note]:
    """The notes waiting for a prompt of `steps` (a long map's and its body's) or of any step, now
    handed to `batch`: its elements' prompts may carry them, no other prompt does."""
    handed = _waiting_for(state, steps)
    for note in handed:
        note.hand_to(batch)
    return handed


def take_back(state: RunState, said: list[Note]) -> None:
    """What a batch did with the notes it was handed: each it delivered is delivered here too; the
    others wait again for the next prompt."""
    ours = {note.n: note for note in state.notes}
    for note in said:
        if mine := ours.get(note.n):
            mine.came_back(note)


def release(state: RunState, batches: str) -> None:
    """Notes handed to batches under `batches` (a map's child id prefix) that never came back, its
    batch having failed or been cancelled, wait again."""
    for note in state.notes:
        if note.handed_to.startswith(batches) and not note.delivered_to:
            note.wait_again()


def _waiting_for(state: RunState, keys: Iterable[str]) -> list[Note]:
    """The notes no prompt has carried, nor any batch holds, for a run of one of `keys` or for any step."""
    return [
        n
        for n in state.notes
        if not n.delivered_to and not n.handed_to and (not n.step or any(_is_of(k, n.step) for k in keys))
    ]


def _is_of(key: str, step: str) -> bool:
    """Whether run key `key` (`build`, `each[3]`, `review.writer`, `Root/Build@2`) is a run of `step`."""
    return key == step or (key.startswith(step) and key[len(step)] in "[./@")
