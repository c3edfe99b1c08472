"""The built-in tools, each called through the run_tool activity on a work directory of its own:
what the model reads back and what changed on disk. The attacks are in test_tool_attacks.py, the
policy file in test_tool_policy.py."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from agentrun.activities.tools import grep
from agentrun.models.tools import (
    BUILTIN_TOOLS,
    ToolLimits,
    ToolPolicy,
    ToolResult,
    ToolRule,
    builtin_specs,
    nearest_tool_name,
)
from agentrun.policy.globs import glob_regex
from tests.fakes.web import FakeWeb
from tests.tool_calls import OneToolCall, call, make_input, start_tool_worker


@pytest.fixture
def wd(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def data(result: ToolResult):
    assert result.ok, result.content
    return json.loads(result.content)


# --- read, write, edit ---


async def test_read_gives_the_file_and_a_missing_one_is_an_error_not_a_refusal(wd):
    (wd / "notes.md").write_text("line one\nline two\n")
    done = await call(wd, "read", path="notes.md")
    assert done.ok and done.content == "line one\nline two\n"
    assert done.taint_source == "tool:read" and done.call_id == "call-read"
    missing = await call(wd, "read", path="nope.md")
    assert not missing.ok and not missing.refused
    assert "nope.md" in missing.content and "no such file" in missing.content


async def test_write_makes_the_folders_on_the_way_and_replaces_a_file(wd):
    done = await call(wd, "write", path="src/pkg/utils/helper.go", content="package utils\n")
    assert done.ok and done.content == "ok"
    assert (wd / "src/pkg/utils/helper.go").read_text() == "package utils\n"
    await call(wd, "write", path="src/pkg/utils/helper.go", content="short")
    assert (wd / "src/pkg/utils/helper.go").read_text() == "short"


async def test_edit_replaces_the_first_occurrence_and_never_makes_a_file(wd):
    (wd / "test.txt").write_text("old text, old text\n")
    assert (await call(wd, "edit", path="test.txt", old="old text", new="new text")).ok
    assert (wd / "test.txt").read_text() == "new text, old text\n"

    absent_text = await call(wd, "edit", path="test.txt", old="missing", new="x")
    assert not absent_text.ok and "not found" in absent_text.content
    assert (wd / "test.txt").read_text() == "new text, old text\n"

    # The real system's example: edit on a file that is not there must fail, not create it.
    absent_file = await call(wd, "edit", path="nonexistent.txt", old="x", new="backdoor")
    assert not absent_file.ok and not (wd / "nonexistent.txt").exists()


async def test_a_path_inside_the_work_directory_may_be_absolute(wd):
    (wd / "a.txt").write_text("here")
    assert (await call(wd, "read", path=str(wd / "a.txt"))).content == "here"


# --- glob, grep, ls ---


async def test_glob_matches_one_level_or_any_depth_relative_to_the_work_directory(wd):
    for path in ("main.go", "util.go", "cmd/app/main.go", "README.md", "docs/a.md"):
        (wd / path).parent.mkdir(parents=True, exist_ok=True)
        (wd / path).write_text("x")
    assert data(await call(wd, "glob", pattern="*.go")) == ["main.go", "util.go"]
    assert data(await call(wd, "glob", pattern="**/*.go")) == ["cmd/app/main.go", "main.go", "util.go"]
    assert data(await call(wd, "glob", pattern="cmd/**/*.go")) == ["cmd/app/main.go"]
    assert data(await call(wd, "glob", pattern="*.{go,md}")) == ["README.md", "main.go", "util.go"]
    assert data(await call(wd, "glob", pattern="nowhere/*.go")) == []


@pytest.mark.parametrize(
    ("pattern", "braces", "matches", "misses"),
    [
        ("*.{go,md}", True, ["a.go", "b.md"], ["a.py", "a.{go,md}"]),
        ("*.{go,md}", False, ["a.{go,md}"], ["a.go"]),  # a policy glob: Go's filepath.Match has no braces
        ("[!a]?", False, ["bx"], ["ax", "b/"]),
        ("[]]", False, ["]"], ["a"]),  # a `]` first is in the class; policy globs raised re.error
        ("[!]]", True, ["a"], ["]"]),  # both raised re.error
        ("[\\w]", False, ["w", "\\"], ["a"]),  # a backslash is itself; policy globs took \w as any word character
        ("[]", False, ["[]"], ["a"]),  # no character in it: not a class
        ("a[b", True, ["a[b"], ["ab"]),
    ],
)
def test_a_glob_reads_the_same_for_the_glob_tool_and_the_policy(pattern, braces, matches, misses):
    regex = re.compile(glob_regex(pattern, braces))
    assert [m for m in matches if regex.fullmatch(m)] == matches
    assert [m for m in misses if regex.fullmatch(m)] == []


async def test_grep_searches_a_folder_or_a_file_and_says_where(wd):
    (wd / "a.py").write_text("x = 1\n# NEEDLE: fix\n")
    (wd / "pkg").mkdir()
    (wd / "pkg" / "b.py").write_text("NEEDLE first\nfine\n")
    (wd / "blob.bin").write_bytes(b"\0NEEDLE\0")
    found = data(await call(wd, "grep", pattern="NEEDLE", path="."))
    assert found == [
        {"file": "a.py", "line": 2, "content": "# NEEDLE: fix"},
        {"file": "pkg/b.py", "line": 1, "content": "NEEDLE first"},
    ]
    assert data(await call(wd, "grep", pattern=r"^x\s*=", path="a.py")) == [
        {"file": "a.py", "line": 1, "content": "x = 1"}
    ]
    bad = await call(wd, "grep", pattern="(unclosed", path=".")
    assert not bad.ok and "invalid regular expression" in bad.content


async def test_grep_with_a_pattern_that_backtracks_forever_ends_with_an_error(wd, monkeypatch):
    monkeypatch.setattr(grep, "TIME_LIMIT_S", 1.0)
    (wd / "long.txt").write_text("a" * 40 + "!\n")
    done = await call(wd, "grep", pattern="(a|aa)+$", path="long.txt")
    assert not done.ok and "took longer than 1s" in done.content
    assert done.duration_s < 20  # the regex module looks at its clock now and then, not at every step


async def test_ls_lists_names_kinds_and_sizes(wd):
    (wd / "README.md").write_text("12345")
    (wd / "src").mkdir()
    assert data(await call(wd, "ls", path=".")) == [
        {"name": "README.md", "is_dir": False, "size": 5},
        {"name": "src", "is_dir": True, "size": os.stat(wd / "src").st_size},
    ]
    assert not (await call(wd, "ls", path="missing")).ok


# --- bash ---


async def test_bash_runs_in_the_work_directory_and_reports_output_and_status(wd):
    result = data(await call(wd, "bash", command='pwd; echo "$HOME"; echo oops >&2; printf made > out.txt; exit 3'))
    assert result["stdout"] == f"{wd}\n{wd}\n"
    assert result["stderr"] == "oops\n" and result["exit_code"] == 3
    assert (wd / "out.txt").read_text() == "made"
    # What bash made, the file tools see.
    assert (await call(wd, "read", path="out.txt")).content == "made"


async def test_bash_output_is_cut_to_the_cap_keeping_its_start_and_end(wd):
    policy = ToolPolicy(limits=ToolLimits(output_chars=4000))
    result = await call(wd, "bash", policy, command="echo FIRST; seq 1 100000; echo LAST")
    out = data(result)["stdout"]
    assert out.startswith("FIRST\n") and out.endswith("LAST\n") and "bytes cut" in out
    assert len(result.content) <= 4000 + 100


async def test_a_command_that_outlives_its_time_is_killed_and_the_model_told(wd):
    policy = ToolPolicy(tools={"bash": ToolRule(timeout_s=1)})
    result = await call(wd, "bash", policy, command="echo started; sleep 30")
    assert not result.ok and not result.refused
    assert "timed out after 1s" in result.content and "started" in result.content
    assert result.duration_s < 10


# --- the web ---


async def test_web_fetch_reads_a_page_as_text_following_redirects_when_private_addresses_are_allowed(wd):
    with FakeWeb() as web:
        web.page(
            "/doc",
            "<html><head><title>t</title><script>var x=1;</script></head><body><h1>Title</h1><p>Some &amp; text</p></body></html>",
        )
        web.redirect("/old", "/doc")
        web.page("/data.json", '{"a": 1}', "application/json")
        policy = ToolPolicy(allow_private=True)
        page = await call(wd, "web_fetch", policy, url=web.url("/old"), question="what is the title?")
        assert page.ok and page.content == "Title\n\nSome & text"
        assert page.taint_source == "tool:web_fetch"
        assert (await call(wd, "web_fetch", policy, url=web.url("/data.json"))).content == '{"a": 1}'
        missing = await call(wd, "web_fetch", policy, url=web.url("/gone"))
        assert not missing.ok and "HTTP 404" in missing.content
        # The request went to the address checked, still naming the host it was asked for.
        assert ("/doc", f"127.0.0.1:{web.port}") in web.hits


async def test_web_fetch_keeps_to_allow_domains(wd):
    with FakeWeb() as web:
        web.page("/", "<p>hi</p>")
        policy = ToolPolicy(allow_private=True, tools={"web_fetch": ToolRule(allow_domains=["*.example.com"])})
        refused = await call(wd, "web_fetch", policy, url=web.url("/", host="localhost"))
        assert refused.refused and "allow_domains" in refused.content
        allowed = ToolPolicy(allow_private=True, tools={"web_fetch": ToolRule(allow_domains=["localhost"])})
        assert (await call(wd, "web_fetch", allowed, url=web.url("/", host="localhost"))).content == "hi"
        assert web.count == 1


async def test_web_search_without_a_service_tells_the_model_so(wd, monkeypatch):
    for name in ("SEARXNG_URL", "BRAVE_API_KEY", "TAVILY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = await call(wd, "web_search", query="golang error handling")
    assert not result.ok and not result.refused
    assert "no search service" in result.content and "SEARXNG_URL" in result.content


async def test_web_search_asks_the_searxng_instance_the_worker_names(wd, monkeypatch):
    with FakeWeb() as web:
        web.search_results = [
            {"title": f"Result {i}", "url": f"https://example.com/{i}", "content": f"snippet {i}"} for i in range(8)
        ]
        monkeypatch.setenv("SEARXNG_URL", web.url(""))
        found = data(await call(wd, "web_search", query="error handling", count=3))
        assert found == [
            {"title": f"Result {i}", "url": f"https://example.com/{i}", "snippet": f"snippet {i}"} for i in range(3)
        ]
        assert web.searches[-1]["q"] == ["error handling"] and web.searches[-1]["format"] == ["json"]


# --- names, the policy's switches, the cap ---


async def test_pipeline_names_map_onto_the_built_ins_and_an_unknown_tool_is_refused(wd):
    (wd / "a.txt").write_text("A")
    read = await call(wd, "Read", path="a.txt")
    assert read.ok and read.name == "read" and read.content == "A"
    unknown = await call(wd, "Delete", path="a.txt")
    assert unknown.refused and "there is no tool named Delete" in unknown.content
    assert (wd / "a.txt").exists()


async def test_a_tool_the_policy_disables_is_refused(wd):
    (wd / "a.txt").write_text("A")
    off = ToolPolicy(tools={"write": ToolRule(enabled=False)})
    result = await call(wd, "write", off, path="a.txt", content="B")
    assert result.refused and "disabled" in result.content
    assert (wd / "a.txt").read_text() == "A"
    # default_deny: a tool without a table of its own is off.
    assert (await call(wd, "read", ToolPolicy(default_deny=True), path="a.txt")).refused


async def test_a_long_result_is_cut_to_the_output_cap(wd):
    (wd / "big.txt").write_text("x" * 10_000)
    result = await call(wd, "read", ToolPolicy(limits=ToolLimits(output_chars=1000)), path="big.txt")
    assert result.ok and result.truncated
    assert result.content.startswith("x" * 1000 + "\n[… cut here") and "1000 characters" in result.content


def test_specs_and_names():
    assert [s.name for s in builtin_specs(["Read", "Write", "Bash", "read", "mcp_fs_read"])] == [
        "read",
        "write",
        "bash",
    ]
    assert [s.name for s in builtin_specs()] == list(BUILTIN_TOOLS)
    edit = builtin_specs(["edit"])[0]
    assert edit.parameters["required"] == ["path", "old", "new"]
    assert builtin_specs(["web_search"])[0].parameters["properties"]["count"]["type"] == "integer"
    assert nearest_tool_name("raed") == "read"
    assert nearest_tool_name("WebFetsh") == "WebFetch"
    assert nearest_tool_name("web-search") in ("web_search", "WebSearch")
    assert nearest_tool_name("zzzz") is None


async def test_arguments_that_do_not_fit_the_declared_schema_are_an_error_the_model_reads(wd):
    # The schema a model is offered and the parsing of its call come from one declaration per tool.
    bad = {
        ("read", ()): "missing argument 'path'",
        ("write", (("path", "a.txt"), ("content", 5))): "argument 'content' must be a string, not int",
        ("web_search", (("query", "q"), ("count", "many"))): "argument 'count': Input should be a valid integer",
    }
    for (tool, args), said in bad.items():
        result = await call(wd, tool, **dict(args))
        assert not result.ok and not result.refused and said in result.content, (tool, result.content)
    assert not (wd / "a.txt").exists()
    # grep and ls are offered `path` as required, as the real system offers them, and take "." without it.
    assert builtin_specs(["grep"])[0].parameters["required"] == ["pattern", "path"]
    (wd / "notes.md").write_text("found it\n")
    assert "found it" in (await call(wd, "grep", pattern="found")).content


def test_every_built_in_has_a_module_and_a_spec():
    from agentrun.activities.tools.registry import TOOLS

    assert list(TOOLS) == list(BUILTIN_TOOLS)
    for name in BUILTIN_TOOLS:
        module = __import__(f"agentrun.activities.tools.{name}", fromlist=["call"])
        assert module.call is TOOLS[name]


# --- through a real worker on the dev server ---


async def test_a_tool_call_is_an_activity_of_a_real_worker(client, address, tmp_path):
    wd = tmp_path / "work"
    wd.mkdir()
    queue = f"tools-{uuid.uuid4().hex[:8]}"
    worker = start_tool_worker(
        address, queue, {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    )
    try:
        wrote = await client.execute_workflow(
            OneToolCall.run,
            make_input(wd, "write", path="made/by/worker.txt", content="hello"),
            id=f"w-{queue}",
            task_queue=queue,
        )
        assert wrote.ok and (wd / "made/by/worker.txt").read_text() == "hello"
        handle = client.get_workflow_handle(f"w-{queue}")
        history = await handle.fetch_history()
        scheduled = [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
        assert [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled] == ["run_tool"]
        refused = await client.execute_workflow(
            OneToolCall.run, make_input(wd, "read", path="../../etc/passwd"), id=f"r-{queue}", task_queue=queue
        )
        assert refused.refused and "outside the work directory" in refused.content and "root:" not in refused.content
    finally:
        worker.kill()
        worker.wait()


async def test_web_fetch_to_a_closed_port_is_an_error_the_model_reads(wd):
    result = await call(wd, "web_fetch", ToolPolicy(allow_private=True), url="http://127.0.0.1:1/")
    assert not result.ok and not result.refused and "cannot connect to 127.0.0.1:1" in result.content
