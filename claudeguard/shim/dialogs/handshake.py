"""The permission dialog's one owner: the pty session's router, which sees the dialog and the
keyboard, working with the PermissionRequest hook, which knows the call (tool, exact input, agent,
grants). They meet in the channel request itself, whatever process answers the hook (the guard
service, or the hook's own process with ``CLAUDEGUARD_SERVICE=0``):

- the hook of a pty session (``session.json``: ``pty``) posts the call's request *held*
  (``extra.via == "dialog"``): listed for this router (``list_pending(held=True)``), not for
  approvers, and not answerable;
- the router (``HookRequests``) lists the session's hook requests and finds the one the
  permission dialog on screen shows (its command, file or address is in the dialog's text; the
  CLI shows one dialog at a time and queues the others); while it is on screen it tells that
  one "go" once ``idle_before_channel`` passed without a key (the keyboard's head start, counted
  again from each key), and the hook publishes it for approvers with its deadline counted from
  then;
- when its dialog leaves the screen (the keyboard answered it), or the CLI exits, or the screen
  path posted a request of its own for the dialog, the router tells "drop" and the hook withdraws
  its request and answers nothing (an approver's answer that reached it first still counts);
  a held request no permission dialog showed up for is dropped at a key pressed after it was
  posted (the keyboard answered a dialog that came and went between two screen reads), and
  released to the channel after ``NO_DIALOG_GO_S`` while no permission dialog is on screen (a
  background agent's dialog that the CLI draws only once the hook has returned);
- before each "drop" the router writes why, and what the keyboard chose, into the session's
  directory (``keyboard/<request id>.json``: ``{"reason": "keyboard" | "no-key" | "screen" |
  "exit", "decision", "choice"}``): the hook writes the one audit row of a call
  answered at the keyboard from it ("keyboard" only with keys the relay read from the terminal);
- the router posts its own request (``via == "screen"``) for a permission dialog only when no
  hook request showed up within ``hook_grace`` (a session without hooks, ``--bare``), and not
  within ``hook_grace`` after the hook's request went (the CLI may be closing the dialog).

A call makes one request (the hook's, or, without hooks, the screen path's), and its answer
reaches the dialog once: through the hook's output, or typed by the router.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from claudeguard.files import write_atomic
from claudeguard.shim.dialogs.keys import BEFORE_SEEN_S, KeyLog, answered_with, decision_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.shim.dialogs.tables import Dialog

HOOK_GRACE_S = 3.0  # a permission dialog: time the PermissionRequest hook gets to post it first
HOOK_CHECK_EVERY_S = 1.0  # listing the session's hook requests ...
HOOK_CHECK_DIALOG_S = 0.25  # ... and while a permission dialog is on screen
# A held request no permission dialog showed up for this long, while none is on screen, is
# released to the channel: no dialog can be shown for it. 2.1.330 draws a background agent's
# dialog only once its PermissionRequest hooks have returned (measured; the main agent's, and
# 2.1.197's, while the hook runs), so the channel is the only place it can be answered.
NO_DIALOG_GO_S = 2.0
VANISHED_KEEP_S = 10.0  # a request answered through the channel whose dialog lingers is forgotten then
KEYBOARD_DIR = "keyboard"  # in the session dir: why the router dropped a hook request


@dataclass
class _Seen:
    created: float  # wall clock, the request's
    held: bool
    needle: str | None  # what its dialog shows of the call (whitespace removed), None: anything
    with_dialog: bool = False  # its dialog was seen on screen
    shown_at: float = 0.0  # monotonic: when its dialog was first seen
    dialog: Dialog | None = None  # its dialog as last read (options, highlight)
    dropped: bool = False  # told "drop" (and why, once)


class HookRequests:
    """The router's side (see the module docstring): ``sync`` on every step, ``clear`` before the
    screen path posts a permission dialog itself, ``drop_all`` when the CLI is gone."""

    def __init__(self, session_id: str, grace: float, keys: KeyLog | None = None,
                 session_dir: str | None = None, attached: bool = True, tty: str | None = None) -> None:
        self.session_id = session_id
        self.grace = grace
        self.keys = keys if keys is not None else KeyLog()
        self.session_dir = session_dir
        self.attached = attached  # the keys come from a person's terminal (not a detached stdin)
        self.tty = tty
        self.known: dict[str, _Seen] = {}
        # Requests whose dialog was on screen and that left the listing before the dialog left the
        # screen: the CLI answered it and stopped the hook at once, so its waiter withdrew first.
        # The waiter still waits for why (the keyboard's choice): said when the dialog is gone.
        self.vanished: dict[str, tuple[_Seen, float]] = {}
        self._answered_at = -1e9  # monotonic: when a dialog we read left the screen (its keys are spent)
        self._dialog_at = -1e9  # monotonic: when a permission dialog was last on screen
        self.checked_at = self._now = -1e9
        self._state = "unseen"  # for the dialog on screen: unseen | pending | gone
        self._gone_at = 0.0
        self.shown: str | None = None  # the held request the permission dialog on screen stands for

    def reset(self) -> None:
        """A new dialog (or none): the hook's requests are listed again at once."""
        self._state = "unseen"
        self.checked_at = -1e9

    def next_check(self, on_screen: bool) -> float | None:
        if on_screen or self.vanished:
            return self.checked_at + HOOK_CHECK_DIALOG_S
        return self.checked_at + HOOK_CHECK_EVERY_S if self.known else None

    def sync(self, channel: Any, now: float, wall: float, *, dialog: Dialog | None, head_start_over: bool,
             screen_posted: bool, keyboard_wall: float | None) -> None:
        """List the hook's requests (rate-limited) and tell their waiters what the screen says.
        ``dialog``: the permission dialog on screen, or None."""
        if now - self.checked_at < (HOOK_CHECK_DIALOG_S if dialog is not None or self.vanished else HOOK_CHECK_EVERY_S):
            return
        self.checked_at = self._now = now
        if dialog is not None:
            self._dialog_at = now  # a queued dialog is drawn as soon as the one before it is answered
        try:
            held = [r for r in channel.list_pending(self.session_id, held=True) if _is_hooks(r)]
            published = [r for r in channel.list_pending(self.session_id) if _is_hooks(r)]
        except Exception:  # noqa: BLE001 - an unreadable channel must not stop the screen path
            return
        listed = {r.id: r for r in [*published, *held]}
        held_ids = {r.id for r in held}
        for rid, seen in self.known.items():
            if rid not in listed and seen.with_dialog and not seen.dropped:
                self.vanished[rid] = (seen, now)
        self.known = {rid: self.known.get(rid) or _Seen(float(r.created), rid in held_ids, _needle(r))
                      for rid, r in listed.items()}
        shown = self._shown(dialog)
        self.shown = shown if shown is not None and self.known[shown].held else None
        for rid, seen in self.known.items():
            seen.held = rid in held_ids
            if screen_posted:
                self._drop(channel, rid, "screen")  # the screen path asked for this dialog: one request
            elif seen.dropped:
                _tell(channel, rid, "drop")  # said once, with its reason; the waiter is withdrawing
            elif rid == shown:
                if not seen.with_dialog:
                    seen.with_dialog, seen.shown_at = True, now
                seen.dialog = dialog
                if seen.held and head_start_over:
                    _tell(channel, rid, "go")
            elif seen.with_dialog:
                self._left(channel, rid, seen)  # its dialog left the screen (or is drawn over)
            elif dialog is not None or not seen.held:
                pass  # another call's dialog is on screen (the CLI shows this one after it); or in the channel
            elif (keyboard_wall or 0.0) > seen.created and (
                    choice := answered_with(None, self.keys.since(self._keys_from(now, wall, seen)))) is not None:
                # an answering key, and no dialog read: the keyboard answered one that came and went
                # between two screen reads
                self._drop(channel, rid, "keyboard", decision=decision_of(choice), choice=choice.label)
            elif wall - seen.created >= NO_DIALOG_GO_S and now - self._dialog_at >= NO_DIALOG_GO_S:
                _tell(channel, rid, "go")  # no dialog can show it: the channel answers (the status line says so)
        for rid, (seen, since) in list(self.vanished.items()):
            if dialog is None or seen.dialog is None or dialog.key != seen.dialog.key:
                del self.vanished[rid]  # its dialog is gone too: say what closed it (nobody to tell)
                self._closed(rid, seen)
            elif now - since > VANISHED_KEEP_S:
                del self.vanished[rid]  # answered through the channel while its dialog lingers
        if self.known:
            self._state = "pending"
        elif self._state == "pending":
            self._state, self._gone_at = "gone", now

    def _keys_from(self, now: float, wall: float, seen: _Seen) -> float:
        """Keys that may have answered a dialog of ``seen``'s never read off the screen: typed
        after it was posted (less the screen's lag), and not those that answered the dialog before."""
        return max(now - (wall - seen.created) - BEFORE_SEEN_S, self._answered_at)

    def _shown(self, dialog: Dialog | None) -> str | None:
        """The request the permission dialog on screen stands for: the oldest whose call its text
        shows, else the oldest (the CLI shows its dialogs one at a time, in order)."""
        waiting = {rid: seen for rid, seen in self.known.items() if not seen.dropped}
        if dialog is None or not waiting:
            return None
        text = "".join(dialog.text.split())
        matching = [rid for rid, seen in waiting.items() if seen.needle is None or seen.needle in text]
        return min(matching or waiting, key=lambda rid: waiting[rid].created)

    def _left(self, channel: Any, rid: str, seen: _Seen) -> None:
        """The dialog of a request still open left the screen as we read it: dropped when a key from
        the terminal answered it; else kept. Nothing of ours answered it, and the CLI stops the
        hook of a dialog it closed (No, Esc, a cancel: measured on 2.1.197 and 2.1.330), so the
        dialog is either drawn over (a program writing to the CLI's terminal: it comes back with
        the CLI's next redraw) or was answered Yes by input that did not come from the terminal,
        which the hook's PostToolUse finds (gate.decide.ran_while_asked)."""
        keys = self.keys.since(seen.shown_at - BEFORE_SEEN_S)
        choice = answered_with(seen.dialog, keys) if keys else None
        if choice is not None:
            self._answered_at = self._now
            self._drop(channel, rid, "keyboard", decision=decision_of(choice), choice=choice.label)
        else:
            seen.with_dialog = False  # matched again when it is drawn again

    def _closed(self, rid: str, seen: _Seen) -> None:
        """A request whose waiter withdrew when the CLI closed its dialog (the CLI stops the hook
        of a dialog answered No or cancelled): say who closed it, once the dialog is gone."""
        choice = answered_with(seen.dialog, self.keys.since(seen.shown_at - BEFORE_SEEN_S))
        self._answered_at = self._now
        if choice is None:
            self._drop(None, rid, "no-key")  # not by a key from this terminal
        else:
            self._drop(None, rid, "keyboard", decision=decision_of(choice), choice=choice.label)

    def _drop(self, channel: Any, rid: str, reason: str, **what: object) -> None:
        """Say why (once), then tell the waiter "drop" (``channel`` None: it is gone already)."""
        seen = self.known.get(rid)
        if self.session_dir and (seen is None or not seen.dropped):
            _record(self.session_dir, rid, {"reason": reason, "attached": self.attached, "tty": self.tty, **what})
        if seen is not None:
            seen.dropped = True
        if channel is not None:
            _tell(channel, rid, "drop")

    def clear(self, now: float) -> bool:
        """May the screen path post the permission dialog on screen itself?"""
        if self._state == "pending":
            return False
        return self._state == "unseen" or now - self._gone_at >= self.grace

    def drop_all(self, channel: Any) -> None:
        for rid in self.known:
            self._drop(channel, rid, "exit")
        self.known = {}


