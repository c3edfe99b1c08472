"""Which bash commands the policy lets through, as the Agentfile's real system decides, and more.

As the real system: commands it always bans (downloaders, sudo, package managers, system and
network changes, dd, ...) and banned subcommands (`pip install --user`, `git config --global`,
...), looked for in every part of a chained command; a piped download run by a shell; the policy's
`denylist` (a name refuses every use of that command, `rm -rf *` its first words; deny wins) and
`allowlist` (when set, only those commands, and none with shell operators: `;`, `|`, `&&`, `$(`,
backticks, redirections or a new line could chain anything after an allowed first word).

Where the real system's examples expect a block its code leaves to a language model or does not
make, we block: a new line chaining a second command, and the commands inside `$(..)`, backticks
and `( .. )`, which are checked too. These are checks on the text; the paths a command names are
the bash tool's to check (activities.tools.commands: outside the work directory, protected files),
and what bounds a command that gets past both is the sandbox (tools.sandbox).
"""

from __future__ import annotations

import re

from agentrun.models.tools import ToolRule

BANNED_COMMANDS = frozenset(
    # Downloading and reaching other hosts: a way out for data and in for code.
    "alias aria2c axel chrome curl curlie firefox http-prompt httpie links lynx nc netcat ncat "
    "safari scp sftp ssh telnet w3m wget xh "
    # Becoming someone else.
    "doas su sudo pkexec gksudo kdesudo "
    # System package managers.
    "apk apt apt-cache apt-get dnf dpkg emerge home-manager makepkg opkg pacman paru pkg pkg_add "
    "pkg_delete portage rpm yay yum zypper snap flatpak nix-env "
    # Changing the system, its services and its schedule.
    "at batch chkconfig crontab fdisk mkfs mount parted service systemctl umount shutdown reboot "
    "poweroff init telinit "
    # Changing the network.
    "firewall-cmd ifconfig ip iptables ip6tables nft netstat pfctl route ufw nmcli networkctl "
    # Users and groups.
    "useradd userdel usermod groupadd groupdel groupmod passwd chpasswd adduser deluser "
    # Disks and devices.
    "shred wipe dd losetup "
    # Capabilities and namespaces.
    "setcap getcap chroot unshare nsenter".split()
)

# (command, words that must all be there, flags of which one blocks); no flags: the words block.
BANNED_SUBCOMMANDS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("apk", ("add",), ()),
    ("apt", ("install",), ()),
    ("apt-get", ("install",), ()),
    ("dnf", ("install",), ()),
    ("pacman", (), ("-S",)),
    ("pkg", ("install",), ()),
    ("yum", ("install",), ()),
    ("zypper", ("install",), ()),
    ("brew", ("install",), ()),
    ("cargo", ("install",), ()),
    ("gem", ("install",), ()),
    ("go", ("install",), ()),
    ("npm", ("install",), ("--global", "-g")),
    ("pip", ("install",), ("--user", "--system")),
    ("pip3", ("install",), ("--user", "--system")),
    ("pnpm", ("add",), ("--global", "-g")),
    ("yarn", ("global", "add"), ()),
    ("go", ("test",), ("-exec",)),
    ("git", ("config", "--global"), ()),
    ("git", ("config", "--system"), ()),
    ("docker", ("run",), ("--privileged",)),
    ("docker", ("run",), ("-v", "/:/")),
    ("podman", ("run",), ("--privileged",)),
)

DANGEROUS_PIPES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"curl\s+.+\|\s*(ba)?sh",
        r"wget\s+.+\|\s*(ba)?sh",
        r"curl\s+.+\|\s*python",
        r"wget\s+.+\|\s*python",
        r"\|\s*sudo\b",
        r"\|\s*su\b",
        r"\|\s*base64\s+-d\s*\|\s*(ba)?sh",
    )
)

