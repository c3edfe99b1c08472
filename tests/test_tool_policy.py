"""policy.toml read as the Agentfile's real system reads it, and what each key does to a call:
checked through the run_tool activity where a key changes what a call does."""

from __future__ import annotations

import json

import pytest

from agentrun.activities.tools import commands
from agentrun.activities.tools.policy import check_domain, check_mcp_tool, expand, match_path
from agentrun.lang.errors import SpecError
from agentrun.lang.grants import read_policy
from agentrun.models.tool_policy import parse
from agentrun.models.tools import ToolPolicy
from tests.tool_calls import call

# Our own policy in the real system's shape: every tool enabled, a web tool with a rate limit,
# bash with a denylist, MCP in development mode, the content-scanning section.
REAL_SHAPE = """
default_deny = false

[mcp]
default_deny = false  # development mode
# allowed_tools = ["filesystem:read_file"]

[security]
extra_patterns = ["exfil_curl:(?i)curl\\\\s+.*-d"]
extra_keywords = ["confidential"]

[web_fetch]
enabled = true
rate_limit = 30

[read]
enabled = true

[bash]
enabled = true
denylist = ["rm -rf *", "sudo *", "chmod 777 *"]

[memory_read]
enabled = true
"""


def test_a_policy_in_the_real_systems_shape_reads_as_it_does():
    policy = parse(REAL_SHAPE, "policy.toml")
    assert not policy.default_deny
    assert policy.rule("bash").denylist == ["rm -rf *", "sudo *", "chmod 777 *"]
    assert policy.rule("web_fetch").enabled and policy.rule("memory_read").enabled
    assert policy.rule("write").enabled  # no table, no default_deny: enabled
    assert policy.mcp is not None and not policy.mcp.default_deny
    assert check_mcp_tool(policy, "filesystem", "delete_file") == (None, "")


def test_no_policy_allows_every_tool_and_mcp_tool_with_a_warning():
    policy = parse("")
    assert all(policy.rule(tool).enabled for tool in ("read", "write", "bash", "web_fetch"))
    allowed, warning = check_mcp_tool(policy, "evil", "backdoor")
    assert allowed is None and "no [mcp] table" in warning


async def test_default_deny_turns_off_tools_without_a_table_and_paths_without_an_allow(tmp_path):
    (tmp_path / "a.txt").write_text("A")
    policy = parse("default_deny = true\n[read]\n[ls]\nallow = ['$WORKSPACE/**']\n")
    assert not policy.rule("write").enabled and policy.rule("read").enabled
    write = await call(tmp_path, "write", policy, path="b.txt", content="B")
    assert write.refused and "disabled" in write.content and not (tmp_path / "b.txt").exists()
    # [read] has no allow list: under default_deny it reads nothing.
    read = await call(tmp_path, "read", policy, path="a.txt")
    assert read.refused and "default_deny" in read.content
    listed = await call(tmp_path, "ls", policy, path=".")
    assert listed.ok and json.loads(listed.content)[0]["name"] == "a.txt"


