"""Workers in containers: a worker reads the paths a run names through AGENTRUN_PATH_MAP (a folder
mounted elsewhere), and the compose file builds its workers from the Dockerfile, mounts the project
at the host's path and the host's folder of large values, and lets `--scale worker=N` start more of them."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT, SHELL_AGENT, run_id, start_worker, write_spec


def test_a_worker_reads_the_work_directory_through_the_path_map(cli, address, tmp_path, monkeypatch):
    host, container = tmp_path / "host", tmp_path / "container"
    host.mkdir()
    container.mkdir()
    spec = write_spec(host, 'name: mapped\nsubtasks:\n  write: {instructions: "```sh\\necho hi > here.txt\\n```"}\n')
    queue = run_id("q-mapped")
    monkeypatch.setenv("AGENTRUN_PATH_MAP", f"/nowhere=/else,{host}={container}")
    worker = start_worker(address, "--task-queue", queue)
    try:
        result = cli("start", str(spec), "--agent", SHELL_AGENT, "--task-queue", queue)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert result.code == 0, result.out + result.err
    assert (container / "here.txt").read_text() == "hi\n" and not (host / "here.txt").exists()

    monkeypatch.setenv("AGENTRUN_PATH_MAP", "relative=/work")
    bad = cli("start", str(spec), "--agent", SHELL_AGENT, "--task-queue", run_id("q-bad"))
    assert bad.code == 2 and bad.err.startswith(
        "error: AGENTRUN_PATH_MAP: 'relative=/work' is not HOST_PATH=LOCAL_PATH"
    )


def test_compose_builds_scalable_workers_that_see_the_project_at_its_host_path():
    worker = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]
    assert worker["build"] == "." and "pip install" not in str(worker.get("command", ""))
    assert "container_name" not in worker and "ports" not in worker  # each scaled copy needs neither
    assert worker["volumes"][0] == "${PWD}:${PWD}" and worker["environment"]["AGENTRUN_PATH_MAP"]
    # Large values: the folder a client on the host reads by default, unless AGENTRUN_BLOB_URL says else.
    assert "${HOME}/.local/state/agentrun/blobs:/blobs" in worker["volumes"]
    assert worker["environment"]["AGENTRUN_BLOB_URL"] == "${AGENTRUN_BLOB_URL:-/blobs}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'RUN pip install --no-cache-dir ".[s3]"' in dockerfile and 'CMD ["agentrun", "worker"]' in dockerfile
