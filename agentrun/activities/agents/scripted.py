"""scripted:FILE — canned replies from a YAML file, for tests and dry runs.

default: "reply for any task not listed"      # optional
delay_s: 0.5                                   # optional, sleeps before replying
tasks:
  TASK_ID: "one reply"
  OTHER: ["reply to turn 0", "reply to turn 1", "last one repeats"]
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import yaml

from agentrun.activities.agents._common import agent_error
from agentrun.lang.agent_uri import AgentUri
from agentrun.models.calls import AgentCall, AgentReply

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where installed


async def send(call: AgentCall) -> AgentReply:
    path = _path(call)
    script = await asyncio.to_thread(_load, path)
    delay = script.get("delay_s") or 0
    if not isinstance(delay, (int, float)) or delay < 0:
        raise agent_error(f"scripted: delay_s in {path} must be a non-negative number")
    if delay:
        async with asyncio.timeout(call.timeout_s):
            await asyncio.sleep(delay)
    return AgentReply(text=_pick(script, call, path), model="scripted")


def _path(call: AgentCall) -> Path:
    name = AgentUri.parse(call.uri).rest.strip()
    if not name:
        raise agent_error(f"scripted: no file in {call.uri!r}")
    path = Path(name).expanduser()
    return path if path.is_absolute() else Path(call.workdir) / path


def _load(path: Path) -> dict[str, Any]:
    try:
        stat = path.stat()
    except OSError as err:
        raise agent_error(f"scripted: cannot read {path}: {err}") from None
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


# A long map asks one script thousands of times: it is read again only once it changed.
@functools.lru_cache(maxsize=64)
def _parsed(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(), Loader=_LOADER)
    except OSError as err:
        raise agent_error(f"scripted: cannot read {path}: {err}") from None
    except yaml.YAMLError as err:
        raise agent_error(f"scripted: {path} is not valid YAML: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict) or not isinstance(data.get("tasks", {}), dict):
        raise agent_error(f"scripted: {path} must be a mapping with an optional `tasks` mapping")
    # YAML reads `1:` as an int; task ids are always strings.
    return {**data, "tasks": {str(k): v for k, v in (data.get("tasks") or {}).items()}}


def _pick(script: dict[str, Any], call: AgentCall, path: Path) -> str:
    entry = script["tasks"].get(call.task_id, script.get("default"))
    if entry is None:
        raise agent_error(f"scripted: task {call.task_id!r} is not in {path} and there is no default")
    if isinstance(entry, list):
        if not entry:
            raise agent_error(f"scripted: task {call.task_id!r} in {path} has an empty reply list")
        # The last reply repeats, so a script need not know how many turns a task will take.
        entry = entry[min(call.turn, len(entry) - 1)]
    if not isinstance(entry, (str, int, float)):
        raise agent_error(f"scripted: reply for task {call.task_id!r} in {path} must be text")
    return str(entry)
