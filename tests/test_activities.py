"""The check_criteria, call_provider and check_preconditions activities, through the real SDK
test environment, with real subprocesses and a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentrun.activities.criteria import check_criteria
from agentrun.activities.preconditions import check_preconditions
from agentrun.activities.provider import call_provider
from agentrun.activities.providers.registry import get_provider, provider_names
from agentrun.models.calls import CheckResult, CriteriaCall, PreconditionCall, ProviderCall, ProviderResult
from tests.conftest import alive

# ---------------------------------------------------------------- helpers


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    spec_dir, workdir = tmp_path / "spec", tmp_path / "work"
    spec_dir.mkdir()
    workdir.mkdir()
    return spec_dir, workdir


async def criteria(dirs: tuple[Path, Path], heartbeats: list[Any] | None = None, **kw: Any) -> CheckResult:
    spec_dir, workdir = dirs
    env = ActivityEnvironment()
    if heartbeats is not None:
        env.on_heartbeat = lambda *details: heartbeats.append(details)
    call = CriteriaCall(task_id="t", workdir=str(workdir), spec_dir=str(spec_dir), **kw)
    return await env.run(check_criteria, call)


async def provider(workdir: Path, provider: str, method: str, **kw: Any) -> ProviderResult:
    call = ProviderCall(task_id="t", workdir=str(workdir), provider=provider, method=method, **kw)
    return await ActivityEnvironment().run(call_provider, call)


async def provider_error(workdir: Path, provider_name: str, method: str, **kw: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await provider(workdir, provider_name, method, **kw)
    return info.value


async def preconditions(dirs: tuple[Path, Path], **kw: Any) -> CheckResult:
    spec_dir, workdir = dirs
    call = PreconditionCall(task_id="t", workdir=str(workdir), spec_dir=str(spec_dir), **kw)
    return await ActivityEnvironment().run(check_preconditions, call)


def wait_for_file(path: Path, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# Starts a grandchild in the check's process group and records its pid, then hangs.
SPAWN_AND_HANG = """
import subprocess, time
child = subprocess.Popen(["sleep", "60"])
open("grandchild.pid", "w").write(str(child.pid))
time.sleep(60)
"""


# ---------------------------------------------------------------- success criteria: inline python


async def test_python_pass(dirs: tuple[Path, Path]) -> None:
    assert await criteria(dirs, python="result = 1 + 1 == 2") == CheckResult(ok=True)


async def test_python_false_says_so(dirs: tuple[Path, Path]) -> None:
    assert await criteria(dirs, python="result = False") == CheckResult(ok=False, error="result was False")


async def test_python_exception_carries_text_and_line(dirs: tuple[Path, Path]) -> None:
    code = "count = 2\nresult = True\nassert count == 3, 'expected 3 files, found 2'\n"
    res = await criteria(dirs, python=code)
    assert not res.ok
    assert "AssertionError: expected 3 files, found 2" in res.error
    assert "line 3: assert count == 3" in res.error


async def test_python_exception_inside_a_function_points_at_user_line(
    dirs: tuple[Path, Path],
) -> None:
    code = "import json\ndef load():\n    return json.loads('{nope')\nresult = load() == {}\n"
    res = await criteria(dirs, python=code)
    assert not res.ok
    assert "JSONDecodeError" in res.error
    assert "line 3: return json.loads('{nope')" in res.error


async def test_python_syntax_error(dirs: tuple[Path, Path]) -> None:
    res = await criteria(dirs, python="result = (1 +\n")
    assert not res.ok and "SyntaxError" in res.error


async def test_python_error_message_is_the_error(dirs: tuple[Path, Path]) -> None:
    code = "result = False\nerror_message = 'only 2 of 3 tests pass'"
    assert await criteria(dirs, python=code) == CheckResult(ok=False, error="only 2 of 3 tests pass")


async def test_python_error_message_ignored_when_result_true(dirs: tuple[Path, Path]) -> None:
    code = "result = True\nerror_message = 'stale'"
    assert await criteria(dirs, python=code) == CheckResult(ok=True)


async def test_python_missing_result(dirs: tuple[Path, Path]) -> None:
    res = await criteria(dirs, python="x = 1")
    assert not res.ok and "did not set `result`" in res.error


async def test_python_non_bool_result(dirs: tuple[Path, Path]) -> None:
    res = await criteria(dirs, python="result = 1")
    assert not res.ok and "must be a bool" in res.error and "int" in res.error


async def test_python_runs_in_workdir_in_another_process(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    (workdir / "marker.txt").write_text("here")
    code = (
        "import os\n"
        f"result = (os.path.samefile(os.getcwd(), {str(workdir)!r})"
        f" and open('marker.txt').read() == 'here' and os.getpid() != {os.getpid()})"
    )
    assert await criteria(dirs, python=code) == CheckResult(ok=True)


async def test_python_exit_does_not_touch_the_worker(dirs: tuple[Path, Path]) -> None:
    res = await criteria(dirs, python="import sys\nsys.exit(3)")
    assert not res.ok and "exit(3)" in res.error


async def test_python_hard_crash_reports_stderr(dirs: tuple[Path, Path]) -> None:
    code = "import os, sys\nsys.stderr.write('disk on fire\\n'); sys.stderr.flush()\nos._exit(7)"
    res = await criteria(dirs, python=code)
    assert not res.ok
    assert "exited with status 7" in res.error and "disk on fire" in res.error


async def test_python_timeout_kills_process_group_and_heartbeats(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    heartbeats: list[Any] = []
    started = time.monotonic()
    res = await criteria(dirs, heartbeats, python=SPAWN_AND_HANG, timeout_s=1.5)
    assert time.monotonic() - started < 5
    assert res == CheckResult(ok=False, error="the check timed out after 1.5s")
    assert heartbeats, "no heartbeat while waiting for the check"
    grandchild = int(wait_for_file(workdir / "grandchild.pid"))
    await asyncio.sleep(0.2)
    assert not alive(grandchild)


async def test_cancellation_kills_process_group(dirs: tuple[Path, Path]) -> None:
    spec_dir, workdir = dirs
    env = ActivityEnvironment()
    call = CriteriaCall(task_id="t", workdir=str(workdir), spec_dir=str(spec_dir), python=SPAWN_AND_HANG)
    running = asyncio.ensure_future(env.run(check_criteria, call))
    grandchild = int(await asyncio.to_thread(wait_for_file, workdir / "grandchild.pid"))
    assert alive(grandchild)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await asyncio.sleep(0.2)
    assert not alive(grandchild)


async def test_criteria_needs_exactly_one_kind(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(ApplicationError) as info:
        await criteria(dirs, python="result = True", script="check.py")
    assert info.value.non_retryable


# ---------------------------------------------------------------- success criteria: scripts


async def test_py_script_relative_to_spec_dir(dirs: tuple[Path, Path]) -> None:
    spec_dir, workdir = dirs
    write(spec_dir / "checks" / "helper.py", "WANT = 'done'\n")
    write(
        spec_dir / "checks" / "check.py",
        """
        from helper import WANT  # the script's own folder is importable
        result = open("out.txt").read().strip() == WANT
        if not result:
            error_message = "out.txt does not say done"
        """,
    )
    (workdir / "out.txt").write_text("done\n")
    assert await criteria(dirs, script="checks/check.py") == CheckResult(ok=True)
    (workdir / "out.txt").write_text("not yet\n")
    assert await criteria(dirs, script="checks/check.py") == CheckResult(ok=False, error="out.txt does not say done")


async def test_py_script_exception_names_script_line(dirs: tuple[Path, Path]) -> None:
    spec_dir, _ = dirs
    write(spec_dir / "check.py", "import os\nresult = os.path.getsize('missing.bin') > 0\n")
    res = await criteria(dirs, script=str(spec_dir / "check.py"))  # absolute path allowed
    assert not res.ok
    assert "FileNotFoundError" in res.error and "missing.bin" in res.error
    assert "line 2: result = os.path.getsize" in res.error


async def test_shell_script_pass_and_fail_with_stderr(dirs: tuple[Path, Path]) -> None:
    spec_dir, workdir = dirs
    write(
        spec_dir / "check.sh",
        """
        #!/bin/sh
        echo "checking in $(pwd)"
        if [ ! -f report.md ]; then echo "report.md is missing" >&2; exit 3; fi
        """,
        executable=True,
    )
    res = await criteria(dirs, script="check.sh")
    assert not res.ok
    assert "check.sh exited with status 3" in res.error
    assert "report.md is missing" in res.error
    (workdir / "report.md").write_text("# ok")
    assert await criteria(dirs, script="check.sh") == CheckResult(ok=True)


async def test_non_executable_script_runs_by_its_shebang(dirs: tuple[Path, Path]) -> None:
    spec_dir, _ = dirs
    write(spec_dir / "check.tool", f"#!{sys.executable}\nimport sys\nsys.exit(0 if 1 else 1)\n")
    assert await criteria(dirs, script="check.tool") == CheckResult(ok=True)
    write(spec_dir / "check.tool", f"#!{sys.executable}\nraise SystemExit('nope, said python')\n")
    res = await criteria(dirs, script="check.tool")
    assert not res.ok and "nope, said python" in res.error


async def test_missing_script_is_a_failed_check(dirs: tuple[Path, Path]) -> None:
    res = await criteria(dirs, script="checks/absent.py")
    assert not res.ok
    assert "not found" in res.error and "absent.py" in res.error


# ---------------------------------------------------------------- shell provider


async def test_shell_stdout_and_output_file(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    (workdir / "input.txt").write_text("hello from the workdir\n")
    res = await provider(
        workdir,
        "shell",
        "run",
        params={"command": 'cat input.txt; echo "$GREETING"', "env": {"GREETING": "hi"}},
        output_file="out/nested/result.txt",
    )
    assert res.text == "hello from the workdir\nhi\n"
    assert (workdir / "out" / "nested" / "result.txt").read_text() == res.text


async def test_shell_argv_is_not_shell_parsed(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    res = await provider(workdir, "shell", "run", params={"argv": ["echo", "$HOME; ls"]})
    assert res.text == "$HOME; ls\n"


async def test_shell_nonzero_exit_carries_stderr(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    command = "echo compiling; echo 'boom: bad input' >&2; exit 4"
    err = await provider_error(workdir, "shell", "run", params={"command": command})
    assert err.non_retryable and err.type == "CommandFailed"
    assert "exited with status 4" in err.message and "boom: bad input" in err.message


async def test_shell_timeout_is_retryable(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    started = time.monotonic()
    err = await provider_error(workdir, "shell", "run", params={"command": "sleep 30", "timeout_s": 0.5})
    assert time.monotonic() - started < 5
    assert not err.non_retryable and "timed out" in err.message


async def test_shell_cancellation_kills_group_and_heartbeats(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    env = ActivityEnvironment()
    heartbeats: list[Any] = []
    env.on_heartbeat = lambda *details: heartbeats.append(details)
    call = ProviderCall(
        task_id="t",
        workdir=str(workdir),
        provider="shell",
        method="run",
        params={"command": "sleep 60 & echo $! > grandchild.pid; wait"},
    )
    running = asyncio.ensure_future(env.run(call_provider, call))
    grandchild = int(await asyncio.to_thread(wait_for_file, workdir / "grandchild.pid"))
    await asyncio.sleep(1.3)
    assert heartbeats, "no heartbeat while the command ran"
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await asyncio.sleep(0.2)
    assert not alive(grandchild)


@pytest.mark.parametrize(
    "method, params",
    [
        ("run", {"command": "true", "argv": ["true"]}),
        ("run", {"comand": "true"}),
        ("run", {"argv": "true"}),
        ("run", {"argv": ["no-such-program-xyz"]}),
        ("exec", {"command": "true"}),
    ],
)
async def test_shell_bad_params_are_not_retryable(dirs: tuple[Path, Path], method: str, params: dict[str, Any]) -> None:
    err = await provider_error(dirs[1], "shell", method, params=params)
    assert err.non_retryable and err.type == "BadParams"


# ---------------------------------------------------------------- http provider


class _EchoHandler(BaseHTTPRequestHandler):
    """Replies with what it got; /status/NNN replies with that status."""

    def _reply(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        if url.path.startswith("/status/"):
            code = int(url.path.rsplit("/", 1)[1])
            payload = f"status {code} on purpose".encode()
        else:
            code = 200
            payload = json.dumps(
                {
                    "method": self.command,
                    "path": url.path,
                    "query": parse_qs(url.query),
                    "x_test": self.headers.get("X-Test"),
                    "content_type": self.headers.get("Content-Type"),
                    "body": body,
                }
            ).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = _reply

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy configured on the test machine must not intercept calls to the local server.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


async def test_http_get_with_query_and_headers(dirs: tuple[Path, Path], http_url: str) -> None:
    _, workdir = dirs
    res = await provider(
        workdir,
        "http",
        "get",
        params={"url": f"{http_url}/items", "params": {"q": "x y"}, "headers": {"X-Test": "yes"}},
        output_file="http/get.json",
    )
    got = json.loads(res.text)
    assert (got["method"], got["path"], got["query"], got["x_test"]) == (
        "GET",
        "/items",
        {"q": ["x y"]},
        "yes",
    )
    assert (workdir / "http" / "get.json").read_text() == res.text


async def test_http_post_json_and_put_data(dirs: tuple[Path, Path], http_url: str) -> None:
    _, workdir = dirs
    post = await provider(workdir, "http", "post", params={"url": http_url, "json": {"a": [1, 2]}})
    posted = json.loads(post.text)
    assert posted["method"] == "POST" and json.loads(posted["body"]) == {"a": [1, 2]}
    assert posted["content_type"] == "application/json"
    put = json.loads((await provider(workdir, "http", "PUT", params={"url": http_url, "data": "raw text"})).text)
    assert (put["method"], put["body"]) == ("PUT", "raw text")
    deleted = json.loads((await provider(workdir, "http", "delete", params={"url": http_url})).text)
    assert deleted["method"] == "DELETE"


async def test_http_404_is_not_retryable(dirs: tuple[Path, Path], http_url: str) -> None:
    err = await provider_error(dirs[1], "http", "get", params={"url": f"{http_url}/status/404"})
    assert err.non_retryable
    assert "404" in err.message and "status 404 on purpose" in err.message


async def test_http_503_is_retryable(dirs: tuple[Path, Path], http_url: str) -> None:
    err = await provider_error(dirs[1], "http", "get", params={"url": f"{http_url}/status/503"})
    assert not err.non_retryable and "503" in err.message


async def test_http_connection_refused_is_retryable(dirs: tuple[Path, Path]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    err = await provider_error(dirs[1], "http", "get", params={"url": f"http://127.0.0.1:{port}/", "timeout_s": 2})
    assert not err.non_retryable


async def test_http_bad_params_are_not_retryable(dirs: tuple[Path, Path]) -> None:
    for method, params in [
        ("get", {}),
        ("patch", {"url": "http://127.0.0.1/"}),
        ("post", {"url": "http://127.0.0.1/", "json": {}, "data": "x"}),
        ("get", {"url": "ftp://127.0.0.1/"}),
    ]:
        err = await provider_error(dirs[1], "http", method, params=params)
        assert err.non_retryable and err.type == "BadParams", (method, params, err)


# ---------------------------------------------------------------- registry


async def test_unknown_provider_names_the_known_ones(dirs: tuple[Path, Path]) -> None:
    err = await provider_error(dirs[1], "smtp", "send")
    assert err.non_retryable and err.type == "UnknownProvider"
    assert "'smtp'" in err.message and "http" in err.message and "shell" in err.message


@pytest.fixture
def echo_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Installs a provider the way a third-party package would: a dist-info with an entry point."""
    site = tmp_path / "site"
    write(
        site / "agentrun_echo_plugin.py",
        """
        class EchoProvider:
            # Sync on purpose: the activity must run it in a thread.
            def call(self, method, params, workdir):
                import threading
                on_main = threading.current_thread() is threading.main_thread()
                return f"{method}:{params['say']}:{on_main}"
        """,
    )
    dist = site / "agentrun_echo_plugin-1.0.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: agentrun-echo-plugin\nVersion: 1.0\n")
    write(
        dist / "entry_points.txt",
        "[agentrun.providers]\necho = agentrun_echo_plugin:EchoProvider\n",
    )
    monkeypatch.syspath_prepend(str(site))
    return "echo"


