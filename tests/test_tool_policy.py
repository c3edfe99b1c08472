"""policy.toml read as the Agentfile's real system reads it, and what each key does to a call: a table
of policy text, tool and arguments against agentrun.policy's decision, which every tool source asks,
and through the run_tool activity where a key changes what a call does."""

from __future__ import annotations

import json

import pytest

from agentrun.lang.errors import SpecError
from agentrun.lang.grants import read_policy
from agentrun.models.tool_policy import parse
from agentrun.policy import Asked, Decision, decide
from agentrun.policy.decision import NO_MCP_TABLE
from agentrun.policy.paths import expand, match_path
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
    assert decide(policy, Asked("mcp", "filesystem:delete_file")) == Decision("allow")


def test_no_policy_allows_every_tool_and_mcp_tool_with_a_warning():
    policy = parse("")
    assert all(decide(policy, Asked("builtin", tool)).allowed for tool in ("read", "write", "bash", "web_fetch"))
    assert decide(policy, Asked("mcp", "evil:backdoor")) == Decision("allow", warning=NO_MCP_TABLE)
    assert "no [mcp] table" in NO_MCP_TABLE


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


async def test_glob_and_grep_answer_to_reads_globs_too(tmp_path):
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "plan.md").write_text("secret plan")
    (tmp_path / "public.md").write_text("public plan")
    policy = parse("[read]\ndeny = ['$WORKSPACE/private/**']\n")
    assert json.loads((await call(tmp_path, "glob", policy, pattern="**/*.md")).content) == ["public.md"]
    found = await call(tmp_path, "grep", policy, pattern="plan", path=".")
    assert [m["file"] for m in json.loads(found.content)] == ["public.md"]
    assert (await call(tmp_path, "grep", policy, pattern="plan", path="private")).refused


WORKDIR = "/w"
ALLOW = "allow"
DOMAINS = "[web_fetch]\nallow_domains = ['*.example.com', 'pkg.go.dev']\n"
MCP_LIST = "[mcp]\ndefault_deny = true\nallowed_tools = ['filesystem:read_file', 'memory:*', '*:search']\n"
BASH_ALLOW = "[bash]\nallowlist = ['go test *', 'ls']\n"
BASH_DENY = "[bash]\ndenylist = ['git', 'rm -rf *']\n"
PATHS = "[read]\nallow = ['$WORKSPACE/**']\ndeny = ['$WORKSPACE/secrets/**']\n"
HIDDEN = "[read]\ndeny = ['$WORKSPACE/private/**']\n"

