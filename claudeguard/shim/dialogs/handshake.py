"""The permission dialog's handshake between the pty session and the PermissionRequest hook, the
two parties that may each route one permission dialog to the approval channel.

- The screen watcher publishes the dialog part of the screen in ``dialog.json`` (``DIALOG_FILE``:
  the dialog's title, the request the screen path posted, the last keypress, whether the CLI
  exited), rewritten only when it changes.
- The hook (``gate.hook._dialog_watch``, in the service or the hook's own process) reads it: it
  posts the call's request (``extra.via == "dialog"``) after ``idle_before_channel`` without a key,
  and withdraws it when the dialog leaves the screen (the keyboard answered).
- The router (``HookWatch``, here) leaves a permission dialog to the hook: it posts its own
  request only when no pending ``via == "dialog"`` request of the session is listed for
  ``hook_grace`` seconds (a session without hooks, ``--bare``), and not within ``hook_grace``
  after the hook's request went away (the CLI may be closing the dialog right now).
"""

from __future__ import annotations

from typing import Any

DIALOG_FILE = "dialog.json"  # the dialog part alone, for the PermissionRequest hook
HOOK_GRACE_S = 3.0  # a permission dialog: time the PermissionRequest hook gets to post it first
HOOK_CHECK_EVERY_S = 1.0


class HookWatch:
    """The router's side: is the hook's request for the permission dialog on screen pending, gone,
    or was it never seen? Reset for every new dialog."""

    def __init__(self, session_id: str, grace: float) -> None:
        self.session_id = session_id
        self.grace = grace
        self.reset()

    def reset(self) -> None:
        self._state = "unseen"  # unseen | pending | gone
        self._gone_at = 0.0
        self.checked_at = -1e9

    def next_check(self) -> float:
        return self.checked_at + HOOK_CHECK_EVERY_S

    def clear(self, channel: Any, now: float) -> bool:
        """May the screen path post this permission dialog? Not while a permission request of
        this session posted by the PermissionRequest hook (``extra.via == "dialog"``) is pending,
        nor for ``grace`` after it went (the CLI may be closing the dialog right now)."""
        if now - self.checked_at >= HOOK_CHECK_EVERY_S:
            self.checked_at = now
            try:
                pending = channel.list_pending(self.session_id)
            except Exception:  # noqa: BLE001 - an unreadable channel must not stop the screen path
                pending = []
            if any(r.kind == "permission" and (r.extra or {}).get("via") == "dialog" for r in pending):
                self._state = "pending"
            elif self._state == "pending":
                self._state, self._gone_at = "gone", now
        if self._state == "pending":
            return False
        return self._state == "unseen" or now - self._gone_at >= self.grace
