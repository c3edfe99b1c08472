"""Running a program that uses the API to its end.

Temporal's SDK keeps native threads that may still call into Python while the interpreter
finalizes, which aborts a short-lived process now and then with "PyGILState_Release: thread state
… must be current" (temporalio/sdk-python#300). The command line leaves without finalizing for
that reason; `run` does the same for a program's `main`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Coroutine
from typing import Any, NoReturn


def run(main: Coroutine[Any, Any, int | None]) -> NoReturn:
    """`asyncio.run(main)`, then leave with its exit code (0 for None; 1 and the traceback for an
    exception, 130 for Ctrl-C), with what was printed flushed and the interpreter not finalized."""
    try:
        code = asyncio.run(main) or 0
    except KeyboardInterrupt:
        code = 130
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass
    os._exit(code)
