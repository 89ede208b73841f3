"""The service's side of verifying the real CLIs it guards (issue 26): a launcher registering a
session names its CLI (``"verify"`` in the register message, ``plan.verified.wants_verification``);
the service, for a launcher outside every guarded session (its peer pid, SO_PEERCRED, by
``ancestry.caller_inside_session``), runs the verification in the background as its own child,
one process at a time per binary: ``python -m claudeguard.commands.verify CLI`` (started by name:
the commands layer is above this one). That process hashes the binary itself, reuses a record its
hash already has, else verifies it and is the only writer of the record (``plan.verified``); a
second one for the same binary (another service, ``doctor --verify`` by hand) waits for the
first's lock.

Why a launcher outside every session only: the verification runs the named program outside the
session's process tree (and its box); an agent that could name one (a nested launcher it runs, a
request it writes) would launder code out of its session, where nothing guards it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from claudeguard.ancestry import caller_inside_session
from claudeguard.plan import verified, verify_leftovers

class Verifications:
    """The verifications the service runs: one child per binary (its stat key) at a time."""

    def __init__(self) -> None:
        self.running: dict[tuple[str, tuple[int, ...]], subprocess.Popen[bytes]] = {}

    def asked(self, cli: object, peer_pid: int | None) -> int | None:
        """A registering launcher named ``cli``: start verifying it when that launcher runs outside
        every guarded session and the CLI is neither verified, failed nor being verified; the pid
        started."""
        if not isinstance(cli, str) or not os.path.isabs(cli) or peer_pid is None:
            return None
        inside = caller_inside_session(peer_pid)
        if inside is not None:
            print(f"claudeguard service: not verifying {cli}: asked by pid {peer_pid}, inside session {inside}",
                  file=sys.stderr, flush=True)
            return None
        self.reap()
        return self.start(cli)

    def start(self, cli: str) -> int | None:
        """Start verifying ``cli`` unless a verification of it runs or it has a record already."""
        key = verified.stat_key(cli)
        if key is None:
            return None
        slot = (cli, tuple(key))
        if slot in self.running:
            return None
        if verified.lookup(cli).state in (verified.VERIFIED, verified.FAILED):
            return None  # settled already
        # Not procs.spawn_detached: the service reaps this child itself, and its stderr (a crash)
        # goes to the service's log like the service's own.
        argv = [sys.executable, "-m", "claudeguard.commands.verify", "--parent", str(os.getpid()), cli]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd="/", close_fds=True,
                                start_new_session=True)
        self.running[slot] = proc
        print(f"claudeguard service: verifying {cli} in the background (pid {proc.pid})", file=sys.stderr, flush=True)
        threading.Thread(target=_after, args=(proc,), name=f"verify-{proc.pid}", daemon=True).start()
        return proc.pid

    def reap(self) -> None:
        for slot, proc in list(self.running.items()):
            if proc.poll() is not None:
                del self.running[slot]

    def status(self) -> list[dict[str, object]]:
        """The verifications running now (``service status``)."""
        self.reap()
        return [{"cli": cli, "pid": proc.pid} for (cli, _), proc in self.running.items()]


def _after(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a verification child; one killed by a signal it could not handle (SIGKILL) did not
    sweep its bed on its way out: the service does."""
    if proc.wait() < 0:
        sweep_leftovers()


def sweep_leftovers() -> None:
    """Sweep what verifications whose verifying process is gone left running or on disk
    (plan/verify_leftovers.py): at the service's start (in a thread), and when a verification
    child of its own was killed."""
    try:
        swept = verify_leftovers.clean_leftovers()
    except OSError as exc:
        print(f"claudeguard service: could not sweep a verification's leftovers: {exc}", file=sys.stderr, flush=True)
        return
    for marker in swept:
        print(f"claudeguard service: swept the leftovers of an interrupted verification ({marker})",
              file=sys.stderr, flush=True)
