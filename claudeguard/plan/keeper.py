"""Keep a session's directory in place while the session runs.

The runtime dir can vanish under a running session: systemd removes ``$XDG_RUNTIME_DIR`` at
logout (under a ``nohup claudeguard -p ... &`` started from that login), a tmp cleaner or a
hand may remove ``/tmp/claudeguard-<uid>``. Every hook and prompt-tool call of the session
reads ``session.json`` there, and without it they deny. So the supervisor looks once a second
and, when ``session.json`` is gone, makes the directory again (0700, checked like at start),
writes the files it wrote at start, and calls ``on_restore`` (the gate server binds its socket
again). Requests that were waiting publish themselves again (``channel.requests``); the watchdog
rewrites ``status.json`` at its next sample, so ``ps`` lists the session again.

What is lost with the directory: the session's grants (``agent``/``session`` answers given
before; later calls ask again, which fails closed) and its event history.
"""

from __future__ import annotations

import os
import threading

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable

CHECK_EVERY_S = 1.0


class SessionKeeper:
    def __init__(self, session_id: str, session_dir: str, files: dict[str, str],
                 on_restore: "list[Callable[[], None]] | None" = None, interval: float = CHECK_EVERY_S) -> None:
        self.session_id = session_id
        self.session_dir = session_dir
        self.files = dict(files)  # name -> text, written again on restore
        self.on_restore = list(on_restore or [])
        self.interval = interval
        self._reported: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "SessionKeeper":
        self._thread = threading.Thread(target=self._run, name="claudeguard-keeper", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - never take the session down; say it once
                self._report(exc)

    def check(self) -> bool:
        """Restore the directory if it is gone; True when it was restored now."""
        if os.path.lexists(os.path.join(self.session_dir, "session.json")):
            return False
        from pathlib import Path

        from claudeguard.files import write_atomic
        from claudeguard.paths import runtime_dir

        made = runtime_dir("sessions", self.session_id)
        if os.path.abspath(made) != os.path.abspath(self.session_dir):
            return False  # the runtime root moved (env changed under us?): nothing to restore here
        for name, text in self.files.items():
            write_atomic(Path(made) / name, text)
        for callback in self.on_restore:
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - e.g. the gate socket: hooks decide alone then
                self._report(exc)
        return True

    def _report(self, exc: BaseException) -> None:
        import sys

        key = f"{type(exc).__name__}: {exc}"
        if key in self._reported:
            return
        self._reported.add(key)
        try:
            print(f"claudeguard: session dir {self.session_dir} could not be restored: {key}",
                  file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - stderr may be gone
            pass
