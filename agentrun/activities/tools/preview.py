"""The preview_tool activity: what a write or edit would change, as a unified diff against the file
as it is now, for the person a tool call's gate asks (the policy's `ask`).

The file is read as the read tool reads it, under the run's policy and its confinement: a file the
agent may not read (a secret one, one outside the work directory) is not shown to anyone here either.
"""

from __future__ import annotations

import difflib

from temporalio import activity

from agentrun.activities.tools.run import run_tool
from agentrun.models.tools import PREVIEW_TOOL, ToolCall, ToolCallInput

NEW_FILE = "(no such file yet: the write makes it)"


@activity.defn(name=PREVIEW_TOOL)
async def preview_tool(input: ToolCallInput) -> str:
    """The call's change to its file as a unified diff; a sentence when it cannot be shown."""
    args, limit = input.call.arguments, input.policy.limits.output_chars
    path = str(args.get("path", ""))
    read = input.model_copy(update={"call": ToolCall(id=input.call.id, name="read", arguments={"path": path})})
    now = await run_tool(read)
    missing = not now.ok and not now.refused and "no such file" in (now.error or "")
    if not now.ok and not (missing and input.call.name == "write"):
        return f"(the file as it is now cannot be shown: {now.error})"
    if now.truncated:
        return f"(the file is longer than the {limit} characters a tool result may hold: no diff is shown)"
    before = "" if missing else now.content
    if input.call.name == "write":
        after = str(args.get("content", ""))
    else:
        old, new = str(args.get("old", "")), str(args.get("new", ""))
        if not old or old not in before:
            return "(the passage to change is not in the file as it is now: the edit would fail)"
        after = before.replace(old, new, 1)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    head = f"{NEW_FILE}\n" if missing else ""
    return (head + diff)[:limit]
