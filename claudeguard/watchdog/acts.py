"""What a monitor does with its verdicts: the session's status file (``StatusWriter``: written
when something in it changed, or every ``STATUS_EVERY_S``), and a stall's one stderr line, notify
command, audit row and action (``StallHandler``: ``warn``, ``interrupt``: SIGINT to the CLI,
``kill``: SIGTERM to the tree, SIGKILL after ``kill_grace``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from claudeguard.files import read_json
from claudeguard.procs import fill, process_start, spawn_detached
from claudeguard.watchdog import sampler
from claudeguard.watchdog.signals import TOOL, StallVerdict, WatchConfig, prompt_words, stall_line
from claudeguard.watchdog.status import write_status

if TYPE_CHECKING:
    from pathlib import Path

    from claudeguard.watchdog.state import Tracker

ACTIONS = ("warn", "interrupt", "kill")
# status.json is rewritten when something in it changes, and otherwise this often (its
# ``updated``): an idle session's file differs only in its clocks from one sample to the next,
# and writing it (a temp file renamed over the old one) was half of an idle sample's cost.
STATUS_EVERY_S = 30.0
# The evidence's clocks: they change at every sample of an idle session, and are left out when
# telling whether status.json has anything new to say.
_CLOCKS = frozenset({"cpu_s", "quiet_s", "last_progress_ago_s", "tree_cpu_s", "quiet_cpu_s", "last_output_ago_s",
                     "last_screen_output_ago_s", "stream_silent_s", "age_s", "cpu_delta_s", "busy_ago_s",
                     "load", "waiting_for_cpu"})


def _steady(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without the fields named in ``_CLOCKS``, in it and in the dicts and lists of dicts in it."""
    out = {}
    for k, v in d.items():
        if k in _CLOCKS:
            continue
        if type(v) is dict:
            v = _steady(v)
        elif type(v) is list:
            v = [_steady(x) if type(x) is dict else x for x in v]
        out[k] = v
    return out


def reap(pids: list[int]) -> list[int]:
    """Reap the notify commands that ended; the pids of those still running."""
    left = []
    for pid in pids:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if done == 0:
            left.append(pid)
    return left


def say_stall(diagnosis: str, action: str) -> None:
    """The one stderr line of a stall."""
    try:
        sys.stderr.write(stall_line(diagnosis, action))
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed stderr must not stop the action
        pass


class StatusWriter:
    """``status.json``: rewritten at a sample when anything in it but its clocks changed, and
    otherwise every ``STATUS_EVERY_S`` (``ps`` computes the idle time from ``last_activity``)."""

    def __init__(self, *, session_id: str, session_dir: Path, child_pid: int, config: WatchConfig,
                 output_format: str | None, prompt: str | None, cwd: str, argv: list[str],
                 clock: Callable[[], float]) -> None:
        self.session_id = session_id
        self.session_dir = session_dir
        self.child_pid = child_pid
        self.config = config
        self.output_format = output_format
        self.prompt = prompt
        self.cwd = cwd
        self.argv = list(argv)
        self.clock = clock
        self.started_wall = time.time()
        self.pid_start = process_start(os.getpid())
        self.child_start = process_start(child_pid)
        self.screen_tail: list[str] | None = None
        self.extra: dict[str, Any] = {}  # more fields (a background session's short id, who watches)
        self._key: object = None  # what the last status.json said, its clocks left out
        self._at = 0.0

    def _wall(self, t: float) -> float:
        return time.time() - (self.clock() - t)

    def write(self, v: StallVerdict, tr: Tracker, *, diagnosis: str | None, skipped: int, force: bool = False) -> None:
        """Write the status of verdict ``v`` if it has something new to say (or ``force``);
        OSError when it cannot be written."""
        # What the status below says apart from its clocks and what never changes (a field added
        # below that can change belongs here too, or it is written only every STATUS_EVERY_S).
        key = (tr.progress.last, v.state, v.base, v.detail, v.stalled, v.diagnosis, diagnosis, tr.flow.tokens,
               tr.pending_count, tr.progress.stall_count, tr.shown.exit_code, self.screen_tail, dict(self.extra),
               skipped, _steady(v.evidence))
        now = self.clock()
        if not force and key == self._key and now - self._at < STATUS_EVERY_S:
            return
        status: dict[str, Any] = {
            "session_id": self.session_id,
            "pid": os.getpid(),
            "pid_start": self.pid_start,
            "child_pid": self.child_pid,
            "child_start": self.child_start,
            "guarded": True,
            "cwd": self.cwd,
            "state": v.state,
            "base_state": v.base,
            "detail": v.detail,
            "cpu_s": round(tr.progress.cpu_total, 2),
            "tokens": tr.flow.tokens,
            "last_activity": round(self._wall(tr.progress.last), 3),
            "last_activity_s": round(max(0.0, v.time - tr.progress.last), 1),
            "pending": tr.pending_count,
            "prompt": prompt_words(self.prompt),
            "started": round(self.started_wall, 3),
            "updated": round(time.time(), 3),
            "argv": self.argv,
            "output_format": self.output_format,
            "interactive": bool(self.config.interactive),
            "on_stall": self.config.on_stall,
            "stalled": v.stalled,
            "stall_count": tr.progress.stall_count,
            "diagnosis": v.diagnosis or diagnosis,
            "evidence": v.evidence,
        }
        status.update(self.extra)
        if tr.shown.exit_code is not None:
            status["exit_code"] = tr.shown.exit_code
        if self.screen_tail:
            status["screen_tail"] = self.screen_tail
        if skipped:
            status["evidence"]["stream_bytes_not_inspected"] = skipped
        write_status(self.session_dir, status)
        self._key, self._at = key, now


