"""A loaded machine on demand: ``cpu_hog(n)`` runs ``n`` busy-looping processes (each wants a
whole CPU) for the length of a ``with`` block and stops them by pid at its end. The watchdog's
load tests and ``bench/watchdog_load.py`` use it: "load 8" is eight of them beside whatever else
runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Iterator

# A shell loop: a few hundred KB each, where an interpreter per hog would cost tens of MB.
BUSY = ["/bin/sh", "-c", "while :; do :; done"]


@contextlib.contextmanager
def cpu_hog(n: int, nice: int = 0) -> Iterator[list[int]]:
    """``n`` busy processes while the block runs (their pids), at niceness ``nice``; every one is
    killed and reaped at its end, however it ends."""
    argv = BUSY if nice == 0 else ["nice", "-n", str(nice), *BUSY]  # nice execs the loop: same pid
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            # Not through procs: busy loops held by their handles, killed and reaped at the block's end.
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
