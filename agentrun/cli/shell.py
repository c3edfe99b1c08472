"""The `agentrun` command's own: `agentrun worker` and shell completion.

`eval "$(agentrun completion bash)"` (or zsh, fish) completes commands and options as you type.
"""

# PYTHON_ARGCOMPLETE_OK  (argcomplete reads this mark in the console script's first lines)

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console

from agentrun.cli import worker
from agentrun.cli.args import EXIT_OK, command
from agentrun.worker import args as worker_args

SHELLS = ("bash", "zsh", "fish")


def add_commands(sub: Any) -> None:
    w = command(sub, "worker", "run a worker", _worker, description=worker_args.DESCRIPTION)
    worker_args.add_arguments(w)
    c = command(sub, "completion", "print the shell code that completes agentrun's commands", _completion)
    c.add_argument("shell", choices=SHELLS, help='e.g. eval "$(agentrun completion bash)" in ~/.bashrc')


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit; without one, do nothing."""
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(parser)


def _worker(args: argparse.Namespace, console: Console) -> int:
    return worker.run(args)


def _completion(args: argparse.Namespace, console: Console) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode(["agentrun"], shell=args.shell), end="")
    return EXIT_OK
