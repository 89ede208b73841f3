"""The two ways claudeguard starts a helper process: a detached command nobody waits on the output
of (``spawn_detached``: notify commands, the watchdog's notifications), and the real CLI's
``--version`` (``cli_version``: doctor, demo, the run report, the test CLI installer).

``subprocess`` is imported only by ``cli_version``: the session's path starts no subprocess.
"""

from __future__ import annotations

import os
import signal

from claudeguard.errors import GuardError

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


def cli_version(cli: str, timeout: float = 60) -> str:
    """The version ``cli --version`` prints (e.g. ``2.1.197``). Its stdin is /dev/null and
    claudeguard is off in it (a shim named ``claude`` passes straight through). A one-line
    GuardError when it cannot start, times out, fails or prints no version."""
    import re
    import subprocess

    try:
        proc = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=dict(os.environ, CLAUDEGUARD_DISABLE="1"))
    except subprocess.TimeoutExpired:
        raise GuardError(f"`{cli} --version` did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise GuardError(f"`{cli} --version` cannot start: {exc.strerror or exc}") from None
    found = re.search(r"\d+\.\d+\.\d+\S*", proc.stdout) if proc.returncode == 0 else None
    if found is None:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise GuardError(f"`{cli} --version` exited {proc.returncode}: {said[0][:100] if said else 'no output'}")
    return found.group(0)
