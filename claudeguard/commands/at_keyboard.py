"""Dialogs still at a keyboard: what ``pending`` and the console show beside the channel (issue 36).

A pty session's dialog goes to the keyboard first (shim/dialogs/): its request waits held, or not
at all, until ``approval.idle_before_channel`` seconds pass without a key. Until then it is in no
listing of the channel, and ``pending`` said "no pending requests" while a session waited. Each
pty session's ``screen.json`` says which dialog is on screen, the held request it stands for and
when it reaches the channel unless someone answers it at the keyboard (``channel_at``); this
reads them. Nothing here answers: a held request refuses answers until it is released.
"""

from __future__ import annotations

import os
import time

from claudeguard.channel import list_pending
from claudeguard.errors import GuardError
from claudeguard.paths import runtime_dir
from claudeguard.procs import process_start
from claudeguard.shim.screen import read_screen_state


class AtKeyboard:
    """One dialog on a session's screen that has not reached the channel yet."""

    __slots__ = ("session_id", "title", "summary", "agent_type", "left_s", "request_id")

    def __init__(self, session_id: str, title: str, summary: str, agent_type: str | None, left_s: float,
                 request_id: str | None) -> None:
        self.session_id = session_id
        self.title = title
        self.summary = summary  # the call, when the held request of the dialog is known; else the dialog's title
        self.agent_type = agent_type
        self.left_s = left_s  # seconds before it reaches the channel unless answered at the keyboard
        self.request_id = request_id  # its held request (the id it will have in the channel), or None

    def line(self) -> str:
        agent = self.agent_type or "main"
        return (f"{self.session_id[:16]:16} {agent[:20]:20} {self.left_s:5.0f}s  {self.summary} "
                f"(dialog \"{self.title}\")")


def at_keyboard() -> list[AtKeyboard]:
    """The dialogs on the screens of this runtime dir's pty sessions that no listing of the
    channel shows yet, the soonest to reach it first."""
    try:
        sessions = str(runtime_dir("sessions"))
        names = os.listdir(sessions)
    except (OSError, GuardError):
        return []
    try:
        held = {r.id: r for r in list_pending(held=True)}
        listed = list_pending()
    except GuardError:
        held, listed = {}, []
    published = {r.id for r in listed}
    waiting_sessions = {r.session_id for r in listed}
    now = time.time()
    out: list[AtKeyboard] = []
    for name in sorted(names):
        state = read_screen_state(os.path.join(sessions, name))
        if not state or state.get("exited") or not state.get("dialog") or state.get("request"):
            continue
        channel_at, cli_pid = state.get("channel_at"), state.get("cli_pid")
        if not isinstance(channel_at, (int, float)) or not isinstance(cli_pid, int) or process_start(cli_pid) is None:
            continue  # an older launcher's file, or a session whose CLI is gone
        rid = state.get("held") if isinstance(state.get("held"), str) else None
        if rid is not None and rid in published:
            continue  # released meanwhile: listed with the channel's requests
        if rid is None and state.get("kind") == "permission" and name in waiting_sessions:
            # The screen's file has not named the dialog's request yet (the launcher writes it a
            # moment after the handshake, later on a busy machine) while the session has one in the
            # channel: most likely this very call, released meanwhile. Listed once, in the channel;
            # were it another, it reaches the channel itself after the idle time.
            continue
        request = held.get(rid) if rid is not None else None
        title = str(state.get("dialog"))
        out.append(AtKeyboard(name, title, request.summary if request is not None else f"dialog: {title}",
                              request.agent_type if request is not None else None, max(0.0, channel_at - now),
                              rid))
    out.sort(key=lambda d: d.left_s)
    return out