def _is_hooks(request: Any) -> bool:
    return request.kind == "permission" and (request.extra or {}).get("via") == "dialog"


def _needle(request: Any) -> str | None:
    """What the CLI's dialog shows of this call, whitespace removed (a long line wraps): the
    command's first 60 characters, the file's name, the address; None: nothing to tell by."""
    tool_input = getattr(request, "input", None)
    if not isinstance(tool_input, dict):
        return None
    if isinstance(tool_input.get("command"), str):
        first = tool_input["command"].strip().splitlines()[0] if tool_input["command"].strip() else ""
        return "".join(first.split())[:60] or None
    for key in ("file_path", "notebook_path"):
        if isinstance(tool_input.get(key), str) and tool_input[key]:
            return "".join(os.path.basename(tool_input[key]).split())[:60] or None
    if isinstance(tool_input.get("url"), str):
        host = tool_input["url"].split("://", 1)[-1].split("/", 1)[0]
        return "".join(host.split())[:60] or None
    return None


def _record(session_dir: str, rid: str, what: dict[str, object]) -> None:
    """Why the router dropped ``rid`` (read by the hook's waiter: gate.decide.keyboard_verdict)."""
    if not rid or not rid.replace("-", "").isalnum():
        return  # a request id is hex and dashes; anything else names no file of ours
    try:
        directory = os.path.join(session_dir, KEYBOARD_DIR)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        write_atomic(os.path.join(directory, f"{rid}.json"), json.dumps(what))
    except (OSError, ValueError):
        pass  # the hook then writes no keyboard row: never one without the router's word


def _tell(channel: Any, rid: str, word: str) -> None:
    try:
        channel.tell_waiter(rid, word)
    except Exception:  # noqa: BLE001 - the waiter also ends with its caller, or at its deadline
        pass
