"""Session status files and the session listing behind ``claudeguardctl ps``.

Each guarded session's monitor rewrites ``<runtime>/sessions/<id>/status.json`` at a sample that
changed something in it, else every 30 s (atomically: a private temp file renamed over the old
one). ``list_sessions`` reads them all; a session whose supervisor died (pid gone, or reused by
another process: the start time tells) is listed once as ``supervisor-dead`` and its directory
removed. Finished sessions are not listed. With ``include_unguarded`` it also looks for Claude CLI
processes that no claudeguard started and flags the ones that look hung, from recent evidence (``watchdog.unguarded``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from claudeguard.files import read_json, write_atomic
from claudeguard.procs import process_start, same_start

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

STATUS_FILE = "status.json"
FIELDS = ("pid", "child_pid", "guarded", "cwd", "state", "cpu_s", "tokens", "last_activity_s", "pending", "prompt")


def write_status(session_dir: Path, status: dict[str, Any]) -> None:
    """Replace ``status.json`` atomically; the file is 0600 and never follows a symlink."""
    write_atomic(os.path.join(session_dir, STATUS_FILE), json.dumps(status, separators=(",", ":"), default=str))


def read_status(session_dir: Path) -> dict[str, Any] | None:
    return read_json(os.path.join(session_dir, STATUS_FILE))


def _alive(pid: object, start: object) -> bool:
    if not isinstance(pid, int):
        return False
    actual = process_start(pid)
    if actual is None:
        return False
    return start is None or same_start(actual, start)


def _row(st: dict[str, Any], now: float) -> dict[str, Any]:
    row = {k: st.get(k) for k in FIELDS}
    row["guarded"] = True
    last = st.get("last_activity")
    row["last_activity_s"] = (round(max(0.0, now - last), 1) if isinstance(last, (int, float))
                              else st.get("last_activity_s"))
    updated = st.get("updated")
    row["status_age_s"] = round(max(0.0, now - updated), 1) if isinstance(updated, (int, float)) else None
    for key in ("session_id", "started", "base_state", "detail", "stalled", "diagnosis", "evidence", "screen_tail",
                "argv", "output_format", "interactive", "on_stall", "short_id", "name", "watcher"):
        if key in st:
            row[key] = st[key]
    row["background"] = bool(st.get("background"))  # a --bg session, kept by the service
    return row


def sessions_root() -> Path:
    from claudeguard.paths import runtime_root

    return runtime_root() / "sessions"


def list_sessions(include_unguarded: bool = False, **limits: float) -> list[dict[str, Any]]:
    """Every guarded session of this user (and with ``include_unguarded``, other Claude CLIs,
    judged with ``limits``: ``stall_after``, ``tool_stall_after``, ``window_s``)."""
    now = time.time()
    rows: list[dict[str, Any]] = []
    root = sessions_root()
    if os.path.lexists(root):
        from claudeguard.paths import runtime_dir

        runtime_dir("sessions")  # refuses a runtime dir that is not private to us
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False):
                continue
            st = read_status(Path(entry.path))
            if st is None:
                continue  # just created: the monitor writes its first status at once
            if not _alive(st.get("pid"), st.get("pid_start")):
                if st.get("background") and _alive(st.get("child_pid"), st.get("child_start")):
                    # A --bg session whose service is gone: the next service adopts it from
                    # this dir (service/background.py), so it is listed, not removed.
                    row = _row(st, now)
                    row["state"] = "unwatched"
                    rows.append(row)
                    continue
                if st.get("state") != "exited":
                    row = _row(st, now)
                    row["state"] = "supervisor-dead"
                    row["child_alive"] = _alive(st.get("child_pid"), st.get("child_start"))
                    rows.append(row)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if st.get("state") == "exited":
                continue
            rows.append(_row(st, now))
    rows.sort(key=lambda r: r.get("started") or 0)
    if include_unguarded:
        rows.extend(unguarded_sessions(rows, **limits))
    return rows


def unguarded_sessions(guarded: list[dict[str, Any]], **limits: float) -> list[dict[str, Any]]:
    """Claude CLIs outside every guarded session (see ``watchdog.unguarded``)."""
    from claudeguard.watchdog.unguarded import unguarded_sessions as scan

    return scan(guarded, **limits)
