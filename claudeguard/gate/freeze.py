"""No window between the hook's check of a path and the CLI's use of it (issue 32, class 5).

The CLI's own file tools (Read, Write, Edit, ...) run in the CLI's process, outside the box, after
the hook answered. A command the agent left running in the background of its session (a
``run_in_background`` Bash call: its box lives as long as it does) could swap a directory of
the project for a link to the home between the two (``renameat2`` with RENAME_EXCHANGE, or two
renames in a loop), and the CLI would write through the link. So, for a file tool's call, the
gate stops every process of the session's boxes (SIGSTOP: it cannot be caught) before it looks
at the path, and lets them go on (SIGCONT) once the call has ended; meanwhile nothing the agent
runs can change a path.

- Who: the processes of the session's boxes, found as the ``bwrap`` processes whose command line
  names the session's private /tmp, and everything below them (their own pid namespace), from
  one scan of /proc; stopped until a rescan finds no new one (a stopped process forks nothing),
  and each seen stopped (state ``T``) before the gate decides, within ``STOP_WAIT_S``.
- Until when: the call's PostToolUse or PostToolUseFailure; else its end as the watchdog learns
  it (the call-end event, the CLI's transcript); else the next decision of the session; at the
  latest ``MAX_PAUSE_S`` after the pause (the monitor's sample resumes it). A call the gate does
  not let run (denied, or waiting for a human) is resumed at once: the pause covers the check
  and the CLI's use right after it.
- Where it is kept: ``paused/<call>.json`` in the session dir (the box hides it), so a command
  hook process and the service share it.

A session with no background command in its boxes pays a walk of its launcher's process tree (a
few /proc reads) per file tool call; a --bg session, whose CLI runs under the CLI's daemon, a
scan of every process (~1.3 ms for 90).
"""

from __future__ import annotations

import json
import os
import signal
import time

from claudeguard.procs import process_start

PAUSED_DIR = "paused"
STOP_WAIT_S = 2.0
MAX_PAUSE_S = 10.0
FILE_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead", "Glob", "Grep", "LS"})


def _children(pid: int) -> list[int] | None:
    """The children of every thread of ``pid``; None when the kernel has no ``children`` files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(x) for x in fh.read().split())
        except FileNotFoundError:
            if os.path.exists(f"/proc/{pid}/task/{tid}"):
                return None  # no CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return out


def _below(root: int) -> list[int] | None:
    """``root`` and all its descendants, from the ``children`` files (a few reads, where a scan of
    /proc reads every process); None when they cannot be read."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        kids = _children(pid)
        if kids is None:
            return None
        todo.extend(kids)
    return out


def _scan(marker: bytes, launcher: int | None = None) -> dict[int, str]:
    """pid -> start of every process of the boxes whose bwrap names ``marker``, and below them:
    found below the session's ``launcher`` when it runs (its CLI is its child), else by a scan of
    every process (a --bg session's CLI runs under the CLI's own daemon)."""
    if launcher and process_start(launcher) is not None:
        pids = _below(launcher)
        if pids is not None:
            return {p: s for p in _bwrap_trees(pids, marker) if (s := process_start(p)) is not None}
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
        if b"(bwrap)" not in stat:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker in fh.read():
                    roots.append(pid)
        except OSError:
            continue
    out: dict[int, str] = {}
    todo = list(roots)
    while todo:  # every process below a box's bwrap is in the box
        pid = todo.pop()
        start = process_start(pid)
        if start is not None and pid not in out:
            out[pid] = start
            todo.extend(children.get(pid, []))
    return out


def _bwrap_trees(pids: list[int], marker: bytes) -> list[int]:
    """Of ``pids`` (a tree, parents before children), the bwrap processes naming ``marker`` and
    everything listed after them below them."""
    inside: set[int] = set()
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid in inside:
            inside.add(pid)
            out.append(pid)
            continue
        if b"(bwrap)" in stat:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if marker in fh.read():
                        inside.add(pid)
                        out.append(pid)
            except OSError:
                continue
    return out


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2:].split()
    return rest[0].decode() if rest else None


def _safe(call: str) -> str:
    return "".join(c for c in call if c.isalnum() or c in "_-")[:80] or "call"


def _record(session_dir: str, call: str) -> str:
    return os.path.join(session_dir, PAUSED_DIR, _safe(call) + ".json")


def pause(session_dir: str, call: str, launcher: int | None = None) -> int:
    """Stop every process of the session's boxes for ``call``; how many were stopped. 0 (and no
    record) when none runs. Raises nothing: a process that cannot be seen stopped within the
    bound is said by the return value -1 (the caller fails closed)."""
    marker = os.path.join(session_dir, "tmp").encode()
    stopped: dict[int, str] = {}
    for _ in range(50):
        new = {p: s for p, s in _scan(marker, launcher).items() if p not in stopped}
        if not new:
            break
        for pid, start in new.items():
            if process_start(pid) == start:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stopped[pid] = start
                except (ProcessLookupError, PermissionError):
                    pass
    if not stopped:
        return 0
    from claudeguard.files import write_atomic

    os.makedirs(os.path.join(session_dir, PAUSED_DIR), mode=0o700, exist_ok=True)
    write_atomic(_record(session_dir, call), json.dumps({"procs": [[p, s] for p, s in stopped.items()],
                                                         "until": time.time() + MAX_PAUSE_S}))
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if all(_state(p) in (None, "T", "t", "Z", "X") for p in stopped):
            return len(stopped)
        time.sleep(0.002)
    return -1


def _procs_of(path: str) -> list[tuple[int, str]]:
    try:
        with open(path) as fh:
            items = json.load(fh).get("procs") or []
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for item in items:
        try:
            out.append((int(item[0]), str(item[1])))
        except (TypeError, ValueError, IndexError):
            continue
    return out


def _resume_file(path: str) -> None:
    """Forget one call's pause; let go its processes that no other call's pause still holds
    (file tools run side by side: two Reads at once)."""
    procs = _procs_of(path)
    try:
        os.unlink(path)
    except OSError:
        pass
    directory = os.path.dirname(path)
    held: set[tuple[int, str]] = set()
    try:
        for name in os.listdir(directory):
            if name.endswith(".json"):
                held.update(_procs_of(os.path.join(directory, name)))
    except OSError:
        pass
    for pid, start in procs:
        if (pid, start) not in held and process_start(pid) == start:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass


def resume(session_dir: str, call: str) -> None:
    """Let the processes stopped for ``call`` go on (nothing when none was)."""
    path = _record(session_dir, call)
    if os.path.exists(path):
        _resume_file(path)


def resume_others(session_dir: str, keep: str = "", *, expired_only: bool = False,
                  in_flight: set[str] | None = None) -> None:
    """Let go what was stopped for any call but ``keep``: the session's next decision; with
    ``expired_only``, what has waited ``MAX_PAUSE_S``, and, given the calls ``in_flight`` (the
    watchdog's), every call not among them (it ended): the monitor's sample."""
    directory = os.path.join(session_dir, PAUSED_DIR)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    now = time.time()
    kept = os.path.basename(_record(session_dir, keep)) if keep else ""
    for name in names:
        if name == kept or not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        if in_flight is not None and name[:-len(".json")] not in {_safe(c) for c in in_flight}:
            _resume_file(path)
            continue
        if expired_only:
            try:
                with open(path) as fh:
                    until = float(json.load(fh).get("until") or 0)
            except (OSError, ValueError, AttributeError, TypeError):
                until = 0.0
            if until > now:
                continue
        _resume_file(path)
