"""The watchdog thread of one guarded session: samples, judges, reports, acts.

Every ``sample_interval`` it feeds the ``Tracker`` everything that happened since the last
sample (output counts from the relay, stream-json summaries from the tap thread, new lines of
the hook's ``events.jsonl``, the channel's pending requests, pty activity and screen hints) and a
fresh sample of the process tree, then writes the status file. At the first verdict of a stall
episode it prints one line on stderr, runs the notify command, writes the audit log, acts
(``warn``: nothing more; ``interrupt``: SIGINT to the CLI; ``kill``: SIGTERM to the whole tree,
SIGKILL after ``kill_grace``) and calls ``on_stall``.

The relay's side (``feed_stdout``) only counts bytes and, for stream-json, queues the chunk for
the tap thread; every other public method only appends to a deque. Nothing here may crash the
supervisor: failures in the sampling thread are reported once and sampling goes on.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

from claudeguard.files import read_json
from claudeguard.procs import fill, spawn_detached
from claudeguard.watchdog import sampler
from claudeguard.watchdog.state import TOOL, Limits, StallVerdict, StreamMsg, Tracker, stall_line
from claudeguard.watchdog.status import process_start, prompt_words, write_status

ACTIONS = ("warn", "interrupt", "kill")


@dataclass
class WatchConfig:
    stall_after: float = 300
    tool_stall_after: float = 1800
    on_stall: str = "warn"
    sample_interval: float = 1.0
    kill_grace: float = 5.0
    interactive: bool = False
    # The notify command (config ``approval.notify``; "{summary}" becomes the diagnosis). None:
    # read it from the session's ``session.json`` snapshot.
    notify: list[str] | None = None
    # The CLI draws on a pty nobody reads (a --bg session): its writes are not progress.
    writes_are_screen: bool = False


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


class Monitor:
    def __init__(self, *, child_pid: int, session_id: str, session_dir: str | Path, config: WatchConfig,
                 output_format: str | None, prompt: str | None, cwd: str, argv: list[str],
                 on_stall: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 stream_tap: bool = True) -> None:
        self.child_pid = child_pid
        self.session_id = session_id
        self.session_dir = Path(session_dir)
        self.config = config
        self.output_format = output_format
        self.prompt = prompt
        self.cwd = cwd
        self.argv = list(argv)
        self.on_stall_cb = on_stall
        self.clock = clock
        interval = max(0.05, float(config.sample_interval))
        self.interval = interval
        self.tracker = Tracker(
            Limits(stall_after=float(config.stall_after), tool_stall_after=float(config.tool_stall_after),
                   interval=interval, interactive=bool(config.interactive), initial_prompt=bool(prompt)),
            start=clock(),
        )
        self.sampler = sampler.TreeSampler(child_pid, clock=clock, reads_only=bool(config.writes_are_screen))
        self.started_wall = time.time()
        self._pid_start = process_start(os.getpid())
        self._child_start = process_start(child_pid)
        # Written by the relay thread only.
        self._out_bytes = 0
        self._out_last = 0.0
        self._msgs: collections.deque[StreamMsg] = collections.deque()
        self._calls: collections.deque[tuple[str, float, object]] = collections.deque()
        self.tap = None
        if output_format == "stream-json" and stream_tap:  # else the summaries come through feed_stream
            from claudeguard.watchdog.stream import StreamTap

            self.tap = StreamTap(self._msgs.append)
        self._events_fh: BinaryIO | None = None
        self._events_buf = b""
        self._screen_tail: list[str] | None = None
        self._notifiers: list[int] = []  # pids of notify commands not yet reaped
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one tick at a time (the thread's, or stop()'s last one)
        self._killed = False
        self._errors_reported: set[str] = set()
        self.last_verdict: StallVerdict | None = None
        self.diagnosis: str | None = None
        self.stalls: list[dict[str, Any]] = []  # one per stall episode, for the end-of-run report
        self.log_dir: str | None = None  # the session's log dir, when not this process's own
        self.extra_status: dict[str, Any] = {}  # more fields for status.json (a background session's short id)

    # -- the supervisor's side -------------------------------------------------------------
    def start(self) -> None:
        self._write(self.tracker.verdict(self.clock()))
        if self.tap is not None:
            self.tap.start()
        self._thread = threading.Thread(target=self._run, name="claudeguard-watchdog", daemon=True)
        self._thread.start()

    def feed_stdout(self, data: bytes) -> None:
        t = self.clock()
        self._out_bytes += len(data)
        self._out_last = t
        if self.tap is not None:
            self.tap.feed(data, t)

    def output_seen(self, total_bytes: int, t: float) -> None:
        """The relay's running output byte count and the time of its last write, counted elsewhere
        (the launcher's activity feed, ``shim/activity.py``)."""
        self._out_bytes, self._out_last = total_bytes, t

    def feed_stream(self, m: StreamMsg, collapsed: int = 0) -> None:
        """One stream-json summary from a tap outside the monitor; ``collapsed``: summaries of
        partial messages left out before it (they count as messages, nothing more)."""
        if collapsed:
            self._calls.append(("messages", m.time, collapsed))
        self._msgs.append(m)

    def note_activity(self, what: str, t: float | None = None) -> None:
        """From a pty relay: "input" (keystrokes), "output" (screen output: a sign of life, not
        progress), "at-prompt" (the input box waits for its user), "busy" (a turn runs)."""
        self._calls.append(("activity", self.clock() if t is None else t, what))

    def set_screen_hint(self, hint: str | None, t: float | None = None) -> None:
        self._calls.append(("screen", self.clock() if t is None else t, hint))

    def set_screen_tail(self, lines: list[str] | None) -> None:
        """The last lines of a pty screen, shown by ``ps --screen``."""
        self._screen_tail = list(lines)[-20:] if lines else None

    def stop(self, exit_code: int | None, final: bool = True) -> None:
        """Stop sampling, write the final ``exited`` status (``ps`` no longer lists it); with
        ``final`` False the session goes on, watched by another monitor: no last status."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.interval + float(self.config.kill_grace) + 5.0)
        if self.tap is not None:
            self.tap.stop()
        with self._lock:
            if not final:
                self._stop_files()
                return
            now = self.clock()
            self._drain()
            self.tracker.exited(now, exit_code)
            verdict = self.tracker.verdict(now)
            self._write(verdict)
            self._stop_files()

    def _stop_files(self) -> None:
        if self._events_fh is not None:
            self._events_fh.close()
            self._events_fh = None
        self._reap_notifiers()

    def carry_stall(self, in_stall: bool, stall_count: int, since: float | None) -> None:
        """Take over from another monitor of the same session (the resident service's, or the
        launcher's): a stall it reported goes on as the same episode (no second report), its
        quiet clock running from the last progress before it. Out of a stall the clock starts
        now: ``since`` may be older than progress the other monitor saw and did not tell."""
        tr = self.tracker
        tr.stall_count = max(tr.stall_count, int(stall_count))
        if in_stall:
            if since is not None and since < tr.last_progress:
                tr.last_progress = tr._hold = since
            tr.in_stall = True

    def stall_state(self) -> dict[str, Any]:
        """What ``carry_stall`` of the next monitor needs."""
        tr = self.tracker
        return {"in_stall": tr.in_stall, "stall_count": tr.stall_count, "since": tr.last_progress}

    @property
    def stalled(self) -> bool:
        return self.tracker.in_stall

    @property
    def killed(self) -> bool:
        """The watchdog killed the tree of a stalled child: claudeguard exits 124."""
        return self._killed

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        if self.log_dir is not None:  # in the resident service: this session's audit log
            from claudeguard.channel.audit import session_log

            session_log.set(self.log_dir)
        next_t = self.clock()
        while True:
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    verdict = self._tick()
                if verdict is not None and verdict.new_stall:
                    self._act(verdict)
            except Exception as exc:  # noqa: BLE001 - the watchdog must never take the session down
                self._report_error(exc)
            next_t += self.interval
            delay = next_t - self.clock()
            if delay < 0:  # fell behind (a suspended laptop, a long kill): do not catch up in a burst
                next_t, delay = self.clock() + self.interval, self.interval
            if self._stop.wait(delay):
                return

    def _tick(self) -> StallVerdict | None:
        self._drain()
        verdict = self.tracker.sample(self.sampler.sample())
        self.last_verdict = verdict
        self._write(verdict)
        self._reap_notifiers()
        return verdict

    def _drain(self) -> None:
        tr = self.tracker
        if self._out_bytes:
            tr.output(self._out_last, self._out_bytes)
        msgs = self._msgs
        while msgs:
            tr.stream(msgs.popleft())
        calls = self._calls
        while calls:
            kind, t, value = calls.popleft()
            if kind == "activity":
                tr.activity(t, str(value))
            elif kind == "screen":
                tr.screen(t, value if isinstance(value, str) else None)  # queued by set_screen_hint: a str or None
            elif kind == "messages":
                tr.messages += value if isinstance(value, int) else 0  # queued by feed_stream: an int
        self._read_events()
        tr.pending(self.clock(), self._pending())

    def _pending(self) -> int | None:
        try:
            from claudeguard.channel import list_pending

            return len(list_pending(self.session_id))
        except Exception:  # noqa: BLE001 - no channel, or a broken one: "unknown"
            return None

    def _events_replaced(self, fh: BinaryIO) -> bool:
        try:
            st = os.stat(self.session_dir / "events.jsonl", follow_symlinks=False)
        except OSError:
            return os.fstat(fh.fileno()).st_nlink == 0  # removed, not yet made again
        mine = os.fstat(fh.fileno())
        return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino)

    def _read_events(self) -> None:
        import json

        fh = self._events_fh
        if fh is None:
            try:
                fd = os.open(self.session_dir / "events.jsonl", os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                return
            fh = self._events_fh = os.fdopen(fd, "rb")
        data = fh.read(1 << 20)
        if not data:
            if self._events_replaced(fh):
                # The session dir was removed and made again (shim/keeper.py): read the new file.
                fh.close()
                self._events_fh, self._events_buf = None, b""
            return
        data = self._events_buf + data
        end = data.rfind(b"\n")
        if end < 0:
            self._events_buf = data
            return
        self._events_buf = data[end + 1:]
        mono, wall = self.clock(), time.time()
        for line in data[:end].splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            when = ev.get("time")
            t = mono - (wall - when) if isinstance(when, (int, float)) else mono
            self.tracker.guard(min(mono, max(t, mono - 86400.0)), ev)

    # -- status ----------------------------------------------------------------------------
    def _wall(self, t: float) -> float:
        return time.time() - (self.clock() - t)

    def _write(self, v: StallVerdict) -> None:
        tr = self.tracker
        status: dict[str, Any] = {
            "session_id": self.session_id,
            "pid": os.getpid(),
            "pid_start": self._pid_start,
            "child_pid": self.child_pid,
            "child_start": self._child_start,
            "guarded": True,
            "cwd": self.cwd,
            "state": v.state,
            "base_state": v.base,
            "detail": v.detail,
            "cpu_s": round(tr.cpu_total, 2),
            "tokens": tr.tokens,
            "last_activity": round(self._wall(tr.last_progress), 3),
            "last_activity_s": round(max(0.0, v.time - tr.last_progress), 1),
            "pending": tr.pending_count,
            "prompt": prompt_words(self.prompt),
            "started": round(self.started_wall, 3),
            "updated": round(time.time(), 3),
            "argv": self.argv,
            "output_format": self.output_format,
            "interactive": bool(self.config.interactive),
            "on_stall": self.config.on_stall,
            "stalled": v.stalled,
            "stall_count": tr.stall_count,
            "diagnosis": v.diagnosis or self.diagnosis,
            "evidence": v.evidence,
        }
        status.update(self.extra_status)
        if tr.exit_code is not None:
            status["exit_code"] = tr.exit_code
        if self._screen_tail:
            status["screen_tail"] = self._screen_tail
        if self.tap is not None and self.tap.skipped_bytes:
            status["evidence"]["stream_bytes_not_inspected"] = self.tap.skipped_bytes
        try:
            write_status(self.session_dir, status)
        except OSError as exc:
            self._report_error(exc)

    def _report_error(self, exc: BaseException) -> None:
        key = f"{type(exc).__name__}: {exc}"
        if key in self._errors_reported:
            return
        self._errors_reported.add(key)
        try:
            sys.stderr.write(f"claudeguard: watchdog: {key}\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - stderr may be gone; the watchdog goes on
            pass

    # -- a stall ---------------------------------------------------------------------------
    def _stall(self, v: StallVerdict) -> tuple[str, str, dict[str, Any]]:
        """The diagnosis, the action and the report's record of a new stall."""
        from claudeguard.channel.audit import now_iso

        diagnosis = v.diagnosis or f"stalled: {v.base}"
        self.diagnosis = diagnosis
        action = self.config.on_stall if self.config.on_stall in ACTIONS else "warn"
        return diagnosis, action, {"time": now_iso(), "state": v.base, "diagnosis": diagnosis, "action": action}

    def _act(self, v: StallVerdict) -> None:
        diagnosis, action, stall = self._stall(v)
        say_stall(diagnosis, action)
        self.stalls.append(stall)
        self._notify(diagnosis, v)
        self._audit(diagnosis, v, action)
        if action == "interrupt":
            sampler.interrupt(self.child_pid)
        elif action == "kill":
            self._killed = True
            sampler.kill_tree(self.child_pid, float(self.config.kill_grace),
                              on_signalled=lambda: self._call_back(diagnosis))
            return
        self._call_back(diagnosis)

    def _call_back(self, diagnosis: str) -> None:
        try:
            self.on_stall_cb(diagnosis)
        except Exception as exc:  # noqa: BLE001 - the caller's callback must not stop the watchdog
            self._report_error(exc)

    def _notify_command(self) -> list[str]:
        if self.config.notify is not None:
            return list(self.config.notify)
        try:
            cmd = ((read_json(self.session_dir / "session.json") or {}).get("approval") or {}).get("notify") or []
            return [str(x) for x in cmd] if isinstance(cmd, list) else []
        except AttributeError:  # "approval" is not an object
            return []

    def _notify(self, diagnosis: str, v: StallVerdict) -> None:
        args = self._notify_args(diagnosis, v)
        if not args:
            return
        try:
            self._notifiers.append(spawn_detached(args))
        except OSError as exc:
            self._report_error(exc)

    def _notify_args(self, diagnosis: str, v: StallVerdict) -> list[str]:
        cmd = self._notify_command()
        if not cmd:
            return []
        # The approval channel's placeholders, so one notify command serves both.
        subs = {"{summary}": f"claudeguard: {diagnosis}", "{id}": "stall", "{session}": self.session_id,
                "{tool}": v.detail if v.base == TOOL and v.detail else "", "{agent}": "main", "{state}": v.base,
                "{cwd}": self.cwd}
        return fill(cmd, subs)

    def _reap_notifiers(self) -> None:
        self._notifiers = reap(self._notifiers)

    def _audit(self, diagnosis: str, v: StallVerdict, action: str) -> None:
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
