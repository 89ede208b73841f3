"""The screen watcher of a pty session: feeds the CLI's output to the screen model, reads the
screen when output pauses (or at least every 0.25 s while it flows) for the dialog on it (to the
router), the idle prompt and the CLI's version, and publishes what it saw: ``screen.json`` in the
session directory, and the watchdog's activity, dialog hint and tail.
"""

from __future__ import annotations

import time
from typing import Any

from claudeguard.shim.dialogs.parse import BUSY, at_idle_prompt, find_dialog
from claudeguard.shim.dialogs.tables import banner_version, patterns_for
from claudeguard.shim.screen import Screen, write_screen_state

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.shim.dialogs.router import DialogRouter

QUIET_S = 0.03  # read the screen once output pauses this long ...
RECHECK_MAX_S = 0.25  # ... or at least this often while it flows
TAIL_EVERY_S = 1.0
TAIL_LINES = 20


class ScreenWatcher:
    """What the CLI shows, read at the right moments and published. ``monitor`` is the watchdog's
    Monitor (or None): activity, "a dialog is on screen", the tail."""

    def __init__(self, screen: Screen, router: DialogRouter, *, session_dir: str | None, version: str | None,
                 attached: bool) -> None:
        self.screen = screen
        self.router = router
        self.session_dir = session_dir
        self.version = version  # of the real CLI; else read off its banner
        self.attached = attached
        self.monitor: Any = None
        self.cli_pid: int | None = None
        self.at_prompt = False
        self.busy_seen = False  # the CLI was seen working ("esc to interrupt")
        self.last_lines: list[str] = []  # the last screen with something on it
        self._checked_version = -1
        self._last_output = 0.0
        self._last_check = 0.0
        self._tail_written = 0.0
        self._tail_version = -1
        self._activity_at = 0.0
        self._dialog_title: str | None = None

    def output(self, data: bytes) -> None:
        self.screen.feed(data)
        now = time.monotonic()
        self._last_output = now
        if self.monitor is not None and now - self._activity_at >= 1.0:
            # Rate-limited; note that the CLI's spinner keeps drawing while a model stream is
            # silent, so screen output alone is no proof of progress.
            self._activity_at = now
            _call(self.monitor, "note_activity", "output")

    def keypress(self) -> None:
        if self.monitor is not None:
            _call(self.monitor, "note_activity", "input")

    def wakeups(self) -> list[float]:
        """Monotonic times at which ``tick`` has something to do."""
        times: list[float] = []
        if self.screen.version != self._checked_version:
            times.append(min(self._last_output + QUIET_S, self._last_check + RECHECK_MAX_S))
        if self.screen.version != self._tail_version and (self.session_dir or self.monitor is not None):
            times.append(self._tail_written + TAIL_EVERY_S)
        return times

    def read_if_due(self, now: float, *, final: bool, exiting: bool) -> None:
        """Read the screen when it changed and output paused (or a read is overdue, or the end)."""
        if self.screen.version != self._checked_version and (
                final or now - self._last_output >= QUIET_S or now - self._last_check >= RECHECK_MAX_S):
            self._read(now, exiting)

    def _read(self, now: float, exiting: bool) -> None:
        self._checked_version = self.screen.version
        self._last_check = now
        lines = self.screen.lines()
        if not exiting and any(line.strip() for line in lines):
            self.last_lines = lines  # what the session showed last (not the emptied exit screen)
        if self.version is None:
            self.version = banner_version(lines)
        self.router.observe(find_dialog(lines, patterns_for(self.version)))
        was_at_prompt = self.at_prompt
        self.at_prompt = at_idle_prompt(lines)
        if not self.at_prompt and any(BUSY.search(line) for line in lines):
            self.busy_seen = True
        if self.monitor is not None and self.at_prompt != was_at_prompt:
            # the watchdog's "idle" (waiting for its user: never a stall) starts and ends here
            _call(self.monitor, "note_activity", "at-prompt" if self.at_prompt else "busy")

    def publish(self, now: float, final: bool) -> None:
        title = self.router.dialog.title if self.router.dialog else None
        if title != self._dialog_title:
            self._dialog_title = title
            if self.monitor is not None:
                _call(self.monitor, "set_screen_hint", f"a dialog is on screen: {title}" if title else None)
        due = self.screen.version != self._tail_version and now - self._tail_written >= TAIL_EVERY_S
        if not (self.router.changed or due or final):
            return
        self.router.changed = False
        self._tail_written = now
        self._tail_version = self.screen.version
        tail = self.screen.tail(TAIL_LINES) or [ln for ln in self.last_lines if ln.strip()][-TAIL_LINES:]
        if self.monitor is not None:
            _call(self.monitor, "set_screen_tail", tail)
        if self.session_dir:
            state = self.router.state()
            state.update(tail=tail, updated=time.time(), version=self.version,
                         attached=self.attached, cli_pid=self.cli_pid, exited=final)
            write_screen_state(self.session_dir, state)

    def final_text(self) -> list[str]:
        """The last screen as plain text, blank runs folded (a detached session's output)."""
        kept: list[str] = []
        for line in list(self.last_lines) or self.screen.lines():
            if line.strip() or (kept and kept[-1].strip()):
                kept.append(line)
        while kept and not kept[-1].strip():
            kept.pop()
        return kept


def _call(obj: Any, name: str, *args: Any) -> None:
    """Call an optional hook of the watchdog; it must never take the relay down."""
    fn = getattr(obj, name, None)
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - a watchdog hook must never take the relay down
        pass
