"""A map's elements a page at a time (`status RUN --elements MAP [--page N] [--limit N]`, and the
same on `report`). A batched map's elements live in its batches (child workflows): only the batches the
page covers are read, by their state query while they run and from their memo once they end. A
map that ran in the run itself has its elements' rows in the run's own state."""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus

from agentrun.client.runs import NoSuchRun, UsageError, ask_state, describe
from agentrun.models.contract import MapSummary, RunState, TaskState, batch_id, element_key
from agentrun.models.elements import Element, Page

DEFAULT_LIMIT = 50


async def page(client: Client, state: RunState, map_key: str, number: int = 1, limit: int = DEFAULT_LIMIT) -> Page:
    """Page `number` of map `map_key`'s elements, `limit` to a page. Raises UsageError for a run
    without that map or a page past its last."""
    summary = state.maps.get(map_key)
    total = summary.total if summary else _rows_in_run(state, map_key)
    if not total and summary is None:
        raise UsageError(f"run {state.run_id} has no map step '{map_key}'{_maps_hint(state)}")
    pages = max(-(-total // limit), 1)
    if number > pages:
        raise UsageError(f"map {map_key} has {total} elements: {pages} page(s) of {limit}")
    indexes = range((number - 1) * limit, min(number * limit, total))
    if summary is None:
        rows = {k: (state.tasks[k], state.outputs.get(k)) for k in (element_key(map_key, i) for i in indexes)}
    else:
        rows = await _rows_in_batches(client, summary, indexes)
    elements = [_element(element_key(map_key, i), rows.get(element_key(map_key, i))) for i in indexes]
    return Page(map_key, number, pages, limit, total, elements)


def _rows_in_run(state: RunState, map_key: str) -> int:
    count = 0
    while element_key(map_key, count) in state.tasks:
        count += 1
    return count


async def _rows_in_batches(
    client: Client, summary: MapSummary, indexes: range
) -> dict[str, tuple[TaskState, str | None]]:
    """The page's rows from the batches holding them; a later part of a batch (after a paused
    budget) has the rows its first part left pending."""
    rows: dict[str, tuple[TaskState, str | None]] = {}
    for batch in sorted({i // summary.batch for i in indexes}):
        for part in range(1, summary.parts.get(batch, 1) + 1):
            state = await _batch_state(client, batch_id(summary.children, batch, part))
            if state is None:
                continue
            for i in indexes:
                key = element_key(summary.key, i)
                row = state.tasks.get(key)
                if row is not None and (row.status != "pending" or key not in rows):
                    rows[key] = (row, state.outputs.get(key))
    return rows


async def _batch_state(client: Client, workflow_id: str) -> RunState | None:
    """A batch's state, or None for one not started (or no worker answering for a running one)."""
    try:
        desc = await describe(client, workflow_id)
    except NoSuchRun:
        return None
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return await ask_state(client.get_workflow_handle(workflow_id))
    return await desc.memo_value("state", None, type_hint=RunState)


def _element(key: str, found: tuple[TaskState, str | None] | None) -> Element:
    if found is None:
        return Element(key, "pending", 0, 0.0, 0, "", None)
    row, output = found
    return Element(key, row.status, row.retries_used, row.duration_s, row.output_size, row.error, output)


def _maps_hint(state: RunState) -> str:
    batched = f"; its batched maps: {', '.join(state.maps)}" if state.maps else ""
    return batched + "; a map's elements are its rows MAP[0], MAP[1], …"
