"""The commands that read runs back: status, list, diff, report."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from agentrun import spelling
from agentrun.cli.args import EXIT_OK, when, whole
from agentrun.client.engine import Engine
from agentrun.errors import UsageError
from agentrun.explain import diff, outputs, report, status
from agentrun.models import run_words
from agentrun.models.elements import Page

LIST_COLUMNS = ("RUN", "STATUS", "SPEC", "STARTED", "ENDED")
ELEMENTS_LIMIT = 50  # a page of a map's elements, unless --limit says


async def status_command(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    if _paging(args):  # a bad combination of options is refused before the run is read
        page = await _page(engine, args)
        if args.json:
            print(page.to_json())
        else:
            for line in _element_lines(page):
                console.print(line, markup=False)
        return EXIT_OK
    run = engine.run(args.run_id)
    progress = await run.progress()
    build = await run.build()
    if args.json:
        said = status.status_json(progress.state, progress.so_far)
        print(json.dumps({**said, "build": build} if build else said, indent=2))
        return EXIT_OK
    for line in status.lines(progress.state, progress.so_far):
        console.print(line, markup=False)
    if build:
        console.print(f"build: {build} (the run stays on it; see `upgrade check`)", markup=False)
    return EXIT_OK


async def report_command(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    run = engine.run(args.run_id)
    if _paging(args):
        page = await _page(engine, args)
        print(page.to_json() if args.format == "json" else report.elements_markdown(page))
        return EXIT_OK
    state = await run.status()
    if args.format == "json":
        print(report.to_json(state))
    else:
        print(report.to_markdown(state, await run.lost_workers()) + outputs.section(state, every=args.outputs))
    return EXIT_OK


def _paging(args: argparse.Namespace) -> bool:
    """Whether the command pages through elements; --page or --limit alone is a usage error."""
    if args.elements:
        return True
    if args.page is not None or args.limit is not None:
        raise UsageError("--page and --limit page through a map's elements: add --elements MAP")
    return False


async def _page(engine: Engine, args: argparse.Namespace) -> Page:
    return await engine.run(args.run_id).elements(args.elements, args.page or 1, args.limit or ELEMENTS_LIMIT)


def _element_lines(page: Page) -> list[str]:
    """The page as `status` prints it: a line per element."""
    out = [page.heading()]
    for e in page.elements:
        error = f"  {e.error}" if e.error else ""
        out.append(f"  {e.key:<30} {e.status:<10} retries={e.retries} {e.duration_s:.1f}s{error}")
    return out


async def list_command(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    if args.limit <= 0:
        raise UsageError(f"--limit {args.limit} is not above 0")
    rows = [run.row() for run in await engine.runs(args.status, args.spec, args.limit)]
    total = await engine.count_runs(args.status, args.spec)
    more = f"showing {len(rows)} of {total} runs: --limit N shows more" if total > len(rows) else ""
    if args.json:
        print(json.dumps(rows, indent=2))
        if more:
            print(more, file=sys.stderr)
        return EXIT_OK
    if not rows:
        console.print(_nothing(args), markup=False)
        return EXIT_OK
    _table(console, rows)
    if more:
        console.print(more, markup=False)
    return EXIT_OK


def _nothing(args: argparse.Namespace) -> str:
    filters = [f"--{name} {getattr(args, name)}" for name in ("status", "spec") if getattr(args, name)]
    if filters:
        return "no runs match " + " ".join(filters)
    return f"no runs yet: start one with `{spelling.client()} start SPEC`"


def _table(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    builds = any(r.get("build") for r in rows)  # a column only where workers are versioned
    for name in (*LIST_COLUMNS, "BUILD") if builds else LIST_COLUMNS:
        table.add_column(name, no_wrap=True)
    for r in rows:
        cells = [r["run_id"], run_words.word(r["status"]), r["spec"], when(r["started"]), when(r["ended"]) or "-"]
        table.add_row(*cells, *([r.get("build") or "-"] if builds else []))
    whole(console).print(table)  # a terminal gets the table at its width


async def diff_command(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    a, b = await engine.run(args.run_a).status(), await engine.run(args.run_b).status()
    found = diff.differences(a, b)
    if args.json:
        print(json.dumps([d._asdict() for d in found], indent=2))
        return EXIT_OK
    if not found:
        console.print(f"no step differs between {a.run_id} and {b.run_id}", markup=False, highlight=False)
        return EXIT_OK
    steps = list(dict.fromkeys(d.step for d in found))
    console.print(f"{len(steps)} step(s) differ between {a.run_id} and {b.run_id}:", markup=False, highlight=False)
    width = max(len(d.step) for d in found)
    for d in found:
        console.print(f"  {d.step:<{width}}  {d.what:<6}  {d.a} → {d.b}", markup=False, highlight=False)
    return EXIT_OK
