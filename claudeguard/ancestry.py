"""Who a process is, and whether it runs inside a guarded session.

Every path that acts for a human (an answer to a request, ``config trust``, the desk's first
URL) asks ``inside_guarded_session(pid)`` about the process at its other end (its pid from
``SO_PEERCRED``): a process the agent started must never answer for the human. Inside means
that the process, or one of its ancestors, is

- a Claude Code CLI process (its executable is ``claude``/``claude.exe`` or a binary of the
  native installer's ``claude/versions/`` dir, or node/bun running Claude Code): every tool,
  hook, MCP server and whatever they start. The launcher makes each CLI it starts a child
  subreaper (``shim/child.py``, ``shim/leader.py``), so a double-forked,
  ``setsid``'d or ``nohup``'d process of a tool is re-parented to the CLI, not to init, and
  stays inside for the session's life. Claude Code's own daemon and pty hosts (``--bg``, agent
  view) are such processes too, so the trees they host are inside;
- the CLI or the launcher of a session registered in the runtime dir (``sessions/*``), or one
  of their descendants (the launcher itself is not inside its own session: it registers and
  unregisters it).

``identity(pid)`` is what an audit row records of the process that answered: ``{uid, pid,
tty, command}``. Linux only (``/proc``); elsewhere nothing is known, and an unknown process is
refused by the callers (fail closed). Imports ``os`` and ``json`` only: the waiter of a request
may be a hook process.
"""

from __future__ import annotations

import json
import os

from claudeguard import home

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import TypedDict

    class Identity(TypedDict):
        """A process as an audit row names the one that answered (the contract's ``answered_by``)."""

        uid: int
        pid: int
        tty: str | None  # its controlling terminal (``/dev/pts/3``), None without one
        command: str  # its command line, at most COMMAND_MAX characters

    Known = dict[int, tuple[str, str | None]]  # pid -> (session id, its recorded start or None)

    class Proc(TypedDict):
        pid: int
        ppid: int
        start: str
        tty_nr: int

CLI_NAMES = ("claude", "claude.exe")
# The native installer keeps each version as ~/.local/share/claude/versions/<version> (its
# ~/.local/bin/claude links there): the process's executable is that file, named by its version.
NATIVE_VERSIONS = ("claude", "versions")
RUNTIMES = ("node", "nodejs", "bun")
COMMAND_MAX = 300
MAX_DEPTH = 256  # a walk up the tree never loops, but a pid namespace could be odd


def _stat(pid: int) -> Proc | None:
    """pid, ppid, start time and tty of a live process (None: gone, a zombie, or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields follow the last ')'.
    rest = raw[raw.rfind(b")") + 2:].split()
    if len(rest) < 20 or rest[0] in (b"Z", b"X"):
        return None
    return {"pid": pid, "ppid": int(rest[1]), "tty_nr": int(rest[4]), "start": rest[19].decode()}


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def cli_executable(path: str) -> bool:
    """A path Claude Code's native binary runs as: ``claude``/``claude.exe`` (npm's, the platform
    package's, an IDE's or an SDK's bundled copy), or a version of the native installer's
    (``.../claude/versions/2.1.330``)."""
    if os.path.basename(path) in CLI_NAMES:
        return True
    versions = os.path.dirname(path)
    return (os.path.basename(versions), os.path.basename(os.path.dirname(versions))) == NATIVE_VERSIONS[::-1]


def is_claude_cli(pid: int) -> bool:
    """The process runs Claude Code: its executable is named ``claude``/``claude.exe`` or is a
    version of the native installer's (``cli_executable``: the native CLI, its daemon and pty
    hosts), or it is node/bun with Claude Code's script in its
    first arguments. Its own name (``comm``) is not asked: any process may set that."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    exe = exe.removesuffix(" (deleted)")
    base = os.path.basename(exe)
    if cli_executable(exe):
        return True
    if base.split(".")[0].rstrip("0123456789.-") in RUNTIMES:
        return any("claude-code" in arg or arg.endswith("/claude") for arg in _cmdline(pid)[1:3])
    return False


def ancestry(pid: int) -> list[Proc]:
    """``pid`` and its ancestors, nearest first, up to (not including) pid 0; empty when ``pid``
    is not a live process."""
    chain: list[Proc] = []
    seen: set[int] = set()
    while pid > 0 and pid not in seen and len(chain) < MAX_DEPTH:
        seen.add(pid)
        found = _stat(pid)
        if found is None:
            break
        chain.append(found)
        pid = found["ppid"]
    return chain


