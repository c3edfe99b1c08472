"""The `agentrun` command: the client's commands, `agentrun worker`, and shell completion.

`agentrun start spec.yaml` is `python -m client start spec.yaml`; `agentrun worker` is
`python -m worker`. `eval "$(agentrun completion bash)"` (or zsh, fish) completes commands and
options as you type.
"""

# PYTHON_ARGCOMPLETE_OK  (argcomplete reads this mark in the console script's first lines)

from __future__ import annotations

import argparse

import argcomplete
from argcomplete.shell_integration import shellcode

from agentrun.client import __main__ as client_cli
from agentrun.client import spelling
from agentrun.worker import __main__ as worker_cli

SHELLS = ("bash", "zsh", "fish")


def parser() -> argparse.ArgumentParser:
    p = client_cli.parser(prog="agentrun")
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    worker = sub.add_parser("worker", help="run a worker", description=worker_cli.DESCRIPTION)
    worker_cli.add_arguments(worker)
    completion = sub.add_parser("completion", help="print the shell code that completes agentrun's commands")
    completion.add_argument("shell", choices=SHELLS, help='e.g. eval "$(agentrun completion bash)" in ~/.bashrc')
    return p


def run(argv: list[str] | None = None) -> int:
    spelling.called_as_agentrun()
    p = parser()
    argcomplete.autocomplete(p)  # answers the shell's completion request and exits; otherwise nothing
    args = p.parse_args(argv)
    if args.command == "worker":
        return worker_cli.run(args)
    if args.command == "completion":
        print(shellcode(["agentrun"], shell=args.shell), end="")
        return 0
    return client_cli.run(args)


def main() -> None:
    client_cli.exit_with(run)