async def test_entry_point_plugin_is_found_and_sync_runs_in_thread(dirs: tuple[Path, Path], echo_plugin: str) -> None:
    assert echo_plugin in provider_names()
    assert {"http", "shell"} <= set(provider_names())
    res = await provider(dirs[1], echo_plugin, "shout", params={"say": "hi"})
    assert res.text == "shout:hi:False"


def test_get_provider_builtins() -> None:
    assert callable(get_provider("shell").call) and callable(get_provider("http").call)


# ---------------------------------------------------------------- preconditions


async def test_files_exist_min_count(dirs: tuple[Path, Path]) -> None:
    _, workdir = dirs
    write(workdir / "src" / "a.py", "")
    write(workdir / "src" / "pkg" / "b.py", "")
    (workdir / "src" / "pkg" / "dir.py").mkdir()  # a folder counts too, as in cyberian
    ok = await preconditions(dirs, files_exist=["src/**/*.py", "src/a.py"], min_count=1)
    assert ok == CheckResult(ok=True)
    assert await preconditions(dirs, files_exist=["**/*.py"], min_count=3) == CheckResult(ok=True)
    res = await preconditions(dirs, files_exist=["**/*.py", "docs/*.md", "src/a.py"], min_count=4)
    assert not res.ok
    assert "'**/*.py' matched 3 files, need at least 4" in res.error
    assert "no files match 'docs/*.md'" in res.error
    assert "'src/a.py' matched 1 file, need at least 4" in res.error


