"""The command line as Markdown, read from the argparse definitions themselves, so the docs site's
reference (docs/cli.md, filled in by a MkDocs hook at build time) cannot drift from what the
commands accept."""

from __future__ import annotations

import argparse

from agentrun.cli import parser as client_parser
from agentrun.worker import args as worker_args

WIDTH = 100  # usage lines wrapped at a fixed width, not the terminal's, so every build is the same


def markdown() -> str:
    """Every command of `python -m client`, then `agentrun`'s own and `python -m worker`."""
    client = subcommands(client_parser())
    sections = [_command(name, sub, summary) for name, (sub, summary) in client.items()]
    agentrun = subcommands(client_parser("agentrun"))
    own = [
        _command(f"agentrun {name}", sub, summary) for name, (sub, summary) in agentrun.items() if name not in client
    ]
    return "\n".join([*sections, *own, _worker()])


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """A parser's subcommands by name, in the order `--help` lists them, each with its one-line help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (sub, summaries.get(name, "")) for name, sub in action.choices.items()}
    return {}


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _command(name: str, parser: argparse.ArgumentParser, summary: str) -> str:
    lines = [f"### {name}", ""]
    if summary:
        lines += [summary[0].upper() + summary[1:] + ".", ""]
    if parser.description and parser.description != summary:
        lines += [parser.description, ""]
    lines += ["```text", usage(parser), "```", "", *_arguments(parser)]
    return "\n".join(lines) + "\n"


def _worker() -> str:
    parser = worker_args.parser()
    lines = ["### python -m worker", "", "The same as `agentrun worker`.", ""]
    lines += ["```text", usage(parser), "```", "", *_arguments(parser)]
    return "\n".join(lines) + "\n"


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = [_row(action) for action in parser._actions if not isinstance(action, argparse._HelpAction)]
    if not rows:
        return []
    return ["| argument | meaning |", "|---|---|", *rows, ""]


def _row(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = _metavar(action)
        names = ", ".join(f"`{flag}{' ' + metavar if metavar else ''}`" for flag in action.option_strings)
    else:
        names = f"`{_metavar(action) or action.dest}`"
    meaning = (action.help or "").replace("|", "\\|")
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        meaning = _join(meaning, "one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    if action.default not in (None, False, [], argparse.SUPPRESS) and "default" not in meaning:
        meaning = _join(meaning, f"default `{action.default}`")
    if action.required and action.option_strings:
        meaning = _join(meaning, "required")
    return f"| {names} | {meaning} |"


def _metavar(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _join(text: str, more: str) -> str:
    return f"{text}; {more}" if text else more
