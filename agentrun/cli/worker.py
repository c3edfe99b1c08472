"""`agentrun worker` (its arguments are agentrun.worker.args): the worker loads when it runs."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from agentrun.worker.__main__ import run as run_worker

    return run_worker(args)