async def test_sync_targets_copy_then_files_exist(dirs: tuple[Path, Path]) -> None:
    spec_dir, workdir = dirs
    write(spec_dir / "templates" / "prompt.md", "new template")
    write(spec_dir / "data" / "set1" / "x.csv", "1,2")
    write(spec_dir / "data" / "y.csv", "3,4")
    write(workdir / "templates" / "prompt.md", "old template")
    write(workdir / "data" / "keep.txt", "untouched")
    res = await preconditions(
        dirs,
        sync_targets=["templates/prompt.md", "data"],
        files_exist=["data/**/*.csv"],
        min_count=2,
    )
    assert res == CheckResult(ok=True)
    assert (workdir / "templates" / "prompt.md").read_text() == "new template"
    assert (workdir / "data" / "set1" / "x.csv").read_text() == "1,2"
    assert (workdir / "data" / "keep.txt").read_text() == "untouched"


async def test_a_missing_sync_target_is_a_warning(dirs: tuple[Path, Path]) -> None:
    res = await preconditions(dirs, sync_targets=["nowhere/config.yaml"])
    assert res.ok and res.error == ""
    assert len(res.warnings) == 1 and "'nowhere/config.yaml' not found in the spec folder" in res.warnings[0]


async def test_sync_target_may_not_escape_spec_dir(dirs: tuple[Path, Path]) -> None:
    res = await preconditions(dirs, sync_targets=["../work"])
    assert not res.ok and "inside the spec folder" in res.error


async def test_a_provider_result_too_large_to_keep_fails_at_once_saying_how_big(
    dirs: tuple[Path, Path], http_url: str
) -> None:
    _, workdir = dirs
    err = await provider_error(workdir, "http", "post", params={"url": http_url, "data": "x" * 17_000_000})
    assert err.non_retryable and err.type == "ResultTooLarge"
    assert err.message == "the result of http.post for task 't' is 17.0 MB, over the 16.0 MB a step may return"


async def test_secrets_of_the_worker_are_redacted_from_failures_and_check_output(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-0123456789")
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to tell from ordinary text: left alone
    _, workdir = dirs
    (workdir / "notes").write_text("token tok-0123456789, abc\n")
    err = await provider_error(workdir, "shell", "run", params={"command": "cat notes; exit 3"})
    assert "token [redacted DEPLOY_TOKEN], abc" in err.message and "tok-0123456789" not in err.message
    checked = await criteria(dirs, python="raise RuntimeError(open('notes').read())")
    assert not checked.ok and "RuntimeError: token [redacted DEPLOY_TOKEN], abc" in checked.error