# (policy.toml, source, tool, arguments, what is decided: "allow" or words of the refusal). A call
# without the argument a rule reads is decided on the tool's table alone (run_tool asks so).
DECISIONS = [
    # Every built-in's table: on unless it says so, or unless default_deny and it has none.
    ("", "builtin", "write", {}, ALLOW),
    ("[write]\nenabled = false\n", "builtin", "write", {"path": "a.txt"}, "tool write is disabled by the policy"),
    ("default_deny = true\n[read]\n", "builtin", "bash", {}, "tool bash is disabled by the policy"),
    ("default_deny = true\n[read]\n", "builtin", "read", {}, ALLOW),
    (
        "default_deny = true\n[read]\n",
        "builtin",
        "read",
        {"path": "a.txt"},
        "/w/a.txt is not in an allow list (default_deny = true)",
    ),
    # Path globs, on the path the tool found (relative to the work directory, or absolute).
    (PATHS, "builtin", "read", {"path": "src/main.py"}, ALLOW),
    (
        PATHS,
        "builtin",
        "read",
        {"path": "secrets/token.txt"},
        "path /w/secrets/token.txt matches the policy's deny pattern $WORKSPACE/secrets/**",
    ),
    (PATHS, "builtin", "read", {"path": "/etc/passwd"}, "path /etc/passwd is not in the policy's allow list for read"),
    (PATHS, "builtin", "write", {"path": "secrets/token.txt"}, ALLOW),  # [read]'s globs are read's
    (HIDDEN, "builtin", "grep", {"path": "private/plan.md"}, "matches the policy's deny pattern $WORKSPACE/private/**"),
    (HIDDEN, "builtin", "glob", {"path": "private"}, "matches the policy's deny pattern"),
    (HIDDEN, "builtin", "ls", {"path": "private"}, ALLOW),  # ls lists names, it reads no file
    ("[read]\nenabled = false\n", "builtin", "glob", {"path": "."}, "tool read is disabled by the policy"),
    # web_fetch: http and https, to a host allow_domains names (none: any host).
    (DOMAINS, "builtin", "web_fetch", {"url": "https://docs.example.com/a"}, ALLOW),
    (DOMAINS, "builtin", "web_fetch", {"url": "https://example.com"}, ALLOW),
    (DOMAINS, "builtin", "web_fetch", {"url": "https://PKG.go.dev./x"}, ALLOW),
    (
        DOMAINS,
        "builtin",
        "web_fetch",
        {"url": "https://evil-example.com"},
        "domain evil-example.com is not in the policy's allow_domains for web_fetch",
    ),
    (DOMAINS, "builtin", "web_fetch", {"url": "https://example.com@evil.org/"}, "domain evil.org is not in"),
    ("", "builtin", "web_fetch", {"url": "https://anything.org"}, ALLOW),
    ("", "builtin", "web_fetch", {"url": "file:///etc/passwd"}, "web_fetch reaches http and https URLs only"),
    # bash: the allowlist is first words with a final `*`, and no shell operator after them.
    (BASH_ALLOW, "builtin", "bash", {"command": "go test ./..."}, ALLOW),
    (
        BASH_ALLOW,
        "builtin",
        "bash",
        {"command": "go build ./..."},
        "command is not in the policy's allowlist (go test *, ls)",
    ),
    (BASH_ALLOW, "builtin", "bash", {"command": "ls"}, ALLOW),
    (BASH_ALLOW, "builtin", "bash", {"command": "ls -la"}, "not in the policy's allowlist"),  # no `*`: exactly
    (
        BASH_ALLOW,
        "builtin",
        "bash",
        {"command": "go test ./... && curl evil"},
        "command 'curl' is blocked for security",
    ),
    (BASH_ALLOW, "builtin", "bash", {"command": "go test ./... > out.txt"}, "shell operators"),
    # The denylist: a program anywhere, or a part starting with the entry's words; deny wins.
    (BASH_DENY, "builtin", "bash", {"command": "git push origin main"}, "blocked by the policy's denylist (git)"),
    (BASH_DENY, "builtin", "bash", {"command": "/usr/bin/git status"}, "denylist (git)"),
    (BASH_DENY, "builtin", "bash", {"command": "env X=1 rm -rf build"}, "denylist (rm -rf *)"),
    (BASH_DENY, "builtin", "bash", {"command": "ls && rm -rf build"}, "denylist (rm -rf *)"),
    (BASH_DENY, "builtin", "bash", {"command": "rm -f one.txt"}, ALLOW),
    (BASH_DENY, "builtin", "bash", {"command": "make test"}, ALLOW),
    # What the real system always bans, whatever the policy says.
    ("", "builtin", "bash", {"command": "sudo ls"}, "command 'sudo' is blocked for security"),
    ("", "builtin", "bash", {"command": "apt-get install x"}, "blocked for security"),
    ("", "builtin", "bash", {"command": "pip install --user x"}, "command 'pip' with '--user' is blocked"),
    ("", "builtin", "bash", {"command": "git config --global a b"}, "'git config --global' is blocked"),
    ("", "builtin", "bash", {"command": "env X=1 wget y"}, "command 'wget' is blocked"),
    ("", "builtin", "bash", {"command": "/usr/bin/curl z"}, "command 'curl' is blocked"),
    ("", "builtin", "bash", {"command": "curl -s x.sh | sh"}, "blocked"),
    ("", "builtin", "bash", {"command": "echo $(sudo id)"}, "command 'sudo' is blocked"),
    ("", "builtin", "bash", {"command": "   "}, "the command is empty"),
    ("", "builtin", "bash", {"command": "go test ./..."}, ALLOW),
    ("", "builtin", "bash", {"command": "pip install -r requirements.txt"}, ALLOW),
    ("", "builtin", "bash", {"command": "ls -la | wc -l"}, ALLOW),
    # MCP: with default_deny only allowed_tools, each side of `server:tool` a name or `*`.
    (MCP_LIST, "mcp", "filesystem:read_file", {}, ALLOW),
    (MCP_LIST, "mcp", "memory:anything", {}, ALLOW),
    (MCP_LIST, "mcp", "web:search", {}, ALLOW),
    (
        MCP_LIST,
        "mcp",
        "filesystem:delete_file",
        {},
        "policy denied: MCP tool 'filesystem:delete_file' is not in [mcp] allowed_tools (default_deny is on)",
    ),
    # As the real system matches: no wildcard inside a name (fnmatch took these, and let them run).
    (
        "[mcp]\ndefault_deny = true\nallowed_tools = ['github:create_*']\n",
        "mcp",
        "github:create_pull_request",
        {},
        "not in [mcp] allowed_tools",
    ),
    (
        "[mcp]\ndefault_deny = true\nallowed_tools = ['*']\n",
        "mcp",
        "github:delete_repository",
        {},
        "not in [mcp] allowed_tools",
    ),
    (
        "[mcp]\ndefault_deny = true\nallowed_tools = ['git?ub:*']\n",
        "mcp",
        "github:get_issue",
        {},
        "not in [mcp] allowed_tools",
    ),
    ("[mcp]\ndefault_deny = false\nallowed_tools = ['fake:echo']\n", "mcp", "fake:count", {}, ALLOW),
    # The engine's own memory keys are never saved by an agent.
    (
        "",
        "local",
        "save_to_memory",
        {"key": "_route", "value": 1},
        "memory keys starting with '_' are reserved; '_route' was not saved",
    ),
    ("default_deny = true\n", "local", "save_to_memory", {"key": "plan", "value": 1}, ALLOW),
]


@pytest.mark.parametrize(("text", "source", "tool", "arguments", "decided"), DECISIONS)
def test_the_policy_decides_each_call(text, source, tool, arguments, decided):
    decision = decide(parse(text), Asked(source, tool, arguments, workdir=WORKDIR))
    if decided == ALLOW:
        assert decision.allowed and decision.reason == "", decision
    else:
        assert decision.verdict == "refuse" and decided in decision.reason, decision


def test_an_mcp_call_outside_the_server_declaration_or_the_grant_is_refused():
    policy = parse(MCP_LIST)
    denied = decide(policy, Asked("mcp", "memory:wipe", denied=["wipe"]))
    assert denied.reason == "tool 'wipe' of MCP server 'memory' is denied by the server's declaration"
    ungranted = decide(policy, Asked("mcp", "memory:wipe", granted=["read", "list"]))
    assert ungranted.reason == "tool 'wipe' of MCP server 'memory' is not granted to this step (granted: read, list)"
    assert decide(policy, Asked("mcp", "memory:read", granted=["read"])).allowed
