"""The tool processes a CLI leaves running when a signal ends its session.

The real CLI does not always stop its tools when it is told to stop: 2.1.197 exits on SIGTERM
or SIGHUP and leaves a running Bash tool (its shell and the command) behind, re-parented to
init, where it runs on with nobody to stop it. So when a terminating signal reaches the session
(forwarded by claudeguard, or sent by the terminal to the whole group), the supervisor notes the
CLI's descendants at that moment; if the CLI then exits within ``ENDING_WINDOW_S``, those still
running get SIGTERM and, after ``GRACE_S``, SIGKILL. A process is matched by pid and start time,
so a pid the system has since reused is never signalled.

A session that ends on its own leaves its processes alone, as the real CLI would (a daemon the
user started on purpose stays). Nothing can be done here if claudeguard itself is SIGKILLed: the
CLI then gets its parent-death SIGTERM and what it leaves is left (docs/design.md).
"""

from __future__ import annotations

import _thread
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import signal
    import psutil
else:  # the same functions and constants without the enum wrappers (`signal` imports enum: ~4 ms before the CLI starts)
    import _signal as signal

ENDING_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM})
ENDING_WINDOW_S = 15.0
GRACE_S = 2.0


class Leftovers:
    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()  # threading.Lock, without importing threading before the CLI starts
        self._noted: dict[int, psutil.Process] = {}  # each carries its start time
        self._at: float | None = None

    def note(self, cli_pid: int) -> None:
        """Remember the CLI's descendants now (a terminating signal is on its way to it)."""
        try:
            import psutil

            procs = psutil.Process(cli_pid).children(recursive=True)
        except Exception:  # noqa: BLE001 - the CLI is gone already, or psutil cannot read /proc: nothing to note
            return
        with self._lock:
            for proc in procs:
                self._noted.setdefault(proc.pid, proc)
            self._at = time.monotonic()

    def stop(self) -> list[int]:
        """After the CLI exited: end what it left running, if a signal ended it. The pids ended."""
        with self._lock:
            at, noted = self._at, list(self._noted.values())
            self._noted, self._at = {}, None
        if at is None or time.monotonic() - at > ENDING_WINDOW_S or not noted:
            return []
        import psutil

        alive = []
        for proc in noted:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    proc.terminate()
                    alive.append(proc)
            except psutil.Error:
                pass
        if not alive:
            return []
        _, still = psutil.wait_procs(alive, timeout=GRACE_S)
        for proc in still:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(still, timeout=GRACE_S)
        pids = sorted(p.pid for p in alive)
        print(f"claudeguard: stopped {len(pids)} process(es) the CLI left running: {' '.join(map(str, pids))}",
              file=sys.stderr, flush=True)
        return pids

