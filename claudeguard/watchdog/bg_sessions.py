"""The real CLI's own background sessions (2.1.330 ``claude --bg``, ``claude agents``) for
``claudeguardctl ps --all``: one row per session, never the daemon that hosts them.

What runs (observed, 2.1.330): a detached ``claude daemon run`` supervisor, under it one
``bg-pty-host`` per session and per pre-started spare, and under each host the session process
(a claimed spare keeps its ``--bg-spare`` argv). Only the sessions are sessions; the supervisor,
the hosts and the unclaimed spares are machinery and are not listed.

Where the sessions come from, per config dir (``CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``, read
from the environment of the daemon's processes): the CLI's own records, ``sessions/<pid>.json``
with ``kind == "bg"`` whose pid still has the recorded start time, less the spares no session
has claimed (``"spare": true`` and no ``jobs/<jobId>/state.json``), with the state the CLI
keeps in ``jobs/<jobId>/state.json``. The CLI's interface for scripts (``claude agents --json``)
says the same, but starts a CLI per config dir: with ten daemons on a loaded machine that made
``ps --all`` take 26 to 56 s (issue 37); reading the files takes milliseconds
(bench/ps_all.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psutil

from claudeguard.procs import process_start


def component(cmdline: list[str]) -> str | None:
    """``daemon``, ``pty-host`` or ``spare`` when ``cmdline`` is a part of the background
    machinery (a claimed spare, i.e. a session, says ``spare`` too), else None."""
    words = cmdline[1:4]
    if words[:2] == ["daemon", "run"]:
        return "daemon"
    if "--bg-pty-host" in cmdline or words[:1] == ["bg-pty-host"]:
        return "pty-host"
    if "--bg-spare" in cmdline or words[:1] == ["bg-spare"]:
        return "spare"
    return None


def config_dir_of(environ: dict[str, str]) -> Path | None:
    explicit = environ.get("CLAUDE_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    home = environ.get("HOME")
    return Path(home) / ".claude" if home else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _from_records(cfg_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(cfg_dir / "sessions"))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        data = _read_json(cfg_dir / "sessions" / name)
        pid = data.get("pid") if data is not None else None
        if data is None or data.get("kind") != "bg" or not isinstance(pid, int):
            continue
        start = process_start(pid)
        if start is None or (data.get("procStart") is not None and str(data["procStart"]) != start):
            continue
        job = data.get("jobId")
        state = _read_json(cfg_dir / "jobs" / str(job) / "state.json") if isinstance(job, str) and job else None
        if data.get("spare") and state is None:
            continue  # a pre-started spare no session has claimed: machinery
        out.append({"pid": pid, "short_id": job, "session_id": data.get("sessionId"),
                    "name": data.get("name"), "cwd": data.get("cwd") or (state or {}).get("cwd"),
                    "cli_state": (state or {}).get("state"), "cli_status": data.get("status")})
    return out


def background_rows(parts: list[tuple[Any, list[str], str]], skip: set[Any]) -> list[dict[str, Any]]:
    """Rows for ``ps --all`` from the machinery processes found by the scan: ``parts`` is
    ``(psutil.Process, cmdline, component)``; ``skip`` holds pids already listed as guarded."""
    dirs: dict[Path, int | None] = {}  # config dir -> its daemon's pid, when one runs
    for proc, _cmdline, kind in parts:
        try:
            environ = proc.environ()
        except psutil.Error:
            continue
        cfg = config_dir_of(environ)
        if cfg is None:
            continue
        if kind == "daemon":
            dirs[cfg] = proc.pid
        else:
            dirs.setdefault(cfg, None)
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    now = time.time()
    for cfg, daemon in dirs.items():
        for entry in _from_records(cfg):
            pid = entry["pid"]
            if pid in skip or pid in seen:
                continue
            seen.add(pid)
            try:
                p = psutil.Process(pid)
                with p.oneshot():
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    age = max(0.0, now - p.create_time())
            except psutil.Error:
                continue  # ended since it was listed
            rows.append({
                "pid": pid, "child_pid": None, "guarded": False, "cwd": entry.get("cwd"), "state": "unguarded",
                "cpu_s": round(cpu, 2), "tokens": None, "last_activity_s": None, "pending": None,
                "prompt": entry.get("name"), "tty": None, "age_s": round(age, 1), "suspect_hung": False,
                "background": True, "short_id": entry.get("short_id"), "session_id": entry.get("session_id"),
                "name": entry.get("name"), "cli_state": entry.get("cli_state"),
                "cli_status": entry.get("cli_status"), "daemon_pid": daemon,
                "config_dir": str(cfg),
            })
    return rows
