"""How claudeguard starts a helper process and tells a process apart from another of the same pid.

- ``spawn_detached``: a command nobody waits on the output of (notify commands, the watchdog's
  notifications);
- ``capture``: a command run to its end with its output captured (``ask_version``, the listing
  of Claude Code's background sessions, doctor's probe);
- ``ask_version``: the real CLI's ``--version`` (doctor, demo, the test CLI installer;
  ``plan.cli_version`` asks a binary itself, and believes only the CLI's own form of answer);
- ``start_thread``: a daemon thread of the launcher, started with every signal blocked;
- ``process_start``: a live process's start token, the one identity check of a pid (a channel
  request's waiter, the service's record, status files, background sessions).

A process started elsewhere says there why not here (the CLI itself, ``shim.child``; the
service's own start and double fork; the planner; agent view and ``--bg`` launches on the
user's terminal; the pty leader). ``subprocess`` is imported only by ``capture``: the session's
path starts no subprocess.
"""

from __future__ import annotations

import os

from claudeguard.errors import GuardError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import signal
    import subprocess
    from typing import Any, Callable
else:  # the same constants without the enum wrappers (`signal` imports enum: ~2 ms beside the CLI's start)
    import _signal as signal

# Signals a spawned command gets back at their default action: a caller that ignores SIGPIPE or
# SIGINT (Python does both) would otherwise hand that on through exec.
_DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)


def spawn_detached(args: list[str]) -> int:
    """Start ``args`` in its own session, stdio on /dev/null, no signal blocked, and return its
    pid (the caller reaps it).

    posix_spawn rather than subprocess: it gives the child an empty signal mask without a
    preexec hook (unsafe in a threaded process). The session's supervisor blocks the signals it
    forwards in every thread, and a child inherits the mask of the thread that starts it: a
    command started with them blocked could not be stopped.
    """
    devnull = os.devnull
    actions = [(os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0)]
    return os.posix_spawnp(args[0], args, dict(os.environ), file_actions=actions, setsid=True,
                           setsigmask=(), setsigdef=_DEFAULT_SIGNALS)


def fill(argv: list[str], values: dict[str, str]) -> list[str]:
    """``argv`` with each ``{name}`` of ``values`` replaced, in one pass: a value that holds a
    placeholder (a summary quoting ``{id}``) stays as it is; other braces stay too."""
    out = []
    for arg in argv:
        pieces = []
        rest = arg
        while "{" in rest:
            head, _, tail = rest.partition("{")
            name, closed, after = tail.partition("}")
            key = "{" + name + "}"
            if closed and key in values:
                pieces += [head, values[key]]
                rest = after
            else:
                pieces += [head, "{"]
                rest = tail
        out.append("".join(pieces) + rest)
    return out


