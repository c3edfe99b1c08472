"""The engine as a library: connect to Temporal, start runs, find them, list them, and serve them
with a worker inside the caller's program.

    engine = await agentrun.connect()
    run = await engine.start("examples/quickstart.yaml", agents="scripted:replies.yaml")
    async with engine.worker():
        async for event in run.events():
            print(event.kind, getattr(event, "step", ""))
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.service import RPCError

from agentrun import startup
from agentrun.client import humans, launch, listing, runs
from agentrun.client.models import OpenGate, Pending, RunSummary
from agentrun.client.run import Run
from agentrun.errors import UsageError
from agentrun.explain import prepare
from agentrun.explain.prepare import Spec
from agentrun.ids import new_run_id
from agentrun.models.contract import RunInput, RunState
from agentrun.models.names import TASK_QUEUE, RunStatus

if TYPE_CHECKING:
    from agentrun.client.executions import Executions
    from agentrun.client.upgrade import ReplayCheck


async def connect(target: str | None = None, *, namespace: str | None = None, task_queue: str | None = None) -> Engine:
    """An engine on the Temporal at `target` (HOST:PORT), else the one TEMPORAL_ADDRESS (and the
    other TEMPORAL_* variables or an env-config profile) name, else on the embedded dev server,
    started if it is not running. `namespace`: Temporal's namespace (else TEMPORAL_NAMESPACE, else
    `default`); `task_queue`: where the runs it starts wait for a worker (else `agentrun`).
    Raises Unreachable."""
    from agentrun.worker.connection import connect as connect_client

    return Engine(await connect_client(target, namespace), task_queue or TASK_QUEUE)


class Engine:
    """Runs on one Temporal namespace. Runs started here wait on `task_queue` for any worker:
    `worker()` in this program, `python -m worker` or `agentrun worker` anywhere."""

    def __init__(self, client: Client, task_queue: str = TASK_QUEUE) -> None:
        self.temporal = client  # Temporal's own client, for what this API does not cover
        self.task_queue = task_queue
        self._attributes: bool | None = None

    @functools.cached_property
    def executions(self) -> Executions:
        """The runs an agent drives over MCP (behaviour-tree executions), by their trace address."""
        from agentrun.client.executions import Executions  # their tree loading only where they are used

        return Executions(self.temporal)

    @property
    def identity(self) -> str:
        """How this program is named to Temporal: the worker identity `worker()` polls with (pid@host)."""
        return self.temporal.identity

    async def start(
        self,
        spec: Spec,
        params: Mapping[str, Any] | None = None,
        agents: str | Mapping[str, str] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        run_id: str | None = None,
        resume_from: str | None = None,
        max_iterations: int | None = None,
        lenient: bool = False,
    ) -> Run:
        """Start a run of `spec` (a path, the spec's text, or a loaded `ir.Plan`). `agents`: the
        default agent URI, or agent id -> URI (`"default"` for the default), over agentrun.yaml
        beside the spec; `workdir`: where agents and checks run (default: the spec's folder).
        Raises SpecError (with file:line problems) before anything starts, UsageError for a taken id."""
        loaded = prepare.load_spec(spec, list((params or {}).items()), _agent_flags(agents))
        inp = prepare.prepare_input(loaded, workdir, resume_from, max_iterations, lenient)
        return await self.start_input(inp, run_id)

    async def start_input(
        self, inp: RunInput, run_id: str | None = None, task_queue: str | None = None, eager: bool = False
    ) -> Run:
        """Start a run of an input `explain.prepare` made (or a fork's, `Run.prepare_fork`) on
        `task_queue` (this engine's by default). `eager`: a worker of this program polls the queue,
        so the server hands it the run's first task in its reply. Raises UsageError for a taken id."""
        inp.search_attributes = await self.search_attributes()
        new_id = run_id or new_run_id(inp.plan.name)
        await launch.start_run(self.temporal, inp, new_id, task_queue or self.task_queue, eager=eager)
        return Run(self.temporal, new_id)

    async def search_attributes(self) -> bool:
        """Register the engine's search attributes on the server, once per engine; False where the
        server does not allow it (runs are then listed without their status and spec)."""
        if self._attributes is None:
            self._attributes = await launch.ensure_search_attributes(self.temporal)
        return self._attributes

    async def pollers(self, task_queue: str | None = None) -> list[str]:
        """The identities of the live workers polling `task_queue` (this engine's) for runs."""
        return await runs.pollers(self.temporal, task_queue or self.task_queue)

    def run(self, run_id: str) -> Run:
        """A handle on a run that exists already (its methods raise NoSuchRun if it does not)."""
        return Run(self.temporal, run_id)

    async def runs(self, status: RunStatus | None = None, spec: str | None = None, limit: int = 50) -> list[RunSummary]:
        """The latest runs, newest first, with this status or of this spec."""
        query = listing.visibility_query(status, spec)
        try:
            return [listing.summary(wf) async for wf in self.temporal.list_workflows(query, limit=limit)]
        except RPCError as exc:
            raise UsageError(f"Temporal cannot list runs with this filter: {exc.message}") from None

    async def count_runs(self, status: RunStatus | None = None, spec: str | None = None) -> int:
        """How many runs `runs()` would list with no limit."""
        query = listing.visibility_query(status, spec)
        try:
            return (await self.temporal.count_workflows(query)).count
        except RPCError as exc:
            raise UsageError(f"Temporal cannot list runs with this filter: {exc.message}") from None

    async def waiting(self) -> list[RunState]:
        """The state of every running run that may wait for a person (its open gates say for what)."""
        return await humans.waiting_states(self.temporal)

    async def open_gates(self, limit: int | None = None) -> list[OpenGate]:
        """Every gate open across runs (of the `limit` waiting runs started last), as the runs' memos
        in Temporal's visibility store say: no run is asked (but one started before runs kept their
        gates there)."""
        return await humans.open_gates_listed(self.temporal, limit)

    async def count_waiting(self) -> int:
        """How many running runs wait for a person or a budget raise."""
        return await humans.count_waiting(self.temporal)

    async def states(self, run_ids: list[str], wait_s: float = 2.0) -> dict[str, RunState]:
        """The state of each running run a worker answers for within wait_s; the others are left out."""
        return await humans.states_within(self.temporal, run_ids, wait_s)

    async def pending(self, limit: int | None = None) -> Pending:
        """Every question open across runs, oldest first, and the runs that wait with no worker to
        take an answer; `limit`: of at most this many waiting runs, the latest started (`more` says
        how many others wait). Read from Temporal's visibility store: no run is asked."""
        return await humans.pending(self.temporal, limit)

    async def check_upgrade(
        self, query: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> list[ReplayCheck]:
        """Replay every open run (or those of the visibility `query`) with the workflow code installed
        here, as its workers would: each run's result, and where one that fails departs from its
        history (the event and the step). `progress(done, total)` after each run."""
        from agentrun.client import upgrade

        return await upgrade.check(self.temporal, query, progress)

    async def promote(self, build: str, deployment: str | None = None) -> None:
        """Make `build` of the worker deployment (AGENTRUN_DEPLOYMENT, else "agentrun") current: new
        runs go to its workers; runs pinned to older builds stay on theirs. Raises UsageError."""
        from agentrun.worker import versioning

        await versioning.promote(self.temporal, build, deployment)

    async def move_runs(
        self, run_ids: list[str], build: str, deployment: str | None = None
    ) -> tuple[list[ReplayCheck], list[ReplayCheck]]:
        """Pin each open run that replays on the code installed here to `build` (the build this
        install's workers run); the moved and the kept. Raises UsageError for a run that is not open."""
        from agentrun.client import upgrade
        from agentrun.worker import versioning

        quoted = ", ".join(json.dumps(run_id) for run_id in run_ids)
        results = await upgrade.check(self.temporal, f"WorkflowId IN ({quoted})")
        missing = sorted(set(run_ids) - {r.run_id for r in results})
        if missing:
            raise UsageError(f"no open run {', '.join(missing)}: only running runs can move")
        moved = [r for r in results if r.replays]
        for result in moved:
            await versioning.move(self.temporal, result.run_id, build, deployment)
        return moved, [r for r in results if not r.replays]

    def web_url(self, run_id: str) -> str | None:
        """The run's page on Temporal Web, where it is known (the embedded server's, or TEMPORAL_UI_URL)."""
        from agentrun.worker.connection import web_url

        return web_url(self.temporal, run_id)

    @contextlib.asynccontextmanager
    async def worker(
        self,
        task_queue: str | None = None,
        max_concurrent_activities: int = 100,
        log: Path | None = None,
        tools: Sequence[Callable[..., Any]] = (),
    ) -> AsyncGenerator[None]:
        """A worker in this program while the block runs: it takes the runs on `task_queue` (this
        engine's), whoever started them, and finishes the activities it runs before the block ends.
        `log`: a file for its log (a terminal then shows a run's progress, not retried failures'
        tracebacks). `tools`: this program's functions, typed, sync or async, offered to agents by
        name as host tools (a cycgraph `{type: custom, name}`); each call of one runs here."""
        with startup.loading():
            from agentrun.activities.agents.agentapi import release_all
            from agentrun.activities.mcp.calls import close_connections
            from agentrun.worker import terminal_log
            from agentrun.worker.build import build_worker
            from agentrun.worker.host_tools import serving_tools

        if log is not None:
            terminal_log.to_file(log)
        async with (
            serving_tools(self.temporal, tools, max_concurrent_activities),
            build_worker(self.temporal, task_queue or self.task_queue, max_concurrent_activities),
        ):
            yield
        await release_all()
        await close_connections()


def _agent_flags(agents: str | Mapping[str, str] | None) -> list[str]:
    """`agents` as `--agent` flags: a URI for the default, ID=URI for one agent."""
    if agents is None:
        return []
    if isinstance(agents, str):
        return [agents]
    return [uri if agent == "default" else f"{agent}={uri}" for agent, uri in agents.items()]