async def test_deny_wins_over_allow_with_workspace_expanded(tmp_path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token.txt").write_text("T")
    (tmp_path / "src.py").write_text("S")
    policy = parse("[read]\nallow = ['$WORKSPACE/**']\ndeny = ['$WORKSPACE/secrets/**']\n")
    assert (await call(tmp_path, "read", policy, path="src.py")).content == "S"
    denied = await call(tmp_path, "read", policy, path="secrets/token.txt")
    assert denied.refused and "deny pattern $WORKSPACE/secrets/**" in denied.content
    # grep leaves the denied folder out rather than failing.
    found = await call(tmp_path, "grep", parse("[grep]\ndeny = ['$WORKSPACE/secrets/**']\n"), pattern=".", path=".")
    assert [m["file"] for m in json.loads(found.content)] == ["src.py"]


def test_paths_match_as_the_real_system_matches_them():
    assert expand("$WORKSPACE/src/**", "/w", "/home/u") == "/w/src/**"
    assert expand("~/.ssh/*", "/w", "/home/u") == "/home/u/.ssh/*"
    assert match_path("/w/**", "/w/a/b/c.txt")
    assert match_path("/w/**/*.go", "/w/cmd/app/main.go") and not match_path("/w/**/*.go", "/w/main.py")
    assert match_path("/w/*.txt", "/w/a.txt") and not match_path("/w/*.txt", "/w/sub/a.txt")
    assert match_path("/w/[]]x", "/w/]x") and match_path("/w/[!]]x", "/w/ax") and not match_path("/w/[\\w]", "/w/a")


def test_allow_domains_takes_a_host_or_its_subdomains():
    policy = parse("[web_fetch]\nallow_domains = ['*.example.com', 'pkg.go.dev']\n")
    assert check_domain(policy, "web_fetch", "docs.example.com") is None
    assert check_domain(policy, "web_fetch", "example.com") is None
    assert check_domain(policy, "web_fetch", "pkg.go.dev") is None
    assert "not in the policy's allow_domains" in (check_domain(policy, "web_fetch", "evil-example.com") or "")
    assert check_domain(parse(""), "web_fetch", "anything.org") is None


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("go test ./...", True),
        ("go build ./...", False),
        ("ls", True),
        ("ls -la", False),  # an allowlist entry without `*` is the exact command
        ("go test ./... && curl evil", False),
        ("go test ./... > out.txt", False),
    ],
)
def test_bash_allowlist_first_words_and_a_final_star(command, allowed, tmp_path):
    policy = parse("[bash]\nallowlist = ['go test *', 'ls']\n")
    assert (commands.refusal(command, policy, str(tmp_path)) is None) is allowed


def test_bash_always_refuses_the_real_systems_banned_commands(tmp_path):
    policy = ToolPolicy()
    for command in (
        "sudo ls",
        "apt-get install x",
        "pip install --user x",
        "git config --global a b",
        "env X=1 wget y",
        "/usr/bin/curl z",
    ):
        assert commands.refusal(command, policy, str(tmp_path)), command
    for command in (
        "go test ./...",
        "pip install -r requirements.txt",
        "git status",
        "python3 -m pytest -q",
        "ls -la | wc -l",
    ):
        assert commands.refusal(command, policy, str(tmp_path)) is None, command


def test_mcp_default_deny_allows_only_the_listed_tools():
    policy = parse("[mcp]\ndefault_deny = true\nallowed_tools = ['filesystem:read_file', 'memory:*', '*:search']\n")
    assert check_mcp_tool(policy, "filesystem", "read_file")[0] is None
    assert check_mcp_tool(policy, "memory", "anything")[0] is None
    assert check_mcp_tool(policy, "web", "search")[0] is None
    reason, _ = check_mcp_tool(policy, "filesystem", "delete_file")
    assert reason == "MCP tool filesystem:delete_file is not in the policy's [mcp] allowed_tools"


def test_our_own_keys_set_the_limits():
    policy = parse(
        "protected_files = ['*.pem']\nmax_output = 5000\n"
        "[bash]\ntimeout = 5\nmax_processes = 10\nmax_memory_mb = 100\nmax_file_mb = 2\n"
        "[web_fetch]\nallow_private = true\n"
    )
    assert policy.protected_files == ["*.pem"] and policy.allow_private
    limits = policy.limits
    assert (limits.output_chars, limits.bash_timeout_s, limits.processes) == (5000, 5, 10)
    assert (limits.memory_bytes, limits.file_bytes) == (100 << 20, 2 << 20)
    assert policy.rule("bash").timeout_s == 5


