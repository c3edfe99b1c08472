"""`client list`: a header and aligned columns, filters by status and spec, a limit that says when
more runs exist, JSON, and a plain line when nothing matches."""

from __future__ import annotations

import json

from tests.conftest import SHELL_AGENT, run_id, wait_for, write_spec


async def test_list_filters_limits_and_says_when_there_is_nothing(cli, client, tmp_path):
    spec_name = run_id("listed")
    spec = write_spec(tmp_path, f'name: {spec_name}\nsubtasks:\n  one: {{instructions: "```sh\\necho hi\\n```"}}\n')
    idle = run_id("q-idle")  # no worker: these runs stay pending
    waiting = [run_id("w"), run_id("w"), run_id("w")]
    for rid in waiting:
        assert cli("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", idle, "--detach").code == 0
    done = run_id("done")
    assert cli("start", str(spec), "--agent", SHELL_AGENT, "--id", done, "--task-queue", run_id("q-run")).code == 0
    await client.get_workflow_handle(waiting[0]).terminate(reason="test")

    def listed(*more: str) -> list[list[str]]:
        result = cli("list", "--spec", spec_name, *more)
        assert result.code == 0, result.err
        return [line.split() for line in result.out.splitlines()]

    wait_for(lambda: len(listed()) == 5)
    table = cli("list", "--spec", spec_name).out.splitlines()
    assert table[0].split() == ["RUN", "STATUS", "SPEC", "STARTED", "ENDED"]
    assert len({line.index(spec_name) for line in table[1:]}) == 1  # one column, aligned
    rows = {cells[0]: cells for cells in listed()[1:]}
    assert [rows[done][1], rows[waiting[0]][1], rows[waiting[1]][1]] == ["COMPLETE", "TERMINATED", "PENDING"]
    assert [cells[0] for cells in listed("--status", "completed")[1:]] == [done]
    assert [cells[0] for cells in listed("--status", "terminated")[1:]] == [waiting[0]]
    # The column's own word filters as the status does.
    assert [cells[0] for cells in listed("--status", "complete")[1:]] == [done]

    limited = listed("--limit", "2")
    assert len(limited) == 4 and limited[-1] == "showing 2 of 4 runs: --limit N shows more".split()
    data = json.loads(cli("list", "--spec", spec_name, "--json").out)
    assert {r["run_id"] for r in data} == {done, *waiting}
    assert set(data[0]) == {"run_id", "status", "spec", "started", "ended"}

    nothing = cli("list", "--spec", spec_name, "--status", "failed")
    assert nothing.code == 0 and nothing.out == f"no runs match --status failed --spec {spec_name}\n"
    assert cli("list", "--limit", "0").code == 2
