"""The permission dialog's one owner: the pty session's router, which sees the dialog and the
keyboard, working with the PermissionRequest hook, which knows the call (tool, exact input, agent,
grants). They meet in the channel request itself, whatever process answers the hook (the guard
service, or the hook's own process with ``CLAUDEGUARD_SERVICE=0``):

- the hook of a pty session (``session.json``: ``pty``) posts the call's request *held*
  (``extra.via == "dialog"``): listed for this router (``list_pending(held=True)``), not for
  approvers, and not answerable;
- the router (``HookRequests``) lists the session's hook requests; while a permission dialog is
  on screen it tells a held one "go" once ``idle_before_channel`` passed without a key (the
  keyboard's head start, counted again from each key), and the hook publishes it for approvers
  with its deadline counted from then;
- when the dialog leaves the screen (the keyboard answered it), or the CLI exits, or the screen
  path posted a request of its own for the dialog, the router tells "drop" and the hook withdraws
  its request and answers nothing (an approver's answer that reached it first still counts);
  a request no permission dialog ever showed up for is dropped after ``NO_DIALOG_S``, or at a key
  pressed after it was posted;
- the router posts its own request (``via == "screen"``) for a permission dialog only when no
  hook request showed up within ``hook_grace`` (a session without hooks, ``--bare``), and not
  within ``hook_grace`` after the hook's request went (the CLI may be closing the dialog).

A call makes one request (the hook's, or, without hooks, the screen path's), and its answer
reaches the dialog once: through the hook's output, or typed by the router.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOOK_GRACE_S = 3.0  # a permission dialog: time the PermissionRequest hook gets to post it first
HOOK_CHECK_EVERY_S = 1.0  # listing the session's hook requests ...
HOOK_CHECK_DIALOG_S = 0.25  # ... and while a permission dialog is on screen
NO_DIALOG_S = 10.0  # a hook request with no permission dialog on screen this long is dropped


@dataclass
class _Seen:
    created: float  # wall clock, the request's
    held: bool
    with_dialog: bool = False  # seen while a permission dialog was on screen


class HookRequests:
    """The router's side (see the module docstring): ``sync`` on every step, ``clear`` before the
    screen path posts a permission dialog itself, ``drop_all`` when the CLI is gone."""

    def __init__(self, session_id: str, grace: float) -> None:
        self.session_id = session_id
        self.grace = grace
        self.known: dict[str, _Seen] = {}
        self.checked_at = -1e9
        self._state = "unseen"  # for the dialog on screen: unseen | pending | gone
        self._gone_at = 0.0

    def reset(self) -> None:
        """A new dialog (or none): the hook's requests are listed again at once."""
        self._state = "unseen"
        self.checked_at = -1e9

    def next_check(self, on_screen: bool) -> float | None:
        if on_screen:
            return self.checked_at + HOOK_CHECK_DIALOG_S
        return self.checked_at + HOOK_CHECK_EVERY_S if self.known else None

    def sync(self, channel: Any, now: float, wall: float, *, on_screen: bool, head_start_over: bool,
             screen_posted: bool, keyboard_wall: float | None) -> None:
        """List the hook's requests (rate-limited) and tell their waiters what the screen says."""
        if now - self.checked_at < (HOOK_CHECK_DIALOG_S if on_screen else HOOK_CHECK_EVERY_S):
            return
        self.checked_at = now
        try:
            held = [r for r in channel.list_pending(self.session_id, held=True) if _is_hooks(r)]
            published = [r for r in channel.list_pending(self.session_id) if _is_hooks(r)]
        except Exception:  # noqa: BLE001 - an unreadable channel must not stop the screen path
            return
        listed = {r.id: r for r in [*published, *held]}
        held_ids = {r.id for r in held}
        self.known = {rid: self.known.get(rid) or _Seen(float(r.created), rid in held_ids) for rid, r in listed.items()}
        for rid, seen in self.known.items():
            seen.held = rid in held_ids
            if on_screen:
                seen.with_dialog = True
            word: str | None
            if screen_posted:
                word = "drop"  # the screen path asked for this dialog: one request
            elif on_screen:
                word = "go" if seen.held and head_start_over else None
            elif seen.with_dialog:
                word = "drop"  # its dialog left the screen: answered at the keyboard
            elif wall - seen.created >= NO_DIALOG_S or (keyboard_wall or 0.0) > seen.created:
                word = "drop"  # no dialog came for it, or the keyboard answered one we never saw
            else:
                word = None
            if word is not None:
                _tell(channel, rid, word)
        if self.known:
            self._state = "pending"
        elif self._state == "pending":
            self._state, self._gone_at = "gone", now

    def clear(self, now: float) -> bool:
        """May the screen path post the permission dialog on screen itself?"""
        if self._state == "pending":
            return False
        return self._state == "unseen" or now - self._gone_at >= self.grace

    def drop_all(self, channel: Any) -> None:
        for rid in self.known:
            _tell(channel, rid, "drop")
        self.known = {}


def _is_hooks(request: Any) -> bool:
    return request.kind == "permission" and (request.extra or {}).get("via") == "dialog"


def _tell(channel: Any, rid: str, word: str) -> None:
    try:
        channel.tell_waiter(rid, word)
    except Exception:  # noqa: BLE001 - the waiter also ends with its caller, or at its deadline
        pass
