"""No window between the hook's check of a path and the CLI's use of it (issue 32, class 5).

The CLI's own file tools (Read, Write, Edit, ...) run in the CLI's process, outside the box, after
the hook answered. A command the agent left running in the background of its session (a
``run_in_background`` Bash call: its box lives as long as it does) could swap a directory of
the project for a link to the home between the two (``renameat2`` with RENAME_EXCHANGE, or two
renames in a loop), and the CLI would write through the link. So, for a file tool's call, the
gate stops every process of the session's boxes (SIGSTOP: it cannot be caught) before it looks
at the path, and lets them go on (SIGCONT) once the call has ended; meanwhile nothing the agent
runs can change a path.

- Who: the processes of the session's boxes, found as the ``bwrap`` and ``box-enter``
  (plan/box_enter.py) processes whose command line names the session's dir, and
  everything below them (their own pid namespace), from one scan of /proc; stopped until a
  rescan finds no new one (a stopped process forks nothing), and each seen stopped (state
  ``T``) before the gate decides, within ``STOP_WAIT_S``.
- Until when: the call's PostToolUse or PostToolUseFailure; else its end as the watchdog learns
  it (the call-end event, the CLI's transcript); else the next decision of the session; at the
  latest ``MAX_PAUSE_S`` after the pause (the monitor's sample resumes it). A call the gate does
  not let run (denied, or waiting for a human) is resumed at once: the pause covers the check
  and the CLI's use right after it.
- Where it is kept: ``paused/<call>.json`` in the session dir (the box hides it), so a command
  hook process and the service share it.

Which sessions have a box running at all is told by the box script itself (``boxes/<pid>``, a
file it leaves before bwrap starts): a session with none pays a listing of that dir per file tool
call; one with a live box a scan of every process (~1.3 ms for 90), repeated until nothing new is
found (the ``children`` files of a tree are faster but may miss a child that comes or goes).
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
NOTICE_S = 3.0  # longer than a watchdog sample takes to read a call's start
FILE_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead", "Glob", "Grep", "LS"})


def _scan(marker: bytes) -> dict[int, str]:
    """pid -> start of every process of the boxes whose bwrap names ``marker``, and below them,
    from one scan of every process."""
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
        if b"(bwrap)" not in stat and b"(box-enter" not in stat:  # a call's own box, or one run in the session's
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


def _boxes_alive(session_dir: str) -> bool:
    """Has a box of the session started whose shell still runs? (The box script leaves a file
    named by its pid in ``boxes/`` before bwrap starts; a dead one's file is removed here.)"""
    directory = os.path.join(session_dir, "boxes")
    try:
        names = os.listdir(directory)
    except OSError:
        return True  # not told: look
    alive = False
    for name in names:
        if name.isdigit() and os.path.exists(f"/proc/{name}"):
            alive = True
        else:
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass
    return alive


def pause(session_dir: str, call: str) -> int:
    """Stop every process of the session's boxes for ``call``; how many were stopped. 0 (and no
    record) when none runs. Raises nothing: a process that cannot be seen stopped within the
    bound is said by the return value -1 (the caller fails closed)."""
    if not _boxes_alive(session_dir):
        return 0
    # In every box process's command line: bwrap's binds (its private /tmp), the box script's
    # entry (the live file), the CLI's shell that enters the box itself (its own path there).
    marker = os.path.join(session_dir, "").encode()
    stopped: dict[int, str] = {}
    for _ in range(50):
        # Every process, not the launcher's tree: a ``children`` file may miss a child that
        # comes or goes while it is read; the last scan, with everything stopped, misses none.
        new = {p: s for p, s in _scan(marker).items() if p not in stopped}
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
                                                         "at": time.time(), "until": time.time() + MAX_PAUSE_S}))
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
        if expired_only:
            try:
                with open(path) as fh:
                    record = json.load(fh)
                at, until = float(record.get("at") or 0), float(record.get("until") or 0)
            except (OSError, ValueError, AttributeError, TypeError):
                at = until = 0.0
            # A call the watchdog does not have in flight has ended, but only once it could have
            # seen its start: the hook writes the start just before the pause, and a sample may
            # have read the events just before that (NOTICE_S).
            ended = in_flight is not None and name[:-len(".json")] not in {_safe(c) for c in in_flight} \
                and now - at > NOTICE_S
            if until > now and not ended:
                continue
        _resume_file(path)
