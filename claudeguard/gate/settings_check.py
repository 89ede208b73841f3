"""Before a call is decided: have the session's Claude Code settings files changed since the guard
last checked them?

The CLI re-reads its settings files about a second after one changes (docs/notes/cli-surfaces.md
section 2), hooks and ``disableAllHooks`` included. The launcher's watch
(``plan.settings_watch.Watch``) judges every change and either ends the session as compromised
or records the new state as checked in ``settings-watch.json`` of the session dir (the runtime
dir: out of every tool's reach). The gate stats the same files before each decision (a few
``stat`` calls): a state the watch has not checked yet waits for its verdict (``WAIT_S``), and a
call is denied if none comes, so no call is decided under settings nobody looked at.
"""

from __future__ import annotations

import os
import time

from claudeguard.files import read_json, write_atomic

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Iterable

WATCH_FILE = "settings-watch.json"
WAIT_S = 2.5  # the watch polls every 0.2 s and judges within a few ms: ample under load
POLL_S = 0.05


def snapshot(files: Iterable[str], dirs: Iterable[str]) -> dict[str, object]:
    """Each file's (inode, size, mtime) or None, and each directory's sorted names or None."""
    state: dict[str, object] = {}
    for path in files:
        try:
            st = os.stat(path)
            state[path] = [st.st_ino, st.st_size, st.st_mtime_ns]
        except OSError:
            state[path] = None
    listing: dict[str, object] = {}
    for d in dirs:
        try:
            listing[d] = sorted(os.listdir(d))
        except OSError:
            listing[d] = None
    return {"files": state, "dirs": listing}


def record(session_dir: str, state: dict[str, object]) -> None:
    """The watch's word: this state of the settings files has been checked."""
    import json

    write_atomic(os.path.join(session_dir, WATCH_FILE), json.dumps(state))


def _now(checked: dict[str, object]) -> dict[str, object]:
    files = checked.get("files")
    dirs = checked.get("dirs")
    return snapshot(list(files) if isinstance(files, dict) else [], list(dirs) if isinstance(dirs, dict) else [])


def unchecked(session_dir: str | None, wait: float = WAIT_S) -> str | None:
    """None when the settings files are as the watch last checked them (or no watch runs for
    this session); else, after waiting ``wait`` for the watch's verdict, the first changed path."""
    if not session_dir:
        return None
    path = os.path.join(session_dir, WATCH_FILE)
    checked = read_json(path)
    if checked is None:
        return None
    now = _now(checked)
    if now == checked:
        return None
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        checked = read_json(path)
        if checked is None:
            return None  # the session dir went away: the session is over
        now = _now(checked)
        if now == checked:
            return None
    for group in ("files", "dirs"):
        before, after = checked.get(group), now.get(group)
        if isinstance(before, dict) and isinstance(after, dict):
            for name, value in after.items():
                if before.get(name) != value:
                    return str(name)
    return "?"
