"""Dialogs still at a keyboard (issue 36): while a pty session's permission dialog has the
keyboard's head start (``approval.idle_before_channel``), `claudeguardctl pending` lists it with
the seconds left before it reaches the channel instead of "no pending requests"; once it is
there it is an ordinary request, listed once. On both pinned CLIs, in a real pty."""

from __future__ import annotations

import time

from claudeguard import channel
from claudeguard.testing.tui import exit_tui, expect_text
from tests.shim_helpers import ctl, wait_until
from tests.test_keyboard_first import DIALOG, Session, bash


def screen_state(s: Session) -> dict:
    import json

    return json.loads((s.session_dir() / "screen.json").read_text())


def test_pending_shows_a_dialog_at_the_keyboard_with_the_seconds_left(spawn_tui, cli_version, real_claude,
                                                                      model_server, offline_env, monkeypatch):
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo kb > kb.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                idle=90)
    expect_text(s.child, DIALOG, 60)
    shown = time.time()
    [held] = wait_until(lambda: channel.list_pending(held=True), 60, "the held request")

    def listed() -> list[str] | None:
        out = ctl(s.env, "pending").stdout.splitlines()
        return out if any(held.summary in line for line in out) else None

    out = wait_until(listed, 60, "pending to list the dialog at the keyboard", interval=0.2)
    assert out[:4] == ["no pending requests in the channel", "",
                       "1 at a keyboard (answered there, or here once it reaches the channel):",
                       f"{'SESSION':16} {'AGENT':20} {'IN':>6}  SUMMARY"], out
    [line] = out[4:]
    left = int(line.split()[2].rstrip("s"))
    assert 90 - (time.time() - shown) - 5 <= left <= 90, (left, line)
    title = screen_state(s)["dialog"]
    assert line == f"{s.session_dir().name[:16]:16} {'main':20} {left:5d}s  Bash: echo kb > kb.txt (dialog \"{title}\")"
    assert ctl(s.env, "pending", "--json").stdout.strip() == "[]"  # the JSON lists answerable requests only
    s.child.send("\r")  # answered at the keyboard: gone from both listings
    expect_text(s.child, "made it", 30)
    wait_until(lambda: ctl(s.env, "pending").stdout == "no pending requests\n", 60, "the dialog gone from pending",
               interval=0.2)
    assert exit_tui(s.child) == 0


def test_a_dialog_released_to_the_channel_is_listed_once(spawn_tui, cli_version, real_claude, model_server,
                                                         offline_env, monkeypatch):
    s = Session(spawn_tui, real_claude, model_server, offline_env, monkeypatch,
                [bash("echo ch > ch.txt"), {"text": "made it"}], config='[permissions]\nask = ["Bash(echo *)"]\n',
                idle=2)
    expect_text(s.child, DIALOG, 60)
    [req] = wait_until(lambda: channel.list_pending(), 60, "the request in the channel")
    out = ctl(s.env, "pending").stdout
    assert out.count("echo ch > ch.txt") == 1 and "at a keyboard" not in out, out
    channel.answer(req.id, "allow")
    expect_text(s.child, "made it", 30)
    assert exit_tui(s.child) == 0
