"""Broken and hostile specs through `validate`: one clear message or a valid spec, never a traceback,
never a hang or a memory blow-up."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from agentrun.cli import client as main
from tests.conftest import ROOT
from tests.fuzz_specs import write_corpus

LIMIT_S = 10.0
LIMIT_RSS_MB = 300


def test_every_spec_of_the_corpus_is_valid_or_one_clear_error(tmp_path, capsys):
    paths = write_corpus(tmp_path)
    assert len(paths) >= 300
    failures = []
    for path in paths:
        started = time.monotonic()
        try:
            code = main(["validate", str(path)])
        except BaseException as exc:  # noqa: BLE001 - any escape is the defect being looked for
            failures.append(f"{path.name}: {type(exc).__name__}: {exc}"[:300])
            continue
        took = time.monotonic() - started
        out, err = capsys.readouterr()
        if took > LIMIT_S:
            failures.append(f"{path.name}: validate took {took:.1f}s")
        if "Traceback" in out + err:
            failures.append(f"{path.name}: a traceback")
        if code == 2 and not re.search(rf"{re.escape(str(path))}(:\d+:\d+)?: error: ", err):
            failures.append(f"{path.name}: exit 2 without file:line: {err[:200]!r}")
        if code not in (0, 2):
            failures.append(f"{path.name}: exit {code}")
    assert not failures, "\n".join(failures)


# Validates every spec of the corpus in one process, as the test above does, with nothing else in it.
# It prints VmHWM, its own peak: getrusage's ru_maxrss would count the test process it was forked from.
VALIDATE_ALL = """
import contextlib, io, sys
from agentrun.cli import client
for path in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        client(["validate", path])
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def test_validating_the_whole_corpus_keeps_the_process_small(tmp_path):
    """Measured in a process of its own: the test process's high-water mark counts every test before."""
    paths = write_corpus(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", VALIDATE_ALL, *map(str, paths)], cwd=ROOT, check=True, timeout=600, capture_output=True
    )
    peak_mb = int(done.stdout.split()[-1]) / 1024
    assert peak_mb < LIMIT_RSS_MB, f"validate grew the process to {peak_mb:.0f} MB"
