"""The real CLI's own background sessions (2.1.330 ``claude --bg``, ``claude agents``) for
``claudeguardctl ps --all``: one row per session, never the daemon that hosts them.

What runs (observed, 2.1.330): a detached ``claude daemon run`` supervisor, under it one
``bg-pty-host`` per session and per pre-started spare, and under each host the session process
(a claimed spare keeps its ``--bg-spare`` argv). Only the sessions are sessions; the supervisor,
the hosts and the unclaimed spares are machinery and are not listed.

Where the sessions come from, per config dir (``CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``, read
from the environment of the daemon's processes):

1. ``claude agents --json`` run with the daemon's own binary and environment (the CLI's
   interface for scripts): ``kind == "background"`` entries with a ``pid``;
2. when that fails, or no daemon is alive (its sessions outlive it), the CLI's own records:
   ``sessions/<pid>.json`` with ``kind == "bg"``, whose pid still has the recorded start time.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

from claudeguard.procs import capture, process_start

AGENTS_TIMEOUT_S = 10.0


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


def _from_agents(exe: str, environ: dict[str, str]) -> list[dict[str, Any]] | None:
    try:
        proc = capture([exe, "agents", "--json"], env=environ, cwd="/", timeout=AGENTS_TIMEOUT_S)
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not isinstance(data, list):
        return None
    out = []
    for entry in data:
        if isinstance(entry, dict) and entry.get("kind") == "background" and isinstance(entry.get("pid"), int):
            out.append({"pid": entry["pid"], "short_id": entry.get("id"), "session_id": entry.get("sessionId"),
                        "name": entry.get("name"), "cwd": entry.get("cwd"),
                        "cli_state": entry.get("state"), "cli_status": entry.get("status")})
    return out


def _from_records(cfg_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((cfg_dir / "sessions").glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pid = data.get("pid") if isinstance(data, dict) else None
        if data.get("kind") != "bg" or not isinstance(pid, int):
            continue
        start = process_start(pid)
        if start is None or (data.get("procStart") is not None and str(data["procStart"]) != start):
            continue
        out.append({"pid": pid, "short_id": data.get("jobId"), "session_id": data.get("sessionId"),
                    "name": data.get("name"), "cwd": data.get("cwd"), "cli_state": None,
                    "cli_status": data.get("status")})
    return out


def background_rows(parts: list[tuple[Any, list[str], str]], skip: set[Any]) -> list[dict[str, Any]]:
    """Rows for ``ps --all`` from the machinery processes found by the scan: ``parts`` is
    ``(psutil.Process, cmdline, component)``; ``skip`` holds pids already listed as guarded."""
    dirs: dict[Path, tuple[str, dict[str, str], int] | None] = {}
    for proc, _cmdline, kind in parts:
        try:
            environ = proc.environ()
        except psutil.Error:
            continue
        cfg = config_dir_of(environ)
        if cfg is None:
            continue
        if kind == "daemon":
            try:
                dirs[cfg] = (proc.exe(), environ, proc.pid)
            except psutil.Error:
                dirs.setdefault(cfg, None)
        else:
            dirs.setdefault(cfg, None)
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    now = time.time()
    for cfg, daemon in dirs.items():
        found = _from_agents(daemon[0], daemon[1]) if daemon else None
        if found is None:
            found = _from_records(cfg)
        for entry in found:
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
                "cli_status": entry.get("cli_status"), "daemon_pid": daemon[2] if daemon else None,
                "config_dir": str(cfg),
            })
    return rows
