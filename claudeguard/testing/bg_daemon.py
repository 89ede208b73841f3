"""Claude Code's own background daemon (2.1.330+) in tests: start it isolated, find it, stop it.

``claude --bg PROMPT`` returns at once and leaves a detached ``claude daemon run`` behind, with a
``bg-pty-host`` per session (and per pre-started spare) and the session process under each host.
Every one of them is in its own process session, so killing the launching command's process
group stops none of them, and SIGTERM to the daemon alone leaves the running sessions alive
(the daemon logs ``live_workers=1`` and exits; its sessions are re-adopted by the next daemon).

What the CLI records (under its config dir, ``$CLAUDE_CONFIG_DIR`` else ``$HOME/.claude``):

- ``daemon.lock``: ``{"pid", "procStart", "version", "origin", "processWrapper", ...}`` while
  the daemon runs (removed when it exits); ``procStart`` is field 22 of ``/proc/PID/stat``;
- ``daemon/roster.json``: ``workers`` by short id, each with ``pid`` (its pty host),
  ``replPid`` (the session process) and their ``procStart``;
- ``sessions/<pid>.json``: one per live session process (``pid``, ``procStart``, ``jobId`` =
  the short id, ``kind`` = ``bg`` ...);
- sockets under ``/tmp/cc-daemon-<uid>/<first 8 hex of sha256(config dir)>`` (always ``/tmp``,
  whatever ``TMPDIR`` says), left behind when the daemon is killed.

``stop_daemon`` stops all of it by pid: the daemon's whole process tree, every recorded worker
and session, and every process whose environment names the same config dir (a safety net for
a session whose daemon already died), each matched by pid *and* start time, SIGTERM first,
SIGKILL after a grace; then it removes the socket directory. Linux only (``/proc``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

# Field 22 of /proc/PID/stat (start time in clock ticks), as the CLI records it; None when the
# process is gone or a zombie.
from claudeguard.procs import capture
from claudeguard.procs import process_start as proc_start
from claudeguard.testing.wait import wait_until

BG_MARK = "backgrounded · "


class BgDaemonError(RuntimeError):
    """The daemon or a background session did not behave as the test expected."""


# --- where things are ------------------------------------------------------------------------


def config_dir(env: dict[str, str]) -> Path:
    """The CLI's config dir for this environment: ``CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``."""
    explicit = env.get("CLAUDE_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    return Path(env["HOME"]) / ".claude"


def socket_dir(cfg_dir: Path) -> Path:
    """``/tmp/cc-daemon-<uid>/<sha256(config dir)[:8]>``: where 2.1.330 puts its daemon sockets."""
    digest = hashlib.sha256(str(cfg_dir).encode()).hexdigest()[:8]
    return Path("/tmp") / f"cc-daemon-{os.getuid()}" / digest


# --- processes -------------------------------------------------------------------------------


def _ppid(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[1])


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (not ``root`` itself), from one scan of ``/proc``."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        parent = _ppid(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def processes_with_env(name: str, value: str) -> list[int]:
    """Pids of this user's processes whose environment has ``name=value`` exactly."""
    needle = f"{name}={value}".encode()
    me = os.getuid()
    out = []
    for pid in _all_pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid != me:
                continue
            entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in entries and not _is_guard_service(pid):
            out.append(pid)
    return out


def _is_guard_service(pid: int) -> bool:
    """The resident guard service a test's launcher started has the test's HOME too; it is
    stopped by its own fixture (testing.services), and a test may need it after the daemon."""
    try:
        return b"claudeguard.service" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# --- what the CLI recorded ---------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def daemon_pid(cfg_dir: Path) -> int | None:
    """The running daemon's pid from ``daemon.lock``, if that pid is alive with the recorded
    start time (a stale lock, or a pid reused by another process, gives None)."""
    lock = _read_json(cfg_dir / "daemon.lock")
    pid = lock.get("pid")
    if not isinstance(pid, int) or proc_start(pid) is None:
        return None
    recorded = lock.get("procStart")
    if recorded is not None and str(recorded) != proc_start(pid):
        return None
    return pid


def recorded_pids(cfg_dir: Path) -> dict[int, str | None]:
    """Pids the CLI recorded for its workers (pty hosts) and sessions, with their start times."""
    out: dict[int, str | None] = {}
    roster = _read_json(cfg_dir / "daemon" / "roster.json")
    workers = roster.get("workers")
    if not isinstance(workers, dict):
        workers = {}
    for worker in workers.values():
        if not isinstance(worker, dict):
            continue
        for pid_key, start_key in (("pid", "procStart"), ("replPid", "replProcStart")):
            pid = worker.get(pid_key)
            if isinstance(pid, int):
                out[pid] = str(worker[start_key]) if worker.get(start_key) is not None else None
    for path in (cfg_dir / "sessions").glob("*.json"):
        data = _read_json(path)
        pid = data.get("pid")
        if isinstance(pid, int):
            out[pid] = str(data["procStart"]) if data.get("procStart") is not None else None
    return out


def session_records(cfg_dir: Path) -> list[dict[str, Any]]:
    """The ``sessions/<pid>.json`` records of live background sessions (``kind`` = ``bg``)."""
    out = []
    for path in sorted((cfg_dir / "sessions").glob("*.json")):
        data = _read_json(path)
        pid = data.get("pid")
        if data.get("kind") == "bg" and isinstance(pid, int) and proc_start(pid) is not None:
            if data.get("procStart") is None or str(data["procStart"]) == proc_start(pid):
                out.append(data)
    return out


# --- start, list, stop ---------------------------------------------------------------------------


@dataclass
class BgLaunch:
    """One ``claude --bg`` run: its short id (``None`` if it printed none) and output."""

    short_id: str | None
    returncode: int
    stdout: str
    stderr: str


def parse_short_id(stdout: str) -> str | None:
    """The id after ``backgrounded · `` in ``claude --bg``'s output."""
    for line in stdout.splitlines():
        if line.startswith(BG_MARK):
            word = line[len(BG_MARK) :].split()
            return word[0] if word else None
    return None


def launch_bg(argv: Sequence[str | Path], env: dict[str, str], cwd: str | Path, timeout: float = 60) -> BgLaunch:
    """Run ``argv`` (a ``claude --bg ...`` or ``claudeguard --bg ...`` command line) to its
    prompt return. The daemon it leaves behind is the caller's to stop (``stop_daemon``)."""
    proc = capture([str(a) for a in argv], env=env, cwd=str(cwd), timeout=timeout, new_session=True)
    return BgLaunch(parse_short_id(proc.stdout), proc.returncode, proc.stdout, proc.stderr)


def list_agents(claude: str | Path, env: dict[str, str], cwd: str | Path, *, all_sessions: bool = False,
                timeout: float = 30) -> list[dict[str, Any]]:
    """``claude agents --json`` (``--all`` too when asked): a list of ``{pid, id, cwd, kind,
    startedAt, sessionId, name, status, state}``."""
    argv = [str(claude), "agents", "--json", *(["--all"] if all_sessions else [])]
    proc = capture(argv, env=env, cwd=str(cwd), timeout=timeout, new_session=True)
    if proc.returncode != 0:
        raise BgDaemonError(f"claude agents --json: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
    data = json.loads(proc.stdout or "[]")
    if not isinstance(data, list):
        raise BgDaemonError("claude agents --json: not a JSON list")
    return data


def wait_for_daemon(cfg_dir: Path, timeout: float = 30) -> int:
    return wait_until(lambda: daemon_pid(cfg_dir), timeout, interval=0.1,
                      what=f"the daemon's pid in {cfg_dir / 'daemon.lock'}")


def job_state(cfg_dir: Path, short_id: str) -> dict[str, Any]:
    """``jobs/<short id>/state.json``: ``state``, ``detail`` (the last text), ``tokens`` ..."""
    return _read_json(cfg_dir / "jobs" / short_id / "state.json")


def job_texts(cfg_dir: Path, short_id: str) -> list[str]:
    """The ``text`` of every line of ``jobs/<short id>/timeline.jsonl`` (the session's replies)."""
    out: list[str] = []
    try:
        lines = (cfg_dir / "jobs" / short_id / "timeline.jsonl").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            out.append(str(json.loads(line).get("text") or ""))
        except ValueError:
            continue
    return out


@dataclass
class StopReport:
    """What ``stop_daemon`` found and ended."""

    daemon_pid: int | None = None
    stopped: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # needed SIGKILL
    removed_socket_dir: bool = False


def _targets(cfg_dir: Path, env_matches: Iterable[tuple[str, str]]) -> dict[int, str]:
    """Every process to stop, each with the start time it must still have when signalled."""
    found: dict[int, str] = {}

    def add(pid: int, start: str | None = None) -> None:
        now = proc_start(pid)
        if now is None or pid == os.getpid():
            return
        if start is not None and start != now:
            return  # the recorded pid now belongs to someone else
        found.setdefault(pid, now)

    root = daemon_pid(cfg_dir)
    if root is not None:
        add(root)
        for pid in descendants(root):
            add(pid)
    for pid, start in recorded_pids(cfg_dir).items():
        add(pid, start)
        for child in descendants(pid):
            add(child)
    for name, value in env_matches:
        for pid in processes_with_env(name, value):
            add(pid)
            for child in descendants(pid):
                add(child)
    return found


def _all_gone(targets: dict[int, str]) -> bool:
    """Has every process of ``targets`` (pid -> start time) exited?"""
    return not any(proc_start(p) == s for p, s in targets.items())


def _signal_all(targets: dict[int, str], sig: int) -> list[int]:
    sent = []
    for pid, start in targets.items():
        if proc_start(pid) != start:
            continue  # exited (or reused) since we looked
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def stop_daemon(env: dict[str, str], *, grace: float = 5.0, remove_sockets: bool = True) -> StopReport:
    """Stop the background daemon of ``env``'s config dir, its sessions and their tools, by pid.

    Processes are found from the CLI's own records and, as a safety net, by an environment that
    names the same ``HOME`` / ``CLAUDE_CONFIG_DIR`` (tests give every run a fresh one, so those
    are this run's processes and nobody else's). Each is signalled only while its start time is
    unchanged. Rescans until nothing is left (a dying daemon may still spawn a spare).
    """
    cfg_dir = config_dir(env)
    matches = [("CLAUDE_CONFIG_DIR", env["CLAUDE_CONFIG_DIR"])] if env.get("CLAUDE_CONFIG_DIR") else []
    if env.get("HOME"):
        matches.append(("HOME", env["HOME"]))
    report = StopReport(daemon_pid=daemon_pid(cfg_dir))
    for _ in range(5):
        targets = _targets(cfg_dir, matches)
        if not targets:
            break
        report.stopped.extend(p for p in _signal_all(targets, signal.SIGTERM) if p not in report.stopped)
        _signal_all(targets, signal.SIGCONT)  # a stopped process acts on SIGTERM only when continued
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not _all_gone(targets):
            time.sleep(0.05)
        # A pty host outlives its session's SIGTERM (observed): what is left gets SIGKILL.
        report.killed.extend(_signal_all(targets, signal.SIGKILL))
        wait_until(functools.partial(_all_gone, targets), 5.0, "killed processes to exit")
    else:
        raise BgDaemonError(f"processes of {cfg_dir} keep appearing after 5 rounds of stopping")
    if remove_sockets:
        report.removed_socket_dir = remove_socket_dir(cfg_dir)
    return report


def remove_socket_dir(cfg_dir: Path) -> bool:
    """Remove the daemon's socket dir under ``/tmp`` (and its ``cc-daemon-<uid>`` parent when
    that is then empty: other daemons of this user may still use it)."""
    path = socket_dir(cfg_dir)
    existed = path.exists()
    if existed:
        shutil.rmtree(path, ignore_errors=True)
    try:
        # A daemon that exits on its own removes its dir but leaves this parent behind.
        path.parent.rmdir()
    except OSError:
        pass  # not empty (another daemon's), or not there
    return existed and not path.exists()


def live_processes(env: dict[str, str]) -> list[int]:
    """Pids that ``stop_daemon`` would stop now (empty = nothing of this config dir runs)."""
    cfg_dir = config_dir(env)
    matches = [("CLAUDE_CONFIG_DIR", env["CLAUDE_CONFIG_DIR"])] if env.get("CLAUDE_CONFIG_DIR") else []
    if env.get("HOME"):
        matches.append(("HOME", env["HOME"]))
    return sorted(_targets(cfg_dir, matches))
