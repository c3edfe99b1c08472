"""Asking a person at this terminal for a gate's answer while a run is followed, and sending it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.prompt import Prompt

from agentrun.caller import user
from agentrun.client.run import Run
from agentrun.errors import Refused
from agentrun.explain.gates import choices, how_to_answer, yes_no
from agentrun.models.contract import Gate

# Asks a person for a gate's answer; None leaves the gate to be answered elsewhere.
Prompter = Callable[[Gate], "str | None"]


def terminal_prompter(console: Console) -> Prompter:
    """Asks on the terminal; an empty answer or end of input leaves the gate open."""

    def ask(gate: Gate) -> str | None:
        given = choices(gate)
        try:
            value = _Choice.ask(f"{gate.id}: {gate.prompt}", choices=given or None, console=console, aliases=given)
        except EOFError:
            return None
        return value or None

    return ask


class _Choice(Prompt):
    """A prompt that takes y/yes and n/no for approve and reject, as people type at a terminal."""

    def __init__(self, *args: Any, aliases: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = yes_no(aliases or [])

    @classmethod
    def ask(cls, *args: Any, aliases: list[str] | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        return cls(*args, aliases=aliases, **kwargs)()

    def process_response(self, value: str) -> str:
        return super().process_response(self.aliases.get(value.strip().lower(), value))


async def answer_inline(run: Run, gate: Gate, prompter: Prompter, console: Console) -> None:
    """Ask a person at this terminal and send their answer; a refusal (someone answered first) is shown."""
    value = await _in_daemon_thread(prompter, gate)
    if value is None:
        console.print(f"  gate {gate.id} left open: {how_to_answer(run.id, gate)}", markup=False, highlight=False)
        return
    try:
        await run.answer(value, gate.id, by=user())
    except Refused as exc:
        console.print(f"error: {exc}", style="red", markup=False, highlight=False)


def _in_daemon_thread(prompter: Prompter, gate: Gate) -> asyncio.Future[str | None]:
    """Run the prompter in a thread, so the event loop keeps running the in-process worker.

    Not asyncio.to_thread: on Ctrl-C, asyncio.run joins its executor's threads, and one blocked in
    input() would hold the CLI until Enter is pressed. A daemon thread is left behind instead.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def settle(value: str | None, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error else future.set_result(value)

    def run() -> None:
        try:
            value, error = prompter(gate), None
        except BaseException as exc:  # handed to the awaiting coroutine, not lost in the thread
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed while the person was typing
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=run, name=f"ask {gate.id}", daemon=True).start()
    return future