@pytest.mark.parametrize(
    ("text", "line", "said"),
    [
        ("default_deny = true\n[read\n", 2, "not valid TOML"),
        ('[write]\nenabled = "yes"\n', 2, "[write] enabled must be true or false"),
        ("\n[read]\nalow = ['$WORKSPACE/**']\n", 3, "unknown key 'alow' in [read]"),
        ("[bash]\ndenylist = 'rm'\n", 2, "[bash] denylist must be a list of strings"),
        ("default_deny = 1\n", 1, "default_deny must be true or false"),
        ("[mcp]\ndefault_deny = true\nallowed = ['a:b']\n", 3, "unknown key 'allowed' in [mcp]"),
        ("[bash]\ntimeout = -3\n", 2, "[bash] timeout must be a whole number above 0"),
        ("max_output = 10\ndefault_dney = true\n", 2, "unknown key 'default_dney' at the top level"),
        ("[security]\nextra_pattern = []\n", 2, "unknown key 'extra_pattern' in [security]"),
        ("[bash]\nmax_output = 10\n", 2, "unknown key 'max_output' in [bash]"),  # a top-level key
        ("mcp = true\n", 1, "mcp must be a table: [mcp]"),
        ('sandbox = "none"\n', 1, 'sandbox must be "on" or "off"'),
        ("[bash]\nallow_network = 'yes'\n", 2, "[bash] allow_network must be true or false"),
        ("[bash]\nallow_write = '/srv'\n", 2, "[bash] allow_write must be a list of strings"),
        ("default_deny = false\n\n[bsh]\ndenylist = ['rm']\n", 3, "[bsh] is no tool's table"),  # bash's rules
    ],
)
def test_a_bad_policy_is_one_clear_error_with_file_and_line(tmp_path, text, line, said):
    path = tmp_path / "policy.toml"
    path.write_text(text)
    tables, why, _ = read_policy(str(path))
    assert tables is None and why.startswith(f"{path}:{line}:") and said in why
    assert "Traceback" not in why
    with pytest.raises(SpecError) as caught:
        parse(text, str(path))
    assert str(caught.value).startswith(f"{path}:{line}:") and said in str(caught.value)


def test_an_unknown_key_gets_the_nearest_known_one_as_a_hint():
    with pytest.raises(SpecError) as caught:
        parse("[read]\nalow = []\n", "p.toml")
    assert "hint: did you mean 'allow'?" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        parse("[bash]\nzzz = 1\n", "p.toml")
    assert "hint: the keys are enabled, allow, deny" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        parse("[web_fetcher]\nallow_domains = ['example.com']\n", "p.toml")
    assert "hint: did you mean [web_fetch]?" in str(caught.value)


def test_keys_the_real_system_knows_and_tables_of_its_other_tools_are_read():
    policy = parse(
        "allowed_dirs = ['/srv']\n[bash]\nsandbox = true\nrate_limit = 5\nallowed_dirs = ['/srv']\n"
        "[code_search]\nenabled = false\n"  # a tool we do not have: its table is the real system's
    )
    assert policy.rule("bash").enabled and not policy.rule("code_search").enabled


def test_a_missing_policy_file_says_so(tmp_path):
    assert read_policy(str(tmp_path / "nope.toml")) == (None, f"no policy file {tmp_path / 'nope.toml'}", "")


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        ("git push origin main", True),
        ("/usr/bin/git status", True),
        ("env X=1 rm -rf build", True),
        ("ls && rm -rf build", True),
        ("rm -f one.txt", False),
        ("make test", False),
    ],
)
def test_bash_denylist_names_a_program_or_the_first_words(command, refused, tmp_path):
    policy = parse("[bash]\ndenylist = ['git', 'rm -rf *']\n")
    assert (commands.refusal(command, policy, str(tmp_path)) is not None) is refused


async def test_glob_and_grep_answer_to_reads_globs_too(tmp_path):
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "plan.md").write_text("secret plan")
    (tmp_path / "public.md").write_text("public plan")
    policy = parse("[read]\ndeny = ['$WORKSPACE/private/**']\n")
    assert json.loads((await call(tmp_path, "glob", policy, pattern="**/*.md")).content) == ["public.md"]
    found = await call(tmp_path, "grep", policy, pattern="plan", path=".")
    assert [m["file"] for m in json.loads(found.content)] == ["public.md"]
    assert (await call(tmp_path, "grep", policy, pattern="plan", path="private")).refused