class StallHandler:
    """A new stall episode: the stderr line, the notify command, the audit row, the action
    (``warn``, ``interrupt``, ``kill``), then ``on_stall``; and the record of every episode for
    the end-of-run report."""

    def __init__(self, *, child_pid: int, session_id: str, session_dir: Path, config: WatchConfig, cwd: str,
                 on_stall: Callable[[str], None], report_error: Callable[[BaseException], None]) -> None:
        self.child_pid = child_pid
        self.session_id = session_id
        self.session_dir = session_dir
        self.config = config
        self.cwd = cwd
        self.on_stall = on_stall
        self.report_error = report_error
        self.diagnosis: str | None = None  # the last one
        self.stalls: list[dict[str, Any]] = []  # one per stall episode, for the end-of-run report
        self.killed = False  # the tree of a stalled child was killed: claudeguard exits 124
        self._notifiers: list[int] = []  # pids of notify commands not yet reaped

    def stall(self, v: StallVerdict) -> tuple[str, str, dict[str, Any]]:
        """The diagnosis, the action and the report's record of a new stall."""
        from claudeguard.channel.audit import now_iso

        diagnosis = v.diagnosis or f"stalled: {v.base}"
        self.diagnosis = diagnosis
        action = self.config.on_stall if self.config.on_stall in ACTIONS else "warn"
        return diagnosis, action, {"time": now_iso(), "state": v.base, "diagnosis": diagnosis, "action": action}

    def act(self, v: StallVerdict) -> None:
        diagnosis, action, stall = self.stall(v)
        say_stall(diagnosis, action)
        self.stalls.append(stall)
        self.notify(diagnosis, v)
        self.audit(diagnosis, v, action)
        if action == "interrupt":
            sampler.interrupt(self.child_pid)
        elif action == "kill":
            self.killed = True
            sampler.kill_tree(self.child_pid, float(self.config.kill_grace),
                              on_signalled=lambda: self._call_back(diagnosis))
            return
        self._call_back(diagnosis)

    def _call_back(self, diagnosis: str) -> None:
        try:
            self.on_stall(diagnosis)
        except Exception as exc:  # noqa: BLE001 - the caller's callback must not stop the watchdog
            self.report_error(exc)

    def _notify_command(self) -> list[str]:
        if self.config.notify is not None:
            return list(self.config.notify)
        try:
            cmd = ((read_json(self.session_dir / "session.json") or {}).get("approval") or {}).get("notify") or []
            return [str(x) for x in cmd] if isinstance(cmd, list) else []
        except AttributeError:  # "approval" is not an object
            return []

    def notify(self, diagnosis: str, v: StallVerdict) -> None:
        args = self.notify_args(diagnosis, v)
        if not args:
            return
        try:
            self._notifiers.append(spawn_detached(args))
        except OSError as exc:
            self.report_error(exc)

    def notify_args(self, diagnosis: str, v: StallVerdict) -> list[str]:
        cmd = self._notify_command()
        if not cmd:
            return []
        # The approval channel's placeholders, so one notify command serves both.
        subs = {"{summary}": f"claudeguard: {diagnosis}", "{id}": "stall", "{session}": self.session_id,
                "{tool}": v.detail if v.base == TOOL and v.detail else "", "{agent}": "main", "{state}": v.base,
                "{cwd}": self.cwd}
        return fill(cmd, subs)

    def reap(self) -> None:
        self._notifiers = reap(self._notifiers)

    def audit(self, diagnosis: str, v: StallVerdict, action: str) -> None:
        try:
            from claudeguard.channel import audit

            audit.record({
                "session_id": self.session_id, "event": "stall", "agent_type": None, "agent_id": None,
                "tool": v.detail if v.base == TOOL else None, "summary": diagnosis, "decision": "stall",
                "decided_by": "watchdog", "scope": None, "waited_s": round(v.quiet_s, 1), "state": v.base,
                "action": action,
            })
        except Exception:  # noqa: BLE001 - the audit log never blocks the watchdog
            pass