def runtime_root() -> str:
    """The runtime root as ``paths.runtime_root`` has it (this module is below ``paths``)."""
    return os.environ.get("CLAUDEGUARD_RUNTIME_DIR") or home.default_root()


def _read(path: str) -> dict[str, object]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        data = json.loads(os.read(fd, 1 << 20) or b"{}")
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else {}


def known_sessions(root: str | None = None) -> tuple[Known, Known]:
    """The guarded sessions of the runtime dir: (their CLIs, their launchers), each pid -> (session
    id, its start time as recorded, or None where the record has none: ``session.json``)."""
    sessions = os.path.join(root or runtime_root(), "sessions")
    clis: Known = {}
    launchers: Known = {}
    try:
        names = os.listdir(sessions)
    except OSError:
        return clis, launchers
    for sid in names:
        status = _read(os.path.join(sessions, sid, "status.json"))
        for pid_key, start_key, into in (("child_pid", "child_start", clis), ("pid", "pid_start", launchers)):
            pid, start = status.get(pid_key), status.get(start_key)
            if isinstance(pid, int) and pid > 0:
                into[pid] = (sid, str(start) if start is not None else None)
        snapshot = _read(os.path.join(sessions, sid, "session.json"))
        pid = snapshot.get("pid")
        # A --bg launch's launcher is gone once the CLI is dispatched: its pid names nobody.
        if isinstance(pid, int) and pid > 0 and pid not in launchers and snapshot.get("kind") != "background":
            launchers[pid] = (sid, None)
    return clis, launchers


def _lookup(table: Known, proc: Proc) -> str | None:
    """The session ``proc`` is recorded for: same pid and start; a record without a start
    (``session.json``) only for a process that runs claudeguard (a pid reused since is not)."""
    found = table.get(proc["pid"])
    if found is None:
        return None
    sid, start = found
    if start is not None:
        return sid if start == proc["start"] else None
    return sid if any("claudeguard" in arg for arg in _cmdline(proc["pid"])[:3]) else None


def inside_guarded_session(pid: int, *, root: str | None = None) -> str | None:
    """The session ``pid`` runs inside of (see the module's docstring), None when it runs
    outside every one. What is returned names the session for a one-line refusal: its id when
    the runtime dir knows it, else the Claude Code process it runs under (``claude pid N``).
    A process that cannot be seen (gone, another pid namespace) counts as inside: ``"unknown
    process N"`` (nobody can vouch for it)."""
    chain = ancestry(pid)
    if not chain:
        return f"unknown process {pid}"
    clis, launchers = known_sessions(root)
    cli_seen: int | None = None
    for depth, proc in enumerate(chain):
        sid = _lookup(clis, proc)
        if sid is None and depth > 0:
            sid = _lookup(launchers, proc)  # a launcher is not inside its own session
        if sid is not None:
            return sid
        if cli_seen is None and is_claude_cli(proc["pid"]):
            cli_seen = proc["pid"]
    return f"claude pid {cli_seen}" if cli_seen is not None else None


def caller_inside_session(pid: int) -> str | None:
    """``inside_guarded_session`` for a caller the kernel named a moment ago (``SO_PEERCRED``):
    a process gone, or another one under the same pid once the walk ended (a pid reused), counts
    as inside too, and is named so."""
    before = _stat(pid)
    inside = inside_guarded_session(pid) if before is not None else f"unknown process {pid}"
    after = _stat(pid)
    if before is None or after is None or after["start"] != before["start"]:
        inside = inside or f"process {pid} went away before it could be checked"
    return inside


def tty_name(tty_nr: int) -> str | None:
    """``/proc/PID/stat``'s tty_nr as a device path (``/dev/pts/3``); None for no terminal."""
    if tty_nr == 0:
        return None
    major = (tty_nr >> 8) & 0xFFF
    minor = (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
    if 136 <= major <= 143:
        return f"/dev/pts/{(major - 136) * 256 + minor}"
    if major == 4:
        return f"/dev/tty{minor}" if minor < 64 else f"/dev/ttyS{minor - 64}"
    if major == 5 and minor == 0:
        return "/dev/tty"
    return f"tty {major}:{minor}"


def identity(pid: int, uid: int) -> Identity:
    """What an audit row records of the process that answered: its uid (as the kernel said it,
    ``SO_PEERCRED``), pid, terminal and command line (cut to COMMAND_MAX characters)."""
    found = _stat(pid)
    command = " ".join(_cmdline(pid))
    if len(command) > COMMAND_MAX:
        command = command[:COMMAND_MAX - 1] + "…"
    return {"uid": uid, "pid": pid, "tty": tty_name(found["tty_nr"]) if found else None, "command": command}
