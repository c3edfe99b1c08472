"""Paths as a worker sees them. A run names its work directory (and a spec's folder, a check's
script) as the machine that started it does; a worker in a container may have that folder mounted
elsewhere. `AGENTRUN_PATH_MAP=/home/me/proj=/work,/srv/a=/mnt/a` tells it where: every path an
activity is given under the left side is read under the right one. Mounting the folder at the same
path needs no map.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from pydantic import BaseModel
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from agentrun.errors import UserError

ENV = "AGENTRUN_PATH_MAP"


class BadMapping(UserError, ValueError):
    pass


def mapping(text: str | None = None) -> list[tuple[str, str]]:
    """The (host prefix, local prefix) pairs of AGENTRUN_PATH_MAP, longest host prefix first."""
    text = os.environ.get(ENV, "") if text is None else text
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, local = item.partition("=")
        if not sep or not host.startswith("/") or not local.startswith("/"):
            raise BadMapping(
                f"{ENV}: {item!r} is not HOST_PATH=LOCAL_PATH\n"
                f"  hint: absolute paths, pairs separated by commas: {ENV}=/home/me/proj=/work"
            )
        pairs.append((host.rstrip("/") or "/", local.rstrip("/") or "/"))
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def local(path: str, pairs: list[tuple[str, str]]) -> str:
    for host, here in pairs:
        if path == host or path.startswith(host.rstrip("/") + "/"):
            return here + path[len(host) :] if host != "/" else here.rstrip("/") + path
    return path


def interceptors() -> list[Interceptor]:
    """What a worker needs for AGENTRUN_PATH_MAP; nothing when it is not set. Raises BadMapping."""
    pairs = mapping()
    return [PathMapping(pairs)] if pairs else []


class PathMapping(Interceptor):
    def __init__(self, pairs: list[tuple[str, str]]):
        self.pairs = pairs

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self.pairs)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, pairs: list[tuple[str, str]]):
        super().__init__(next)
        self.pairs = pairs

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        args = [self._mapped(arg) for arg in input.args]
        return await super().execute_activity(dataclasses.replace(input, args=args))

    def _mapped(self, arg: Any) -> Any:
        """An activity's input with each path field (workdir, spec_dir, script, …) read locally."""
        if not isinstance(arg, BaseModel):
            return arg
        paths = {
            name: local(value, self.pairs)
            for name, value in vars(arg).items()
            if isinstance(value, str) and value.startswith("/")
        }
        return arg.model_copy(update=paths)