# Shell operators that chain, substitute or redirect: none may follow an allow-listed first word.
_OPERATORS = ("&&", "||", ";", "|", "`", "$(", "${", ">", "<", "\n")
# What separates one command from the next, outside quotes: for finding every command's name.
_SEPARATORS = re.compile(r"\|\||&&|[|;&\n()`]|\$\(")


def refusal(command: str, rule: ToolRule) -> str | None:
    """Why bash's table `rule` (and the commands always banned) refuses `command`, or None."""
    text = command.strip()
    if not text:
        return "the command is empty"
    if "\0" in text:
        return "the command contains a NUL character"
    for pattern in DANGEROUS_PIPES:
        if pattern.search(text):
            return f"a download or decoded text piped into a shell is blocked ({pattern.pattern})"
    for segment in segments(text):
        reason = _segment_refusal(segment, rule)
        if reason:
            return reason
    if rule.allowlist:
        return _allowlist_refusal(text, rule.allowlist)
    return None


def segments(command: str) -> list[str]:
    """The simple commands of a command line: split at `;`, `|`, `&&`, `||`, `&`, new lines, and
    into `$(..)`, backticks and parentheses, outside quotes."""
    found: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(command):
        c = command[i]
        if quote:
            if c == quote:
                quote = ""
            elif quote == '"' and command.startswith("$(", i):
                # A substitution inside double quotes still runs: check what it runs.
                found.append("".join(current))
                current = []
                i += 2
                continue
            current.append(c)
        elif c in "'\"":
            quote = c
            current.append(c)
        elif (m := _SEPARATORS.match(command, i)) is not None:
            found.append("".join(current))
            current = []
            i = m.end()
            continue
        else:
            current.append(c)
        i += 1
    found.append("".join(current))
    return [s.strip() for s in found if s.strip() and s.strip() not in ("{", "}")]


def base_command(segment: str) -> str:
    """The program a simple command runs: past `VAR=value` assignments and `env`, without its folder."""
    words = program_words(segment)
    return words[0] if words else ""


def program_words(segment: str) -> list[str]:
    """A simple command's words from its program on (`env X=1 /usr/bin/rm -rf a` → rm -rf a)."""
    words = segment.split()
    while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]) or words[0] in ("env", "command", "exec")):
        words = words[1:]
    if not words:
        return []
    return [words[0].strip("'\"").rsplit("/", 1)[-1], *words[1:]]


def _segment_refusal(segment: str, rule: ToolRule) -> str | None:
    words = program_words(segment)
    name = words[0] if words else ""
    if name in BANNED_COMMANDS:
        return f"command '{name}' is blocked for security"
    for denied in rule.denylist:
        # A denied name refuses its program anywhere; longer entries a part that starts with their words.
        wanted = [w for w in denied.split() if w != "*"]
        if wanted == [name] or (len(wanted) > 1 and words[: len(wanted)] == wanted):
            return f"command '{segment}' is blocked by the policy's denylist ({denied})"
    for program, needed, flags in BANNED_SUBCOMMANDS:
        if name != program or not all(word in words[1:] for word in needed):
            continue
        if not flags:
            return f"command '{program} {' '.join(needed)}' is blocked for security"
        for flag in flags:
            if any(word == flag or word.startswith(flag + "=") for word in words[1:]):
                return f"command '{program}' with '{flag}' is blocked for security"
    return None


def _allowlist_refusal(command: str, allowlist: list[str]) -> str | None:
    if any(op in command for op in _OPERATORS):
        return "shell operators (;, |, &&, $(, `, >, <, new lines) are not allowed with the policy's allowlist"
    if any(_matches(pattern, command) for pattern in allowlist):
        return None
    return f"command is not in the policy's allowlist ({', '.join(allowlist)})"


def _matches(pattern: str, command: str) -> bool:
    """The real system's command pattern: the same words, or the words before a final `*` first."""
    want, have = pattern.split(), command.split()
    if not want:
        return False
    if len(want) >= 2 and want[-1] == "*":
        return have[: len(want) - 1] == want[:-1]
    return have == want
