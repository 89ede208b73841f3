"""Session status files and the session listing behind ``claudeguardctl ps``.

Each guarded session's monitor rewrites ``<runtime>/sessions/<id>/status.json`` at every sample
(atomically: a private temp file renamed over the old one). ``list_sessions`` reads them all; a
session whose supervisor died (pid gone, or reused by another process: the start time tells)
is listed once as ``supervisor-dead`` and its directory removed. Finished sessions are not
listed. With ``include_unguarded`` it also looks for Claude CLI processes that no claudeguard
started and flags the ones that look hung: no terminal, almost no CPU over a long life, and
neither CPU nor io moving while we look.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

STATUS_FILE = "status.json"
FIELDS = ("pid", "child_pid", "guarded", "cwd", "state", "cpu_s", "tokens", "last_activity_s", "pending", "prompt")
# Unguarded CLIs: "hung" means all of these hold.
HUNG_MIN_AGE_S = 300.0
HUNG_MAX_CPU_SHARE = 0.005  # the reported case: 0.7 s of CPU in 8 minutes is 0.15 %
HUNG_WINDOW_S = 0.25
HUNG_WINDOW_CPU_S = 0.03
HUNG_WINDOW_IO = 2048


def write_status(session_dir: Path, status: dict) -> None:
    """Replace ``status.json`` atomically; the file is 0600 and never follows a symlink."""
    path = Path(session_dir) / STATUS_FILE
    tmp = Path(session_dir) / f".{STATUS_FILE}.{os.getpid()}.tmp"
    data = json.dumps(status, separators=(",", ":"), default=str).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_status(session_dir: Path) -> dict | None:
    try:
        fd = os.open(Path(session_dir) / STATUS_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def process_start(pid: int) -> float | None:
    """The process's start time (the unit is the platform's); None when it does not exist."""
    if not isinstance(pid, int) or pid <= 0:
        return None
    if sys.platform.startswith("linux"):
        from claudeguard.watchdog.sampler import read_stat

        info = read_stat(pid)
        return None if info is None or info.status in ("Z", "X") else info.start
    try:
        import psutil

        p = psutil.Process(pid)
        return None if p.status() == psutil.STATUS_ZOMBIE else p.create_time()
    except Exception:  # noqa: BLE001 - gone or not visible: not alive for us
        return None


def _alive(pid: object, start: object) -> bool:
    if not isinstance(pid, int):
        return False
    actual = process_start(pid)
    if actual is None:
        return False
    return start is None or actual == start


def prompt_words(prompt: str | None, words: int = 8, chars: int = 80) -> str | None:
    if not prompt:
        return None
    text = " ".join(prompt.split()[:words])
    return text[:chars] + ("..." if len(text) > chars or len(prompt.split()) > words else "")


def _row(st: dict, now: float) -> dict:
    row = {k: st.get(k) for k in FIELDS}
    row["guarded"] = True
    last = st.get("last_activity")
    row["last_activity_s"] = round(max(0.0, now - last), 1) if isinstance(last, (int, float)) else st.get("last_activity_s")
    updated = st.get("updated")
    row["status_age_s"] = round(max(0.0, now - updated), 1) if isinstance(updated, (int, float)) else None
    for key in ("session_id", "started", "base_state", "detail", "stalled", "diagnosis", "evidence", "screen_tail",
                "argv", "output_format", "interactive", "on_stall"):
        if key in st:
            row[key] = st[key]
    return row


def sessions_root() -> Path:
    from claudeguard.paths import runtime_root

    return runtime_root() / "sessions"


def list_sessions(include_unguarded: bool = False) -> list[dict]:
    """Every guarded session of this user (and with ``include_unguarded``, other Claude CLIs)."""
    now = time.time()
    rows: list[dict] = []
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
        rows.extend(unguarded_sessions(rows))
    return rows


# -- Claude CLIs that no claudeguard started -------------------------------------------------
def _is_claude(name: str | None, exe: str | None, cmdline: list[str] | None) -> bool:
    names = {"claude", "claude.exe"}
    if name in names or (exe and os.path.basename(exe) in names):
        return True
    if name in ("node", "bun", "nodejs") and cmdline:
        return any("claude-code" in a or a.endswith("/claude") for a in cmdline[1:3])
    return False


def _prompt_of(cmdline: list[str]) -> str | None:
    for i, arg in enumerate(cmdline[:-1]):
        if arg in ("-p", "--print") and not cmdline[i + 1].startswith("-"):
            return cmdline[i + 1]
    return None


def unguarded_sessions(guarded: list[dict]) -> list[dict]:
    import psutil

    skip = {r.get("pid") for r in guarded} | {r.get("child_pid") for r in guarded}
    uid = os.getuid() if hasattr(os, "getuid") else None
    parents: dict[int, int] = {}
    found: list = []
    for p in psutil.process_iter(["ppid", "name"]):
        parents[p.pid] = p.info.get("ppid") or 0
        name = p.info.get("name")
        if name in ("claude", "claude.exe", "node", "bun", "nodejs") or (name or "").startswith("claude"):
            found.append(p)
    candidates = []
    for p in found:
        try:
            if uid is not None and p.uids().real != uid:
                continue
            cmdline = p.cmdline()
            try:
                exe = p.exe()
            except psutil.Error:
                exe = None
            if _is_claude(p.info.get("name"), exe, cmdline):
                candidates.append((p, cmdline))
        except psutil.Error:
            continue
    # Claude Code's own background daemon, its pty hosts and spares are listed as the sessions
    # they host (bg_sessions), never as sessions themselves.
    from claudeguard.watchdog.bg_sessions import background_rows, component

    machinery = [(p, cmdline, component(cmdline)) for p, cmdline in candidates if component(cmdline)]
    cand_pids = {p.pid for p, _ in candidates}
    candidates = [(p, cmdline) for p, cmdline in candidates if not component(cmdline)]

    def outside(pid: int) -> bool:
        seen = set()
        cur = parents.get(pid, 0)
        while cur and cur not in seen:
            if cur in skip or cur in cand_pids:
                return False
            seen.add(cur)
            cur = parents.get(cur, 0)
        return True

    rows, probes = [], []
    now = time.time()
    for p, cmdline in candidates:
        if p.pid in skip or p.pid == os.getpid() or not outside(p.pid):
            continue
        try:
            with p.oneshot():
                t = p.cpu_times()
                cpu = t.user + t.system
                age = max(0.0, now - p.create_time())
                tty = p.terminal() if hasattr(p, "terminal") else None
                try:
                    c = p.io_counters()
                    io = getattr(c, "read_chars", c.read_bytes) + getattr(c, "write_chars", c.write_bytes)
                except (psutil.Error, AttributeError, NotImplementedError):
                    io = None
            try:
                cwd = p.cwd()
            except psutil.Error:
                cwd = None
        except psutil.Error:
            continue
        row = {"pid": p.pid, "child_pid": None, "guarded": False, "cwd": cwd, "state": "unguarded",
               "cpu_s": round(cpu, 2), "tokens": None, "last_activity_s": None, "pending": None,
               "prompt": prompt_words(_prompt_of(cmdline)), "tty": tty, "age_s": round(age, 1),
               "suspect_hung": False}
        rows.append(row)
        if tty is None and age >= HUNG_MIN_AGE_S and cpu / max(age, 1.0) < HUNG_MAX_CPU_SHARE:
            probes.append((row, p, cpu, io))
    if probes:
        # A long quiet life is the suspicion; nothing moving while we look confirms it.
        time.sleep(HUNG_WINDOW_S)
        for row, p, cpu, io in probes:
            try:
                t = p.cpu_times()
                moved = (t.user + t.system) - cpu > HUNG_WINDOW_CPU_S
                if io is not None:
                    c = p.io_counters()
                    moved = moved or getattr(c, "read_chars", c.read_bytes) + getattr(c, "write_chars", c.write_bytes) - io > HUNG_WINDOW_IO
            except (psutil.Error, AttributeError, NotImplementedError):
                continue
            if not moved:
                row["suspect_hung"] = True
                row["state"] = "suspect-hung"
    if machinery:
        rows.extend(background_rows(machinery, skip))
    return rows
