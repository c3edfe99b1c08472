"""The docs' Agentfile example (docs/languages/agentfile.md), run with the command the page gives: a supervised goal whose
first attempt is reoriented by the supervisor and whose second, carrying the correction, is accepted."""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("worker_process")
SECTION = (ROOT / "docs" / "languages" / "agentfile.md").read_text()


def documented_command() -> list[str]:
    """The page's `start` command as its arguments after `python -m client`, with `python` in
    the agents' commands as this interpreter (the test must not depend on what PATH calls python)."""
    found = re.search(r"^    python -m client start (.*?)\n\n", SECTION, re.DOTALL | re.MULTILINE)
    assert found, "the Agentfile section has no start command"
    args = shlex.split("start " + found.group(1).replace("\\\n", " "))
    return [arg.replace("command:python ", f"command:{sys.executable} ", 1) for arg in args]


def test_the_documented_command_shows_a_goal_reoriented_by_its_supervisor(cli):
    result = cli(*documented_command())
    assert result.code == 0, result.out + result.err
    assert "- Status: COMPLETE" in result.out
    # What the page says the report ends with is what this run's report says.
    shown = re.search(r"^```\n(## Supervision\n.*?)^```$", SECTION, re.DOTALL | re.MULTILINE)
    assert shown and shown.group(1) in result.out
    # The agent orders the versions as numbers only when its prompt says so, and only the
    # supervisor's correction does: so the second EXECUTE prompt carried it.
    assert '"ordered": "1.2.0, 1.9.2, 1.10.0"' in result.out
    assert "following the supervisor's correction" in result.out

    rid = re.search(r"run (\S+) started", result.out).group(1)
    status = cli("status", rid, "--json")
    assert status.code == 0, status.err
    first, second = json.loads(status.out)["supervision"]["main.order"]["attempts"]
    assert first["flags"] == ["concerns_raised"] and second["flags"] == []
    [verdict] = first["verdicts"]
    assert (verdict["verdict"], verdict["by"]) == ("REORIENT", "agent supervisor")
    assert verdict["correction"].startswith("Settle this first: I compared the versions as text")
    assert second["post"]["output"]["ordered"] == "1.2.0, 1.9.2, 1.10.0"
