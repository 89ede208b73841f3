"""``fast_entry.py statusline SESSION_DIR``: the status line of a guarded session with a person at
its terminal (``plan/status_line.py`` puts it in the CLI's settings). The CLI runs it with the
status line's JSON on stdin (on its events, and every ``refreshInterval`` seconds); it prints:

- what the user's own ``statusLine`` prints (the one the CLI would have run, recorded in
  ``SESSION_DIR/status_line.json``), given the same input;
- then, when calls of this session wait in the approval channel (a background agent's call, whose
  dialog the CLI cannot show; a dialog nobody answered within ``idle_before_channel``), one line
  saying how many and the command that answers them.

It never fails the CLI's screen: any error leaves the guard's line out (the user's is still shown).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.channel.model import Request

USERS_TIMEOUT_S = 2.0  # the user's own status line command gets this long
SUMMARY_CHARS = 60


def users_lines(session_dir: str, data: bytes) -> list[str]:
    """What the user's own status line command prints for ``data`` (none: [])."""
    try:
        with open(os.path.join(session_dir, "status_line.json"), "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    if b'"command"' not in raw:
        return []  # none (the usual case: no json to import, every refresh)
    import json

    try:
        users = json.loads(raw)
    except ValueError:
        return []
    command = users.get("command") if isinstance(users, dict) else None
    if not isinstance(command, str) or not command.strip():
        return []
    import subprocess

    try:
        # As the CLI runs it: a shell command line, the status line's JSON on stdin. Its own
        # process group, so that a command that outlives the timeout is stopped whole.
        # Not through procs.capture: that gives stdin /dev/null (here the JSON) and decodes strictly.
        proc = subprocess.run(["/bin/sh", "-c", command], input=data, capture_output=True,
                              timeout=USERS_TIMEOUT_S, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return proc.stdout.decode(errors="replace").rstrip("\n").split("\n") if proc.stdout.strip() else []


def guard_line(waiting: list[Request]) -> str | None:
    """The guard's line: the waiting count and the command that answers (None: nothing waits)."""
    if not waiting:
        return None
    if len(waiting) == 1:
        req = waiting[0]
        who = f"{req.agent_type}: " if req.agent_type else ""
        summary = " ".join(req.summary.split())
        if len(summary) > SUMMARY_CHARS:
            summary = summary[:SUMMARY_CHARS - 1] + "…"
        # the command first: a narrow terminal cuts the end of the line
        return f"⏳ claudeguard: 1 call waits · claudeguardctl approve|deny {req.id} · {who}{summary}"
    return f"⏳ claudeguard: {len(waiting)} calls wait · claudeguardctl console"


def waiting_requests(session_dir: str) -> list[Request]:
    # The channel is <runtime>/channel beside <runtime>/sessions/<sid>: no request file there, no
    # request of any session, and the channel's machinery (~17 ms of imports) is not loaded.
    channel_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(session_dir))), "channel")
    try:
        if not any(name.endswith(".json") for name in os.listdir(channel_dir)):
            return []
    except OSError:
        return []
    from claudeguard.channel.answers import list_pending
    from claudeguard.files import read_json

    snapshot = read_json(os.path.join(session_dir, "session.json"))
    session_id = snapshot.get("session_id") if isinstance(snapshot, dict) else None
    if not isinstance(session_id, str) or not session_id:
        return []
    return list_pending(session_id)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: fast_entry.py statusline SESSION_DIR", file=sys.stderr)
        return 2
    session_dir = argv[0]
    data = sys.stdin.buffer.read()
    lines = users_lines(session_dir, data)
    try:
        mine = guard_line(waiting_requests(session_dir))
    except Exception:  # noqa: BLE001 - the guard's line never breaks the CLI's screen
        mine = None
    if mine:
        lines.append(mine)
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
    return 0