def capture(argv: list[str], *, env: dict[str, str], timeout: float, cwd: str | None = None,
            new_session: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end, stdin on /dev/null, stdout and stderr captured as text.
    ``subprocess.TimeoutExpired`` past ``timeout``; OSError when it cannot start."""
    import subprocess

    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, start_new_session=new_session)


def ask_version(cli: str, timeout: float = 60) -> str:
    """The version ``cli --version`` prints (e.g. ``2.1.197``). Its stdin is /dev/null and
    claudeguard is off in it (a shim named ``claude`` passes straight through). A one-line
    GuardError when it cannot start, times out, fails or prints no version."""
    import re
    import subprocess

    try:
        proc = capture([cli, "--version"], env=dict(os.environ, CLAUDEGUARD_DISABLE="1"), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GuardError(f"`{cli} --version` did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise GuardError(f"`{cli} --version` cannot start: {exc.strerror or exc}") from None
    found = re.search(r"\d+\.\d+\.\d+\S*", proc.stdout) if proc.returncode == 0 else None
    if found is None:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise GuardError(f"`{cli} --version` exited {proc.returncode}: {said[0][:100] if said else 'no output'}")
    return found.group(0)


PR_SET_DUMPABLE = 4


def not_dumpable() -> bool:
    """Make this process not dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process of the same user
    may then neither ptrace it nor take its descriptors (``pidfd_getfd``), nor read its memory
    or ``/proc/<pid>/environ``; only root (CAP_SYS_PTRACE) still can. The launcher and the
    service hold the hooks' listening socket: nobody else gets it. False where it cannot be."""
    if not os.path.isdir("/proc/self"):
        return False
    try:
        import _ctypes  # ctypes' C module: the package's classes are not needed for one call

        # ctypes.c_int and CDLL's function type, made as shim/child.py makes them (its comment says why).
        c_int = type("c_int", (_ctypes._SimpleCData,), {"_type_": "i"})
        make: Any = type("Function", (_ctypes.CFuncPtr,), {
            "_flags_": _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO, "_restype_": c_int})
        dlopen: Any = _ctypes.dlopen

        class Libc:
            _handle = dlopen(None, 0)  # the program itself, as CDLL(None)

        prctl = make(("prctl", Libc()))
        return int(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError, TypeError):
        return False


def process_start(pid: int) -> str | None:
    """An identity token for a live process (its start time), None if it is gone or a zombie.

    Comparing it with the token recorded earlier tells a reused pid from the process that was
    recorded (a channel request's waiter, the service, a session's launcher or CLI)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return _process_start_psutil(pid)
    # Fields after the command name (which may hold spaces and parentheses): state is first,
    # starttime is the 20th (field 22 of proc(5)).
    rest = raw[raw.rfind(b")") + 2 :].split()
    if not rest or rest[0] in (b"Z", b"X"):
        return None  # killed but not yet reaped: as good as gone
    return rest[19].decode()


def _process_start_psutil(pid: int) -> str | None:
    import psutil  # only where /proc is not available

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"{proc.create_time():.3f}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def same_start(actual: str | None, recorded: object) -> bool:
    """``actual`` (``process_start`` now) is the start ``recorded`` earlier: the same token, or the
    same number where an earlier version recorded it as one (status files of a running session)."""
    if actual is None:
        return False
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        try:
            return float(actual) == float(recorded)
        except ValueError:
            return False
    return actual == recorded


def inside_guarded_session(pid: int) -> str | None:
    """The guarded session whose process tree ``pid`` is in (its id, or ``"unknown"`` when only
    the Claude Code CLI above it is seen), None when it is in none.

    A stand-in of the issue-24 helper with the same signature (the answering side's, which also
    knows the launcher's subreaper and the daemon-hosted trees): it walks ``pid``'s ancestors and
    counts any that is a claudeguard session (``CLAUDEGUARD_SESSION`` in its environment) or a
    Claude Code CLI (its command line, or ``CLAUDECODE=1``, which the CLI sets in what it runs)."""
    seen: set[int] = set()
    current = pid
    while current > 1 and current not in seen:
        seen.add(current)
        env = environ_of(current)
        if env.get("CLAUDEGUARD_SESSION"):
            return env["CLAUDEGUARD_SESSION"]
        if env.get("CLAUDECODE") == "1" or _is_claude_cli(current):
            return "unknown"
        current = _parent(current)
    return None


def environ_of(pid: int) -> dict[str, str]:
    """A process's environment as ``/proc/<pid>/environ`` has it (empty when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _is_claude_cli(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            words = fh.read().split(b"\0")
    except OSError:
        return False
    from claudeguard.ancestry import cli_executable

    first = words[0].decode("utf-8", "replace") if words else ""
    return cli_executable(first) or any(b"@anthropic-ai/claude-code" in w for w in words[:2])


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return 0
    rest = raw[raw.rfind(b")") + 2:].split()
    return int(rest[1]) if len(rest) > 1 else 0


def start_thread(target: Callable[[], object], name: str) -> None:
    """Start a daemon thread with every signal blocked: the launcher's supervisor takes its
    signals (SIGCHLD above all) with sigwait in one thread, and a thread that left them unblocked
    would receive and drop them (the child would never be reaped)."""
    import threading

    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        threading.Thread(target=target, name=name, daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
