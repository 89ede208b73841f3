"""The watchdog thread of one guarded session: samples, judges, reports, acts.

Every ``sample_interval`` it feeds the ``Tracker`` everything that happened since the last
sample (output counts from the relay, stream-json summaries from the tap thread, new lines of
the hook's ``events.jsonl``, the channel's pending requests, pty activity and screen hints) and a
fresh sample of the process tree, then writes the status file when it has something new to say
(or every ``STATUS_EVERY_S``). It samples in a thread of its own, or on a ``Schedule``: one
thread for the monitors of every session of the resident service. At the first verdict of a stall
episode it prints one line on stderr, runs the notify command, writes the audit log, acts
(``warn``: nothing more; ``interrupt``: SIGINT to the CLI; ``kill``: SIGTERM to the whole tree,
SIGKILL after ``kill_grace``) and calls ``on_stall``.

The relay's side (``feed_stdout``) only counts bytes and, for stream-json, queues the chunk for
the tap thread; every other public method only appends to a deque. Nothing here may crash the
supervisor: failures in the sampling thread are reported once and sampling goes on.
"""

from __future__ import annotations

import collections
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from claudeguard.watchdog import sampler
from claudeguard.watchdog.acts import StallHandler, StatusWriter
from claudeguard.watchdog.signals import Limits, StallVerdict, StreamMsg, WatchConfig
from claudeguard.watchdog.state import Tracker

if TYPE_CHECKING:
    from typing import TypedDict

    from claudeguard.channel.model import Request
    from claudeguard.watchdog.sampler import TreeSampler
    from claudeguard.watchdog.transcript import TranscriptEnds

    class StallState(TypedDict, total=False):
        """A stall episode handed from one monitor of a session to the next (``stall_state``,
        ``carry_stall``): over the service's connection, or from the service's to the launcher's."""

        in_stall: bool
        stall_count: int
        since: float | None  # the time of the last progress before the stall (monotonic)

class PendingCounts:
    """The channel's open requests of a session, for every monitor of this process (the service
    runs one a session): a session's requests are listed again only when the channel directory
    changed since a listing found none (posting a request creates files in it) or when it has
    one open (its waiter may die, its deadline pass). An idle sample costs one ``stat``."""

    QUIET_S = 1.0  # a directory changed this recently may change again within its mtime's granularity
    # One stat serves every session sampled within this long (the service's sessions sample back to
    # back); a request posted meanwhile is seen at the next sample, as one posted right after a stat.
    SHARE_S = 0.05

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # path, when, key (path, dev, ino, mtime_ns), mtime
        self._stat: tuple[str, float, tuple[str, int, int, int] | None, float] = ("", 0.0, None, 0.0)
        # session id -> (path, dev, ino, mtime) of the channel when a listing found nothing open
        self._none_at: dict[str, tuple[str, int, int, int]] = {}

    def count(self, session_id: str) -> int:
        return len(self.requests(session_id))

    def requests(self, session_id: str) -> list[Request]:
        """The session's open requests (not the held ones: a dialog still at the keyboard)."""
        from claudeguard.paths import default_runtime_root

        # paths.runtime_root() without building a Path: this runs for every session every second.
        path = os.path.join(os.environ.get("CLAUDEGUARD_RUNTIME_DIR") or default_runtime_root(), "channel")
        now = time.monotonic()
        with self._lock:
            seen_path, seen_at, key, mtime = self._stat
        if seen_path != path or now - seen_at >= self.SHARE_S:
            try:
                st = os.stat(path, follow_symlinks=False)
                key, mtime = (path, st.st_dev, st.st_ino, st.st_mtime_ns), st.st_mtime
            except OSError:
                key, mtime = None, 0.0
            with self._lock:
                self._stat = (path, now, key, mtime)
        with self._lock:
            if key is not None and self._none_at.get(session_id) == key:
                return []
        from claudeguard.channel import list_pending

        found = list_pending(session_id)  # raises when there is no channel, or a broken one
        with self._lock:
            if key is not None and not found and time.time() - mtime > self.QUIET_S:
                self._none_at[session_id] = key
            else:
                self._none_at.pop(session_id, None)
        return found

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._none_at.pop(session_id, None)


pending_counts = PendingCounts()


class Inputs:
    """The sampling side: what happened since the last sample, gathered for the ``Tracker``: the
    relay's output counts, stream-json summaries (from the tap thread, or fed from outside), the
    relay's notes (pty activity, screen hints), the hooks' ``events.jsonl``, the ends of calls from
    the CLI's transcripts, the channel's pending requests; and a sample of the process tree.

    The relay's calls (``feed_stdout`` and the rest) only count or append to a deque; ``drain``
    and ``sample`` run in the sampling thread."""

    def __init__(self, *, child_pid: int, session_id: str, session_dir: Path, clock: Callable[[], float],
                 stream_json: bool, reads_only: bool) -> None:
        self.session_id = session_id
        self.session_dir = session_dir
        self.clock = clock
        self.sampler = sampler.TreeSampler(child_pid, clock=clock, reads_only=reads_only)
        # Written by the relay thread only.
        self._out_bytes = 0
        self._out_last = 0.0
        self._msgs: collections.deque[StreamMsg] = collections.deque()
        self._calls: collections.deque[tuple[str, float, object]] = collections.deque()
        self.tap = None
        if stream_json:  # else the summaries come through feed_stream
            from claudeguard.watchdog.stream import StreamTap

            self.tap = StreamTap(self._msgs.append)
        self._events_fh: BinaryIO | None = None
        self._events_path = os.path.join(session_dir, "events.jsonl")
        self._events_buf = b""
        self._transcripts: TranscriptEnds | None = None
        # Requests of the session seen waiting in the channel: each is told to ``on_waiting`` once
        # (the launcher's "waiting for approval" line, issue 36), in the sampling thread.
        self.on_waiting: Callable[[Request], None] | None = None
        self._announced: set[str] = set()
        self._new_requests: list[Request] = []

    def feed_stdout(self, data: bytes) -> None:
        t = self.clock()
        self._out_bytes += len(data)
        self._out_last = t
        if self.tap is not None:
            self.tap.feed(data, t)

    def output_seen(self, total_bytes: int, t: float) -> None:
        self._out_bytes, self._out_last = total_bytes, t

    def feed_stream(self, m: StreamMsg, collapsed: int = 0) -> None:
        if collapsed:
            self._calls.append(("messages", m.time, collapsed))
        self._msgs.append(m)

    def note(self, kind: str, t: float, value: object) -> None:
        """A relay's note: ``activity`` (its word) or ``screen`` (a hint, or None)."""
        self._calls.append((kind, t, value))

    @property
    def skipped_bytes(self) -> int:
        """Stream bytes the tap could not keep up with."""
        return self.tap.skipped_bytes if self.tap is not None else 0

    def sample(self, tr: Tracker) -> StallVerdict:
        """Everything since the last sample into ``tr``, then a sample of the tree: the verdict."""
        self.drain(tr)
        self._end_pauses(tr)
        return tr.sample(self.sampler.sample())

    def _end_pauses(self, tr: Tracker) -> None:
        """The session's boxes stopped for a file tool's call go on once the call has ended (as
        the hooks' events and the transcript show it) or waited too long (gate/freeze.py)."""
        from claudeguard.gate.freeze import PAUSED_DIR, resume_others

        if os.path.isdir(os.path.join(self.session_dir, PAUSED_DIR)):
            resume_others(str(self.session_dir), expired_only=True, in_flight=set(tr.work.calls))

    def drain(self, tr: Tracker) -> None:
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
                tr.flow.messages += value if isinstance(value, int) else 0  # queued by feed_stream: an int
        self._read_events(tr)
        self._read_transcripts(tr)
        tr.pending(self.clock(), self._pending())
        if self._new_requests:
            new, self._new_requests = self._new_requests, []
            on_waiting = self.on_waiting
            for request in new:
                if on_waiting is not None:
                    try:
                        on_waiting(request)
                    except Exception:  # noqa: BLE001 - a line that cannot be said must not stop the sampling
                        pass

    def close(self) -> None:
        pending_counts.forget(self.session_id)
        self.sampler.close()
        if self._events_fh is not None:
            self._events_fh.close()
            self._events_fh = None

    def _pending(self) -> int | None:
        try:
            found = pending_counts.requests(self.session_id)
        except Exception:  # noqa: BLE001 - no channel, or a broken one: "unknown"
            return None
        for request in found:
            if request.id not in self._announced:  # once per request (a held one: once it is asked)
                self._announced.add(request.id)
                self._new_requests.append(request)
        return len(found)

    def _events_replaced(self, fh: BinaryIO) -> bool:
        try:
            st = os.stat(self._events_path, follow_symlinks=False)
        except OSError:
            return os.fstat(fh.fileno()).st_nlink == 0  # removed, not yet made again
        mine = os.fstat(fh.fileno())
        return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino)

    def _read_events(self, tr: Tracker) -> None:
        import json

        fh = self._events_fh
        if fh is None:
            try:
                fd = os.open(self._events_path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                return
            fh = self._events_fh = os.fdopen(fd, "rb")
        data = fh.read(1 << 20)
        if not data:
            if self._events_replaced(fh):
                # The session dir was removed and made again (plan/keeper.py): read the new file.
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
            tr.guard(min(mono, max(t, mono - 86400.0)), ev)  # type: ignore[arg-type]  # the gate's GuardEvent (events.py); kind_of reads an unknown kind as "other"

    def _read_transcripts(self, tr: Tracker) -> None:
        """Ends of hook-tracked calls, from the CLI's transcripts (a -p session has no PostToolUse
        hook: watchdog/transcript.py). Read only while such a call is in flight."""
        paths = tr.transcripts_to_read()
        if not paths:
            return
        if self._transcripts is None:
            from claudeguard.watchdog.transcript import TranscriptEnds

            self._transcripts = TranscriptEnds()
        self._transcripts.read(paths)
        from claudeguard.gate.session import forget_call_in

        mono, wall = self.clock(), time.time()
        seen = self._transcripts.ended
        ended = {k: mono - max(0.0, wall - seen[k]) for k in tr.work.calls if k in seen}
        tr.calls_ended(ended)
        for call_id in ended:
            # What the PostToolUse hook did: a long -p run would otherwise keep a note a call.
            forget_call_in(str(self.session_dir), call_id)


class Monitor:
    """One session's watchdog: ``Inputs`` gathered at each sample, a ``Tracker`` that judges
    them, a ``StatusWriter`` and a ``StallHandler``; sampling in a thread of its own or on a
    ``Schedule``."""

    def __init__(self, *, child_pid: int, session_id: str, session_dir: str | Path, config: WatchConfig,
                 output_format: str | None, prompt: str | None, cwd: str, argv: list[str],
                 on_stall: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.child_pid = child_pid
        self.session_id = session_id
        self.session_dir = Path(session_dir)
        self.config = config
        self.clock = clock
        interval = max(0.05, float(config.sample_interval))
        self.interval = interval
        self.tracker = Tracker(
            Limits(stall_after=float(config.stall_after), tool_stall_after=float(config.tool_stall_after),
                   interval=interval, interactive=bool(config.interactive), initial_prompt=bool(prompt)),
            start=clock(),
        )
        self.inputs = Inputs(child_pid=child_pid, session_id=session_id, session_dir=self.session_dir, clock=clock,
                             stream_json=output_format == "stream-json" and config.tap_stream,
                             reads_only=bool(config.writes_are_screen))
        self.status = StatusWriter(session_id=session_id, session_dir=self.session_dir, child_pid=child_pid,
                                   config=config, output_format=output_format, prompt=prompt, cwd=cwd, argv=argv,
                                   clock=clock)
        self.stall_handler = StallHandler(child_pid=child_pid, session_id=session_id, session_dir=self.session_dir,
                                          config=config, cwd=cwd, on_stall=on_stall, report_error=self._report_error)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._act_thread: threading.Thread | None = None  # acting on a stall found by a Schedule
        self._lock = threading.Lock()  # one tick at a time (the thread's, or stop()'s last one)
        self._errors_reported: set[str] = set()
        self.last_verdict: StallVerdict | None = None
        self.log_dir: str | None = None  # the session's log dir, when not this process's own
        self.after_sample: Callable[[], None] | None = None  # called after each sample, in the sampling thread

    # -- what the others read and set -------------------------------------------------------
    @property
    def extra_status(self) -> dict[str, Any]:
        """More fields for status.json (a background session's short id, who watches)."""
        return self.status.extra

    @extra_status.setter
    def extra_status(self, extra: dict[str, Any]) -> None:
        self.status.extra = extra

    @property
    def stalls(self) -> list[dict[str, Any]]:
        """One record per stall episode, for the end-of-run report."""
        return self.stall_handler.stalls

    @property
    def diagnosis(self) -> str | None:
        return self.stall_handler.diagnosis

    @property
    def sampler(self) -> TreeSampler:
        """The process tree's sampler."""
        return self.inputs.sampler

    @property
    def stalled(self) -> bool:
        return self.tracker.progress.in_stall

    @property
    def killed(self) -> bool:
        """The watchdog killed the tree of a stalled child: claudeguard exits 124."""
        return self.stall_handler.killed

    # -- the supervisor's side -------------------------------------------------------------
    def start(self, schedule: Schedule | None = None) -> None:
        """Sample in a thread of its own, or with ``schedule`` in that one thread shared with
        other monitors (the service's)."""
        self._write(self.tracker.verdict(self.clock()), force=True)
        if self.inputs.tap is not None:
            self.inputs.tap.start()
        if schedule is not None:
            schedule.add(self)
            return
        self._thread = threading.Thread(target=self._run, name="claudeguard-watchdog", daemon=True)
        self._thread.start()

    def feed_stdout(self, data: bytes) -> None:
        self.inputs.feed_stdout(data)

    def output_seen(self, total_bytes: int, t: float) -> None:
        """The relay's running output byte count and the time of its last write, counted elsewhere
        (the launcher's activity feed, ``shim/activity.py``)."""
        self.inputs.output_seen(total_bytes, t)

    def feed_stream(self, m: StreamMsg, collapsed: int = 0) -> None:
        """One stream-json summary from a tap outside the monitor; ``collapsed``: summaries of
        partial messages left out before it (they count as messages, nothing more)."""
        self.inputs.feed_stream(m, collapsed)

    def note_activity(self, what: str, t: float | None = None) -> None:
        """From a pty relay: "input" (keystrokes), "output" (screen output: a sign of life, not
        progress), "at-prompt" (the input box waits for its user), "busy" (a turn runs)."""
        self.inputs.note("activity", self.clock() if t is None else t, what)

    def set_screen_hint(self, hint: str | None, t: float | None = None) -> None:
        self.inputs.note("screen", self.clock() if t is None else t, hint)

    def set_screen_tail(self, lines: list[str] | None) -> None:
        """The last lines of a pty screen, shown by ``ps --screen``."""
        self.status.screen_tail = list(lines)[-20:] if lines else None

    def stop(self, exit_code: int | None, final: bool = True) -> None:
        """Stop sampling, write the final ``exited`` status (``ps`` no longer lists it); with
        ``final`` False the session goes on, watched by another monitor: no last status."""
        self._stop.set()
        with self._lock:  # a scheduled tick that found a new stall has started its act by now
            thread = self._thread or self._act_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.interval + float(self.config.kill_grace) + 5.0)
        if self.inputs.tap is not None:
            self.inputs.tap.stop()
        with self._lock:
            if not final:
                self._stop_files()
                return
            now = self.clock()
            self.inputs.drain(self.tracker)
            self.tracker.exited(now, exit_code)
            verdict = self.tracker.verdict(now)
            self._write(verdict, force=True)
            self._stop_files()

    def _stop_files(self) -> None:
        self.inputs.close()
        self.stall_handler.reap()

    def carry_stall(self, in_stall: bool, stall_count: int, since: float | None) -> None:
        """Take over from another monitor of the same session (the resident service's, or the
        launcher's): a stall it reported goes on as the same episode (no second report), its
        quiet clock running from the last progress before it. Out of a stall the clock starts
        now: ``since`` may be older than progress the other monitor saw and did not tell."""
        clock = self.tracker.progress
        clock.stall_count = max(clock.stall_count, int(stall_count))
        if in_stall:
            if since is not None and since < clock.last:
                clock.last = clock.hold = since
            clock.in_stall = True

    def stall_state(self) -> StallState:
        """What ``carry_stall`` of the next monitor needs."""
        tr = self.tracker
        return {"in_stall": tr.progress.in_stall, "stall_count": tr.progress.stall_count, "since": tr.progress.last}

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
        verdict = self.inputs.sample(self.tracker)
        self.last_verdict = verdict
        self._write(verdict)
        self.stall_handler.reap()
        if self.after_sample is not None:
            self.after_sample()
        return verdict

    def _act(self, v: StallVerdict) -> None:
        """A new stall episode (overridden by the service's monitor, whose launcher acts)."""
        self.stall_handler.act(v)

    def _write(self, v: StallVerdict, force: bool = False) -> None:
        try:
            self.status.write(v, self.tracker, diagnosis=self.stall_handler.diagnosis,
                              skipped=self.inputs.skipped_bytes, force=force)
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


class Schedule:
    """One thread that samples many monitors (the service's: one wake-up a second for every
    session instead of one thread and one wake-up per session).

    Monitors with the same interval sample on a common grid (multiples of the interval on the
    monotonic clock), so they are due together and run back to back. A verdict's action (the
    notify command, a message to the launcher, a kill that waits out its grace period) runs in a
    thread of its own, and that monitor is not sampled until it is done, as with its own thread:
    one session's stall never delays another's sample. The thread waits without a timeout while
    nothing is scheduled."""

    def __init__(self, name: str = "claudeguard-watchdog") -> None:
        self.name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Monitor]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None

    def add(self, monitor: Monitor, due: float | None = None) -> None:
        """Sample ``monitor`` at ``due`` (``time.monotonic()``; now when None), then on the grid."""
        import heapq

        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() if due is None else due, self._seq, monitor))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap)

    @staticmethod
    def next_due(interval: float, after: float) -> float:
        """The first grid point past ``after``."""
        return (math.floor(after / interval) + 1) * interval

    def _run(self) -> None:
        import heapq

        from claudeguard.channel.audit import session_log

        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                due, _, monitor = self._heap[0]
                delay = due - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
            if monitor._stop.is_set():
                continue
            session_log.set(monitor.log_dir)
            try:
                acting = self._tick(monitor)
            except Exception as exc:  # noqa: BLE001 - never take the other sessions' watch down
                monitor._report_error(exc)
                acting = False
            finally:
                session_log.set(None)
            if not acting and not monitor._stop.is_set():
                # Half an interval at least after this sample (the first one is off the grid);
                # one that fell behind (a suspended machine) does not catch up in a burst.
                self.add(monitor, self.next_due(monitor.interval, max(due + monitor.interval / 2, time.monotonic())))

    def _tick(self, monitor: Monitor) -> bool:
        """One sample; True when it found a new stall, whose action now runs in its own thread."""
        with monitor._lock:
            if monitor._stop.is_set():
                return False
            try:
                verdict = monitor._tick()
            except Exception as exc:  # noqa: BLE001 - reported once; sampling goes on
                monitor._report_error(exc)
                return False
            if verdict is None or not verdict.new_stall:
                return False
            # Started under the lock: stop() takes it before it looks for an action to wait for.
            monitor._act_thread = threading.Thread(target=self._act, args=(monitor, verdict),
                                                   name=f"{self.name}-act", daemon=True)
            monitor._act_thread.start()
            return True

    def _act(self, monitor: Monitor, verdict: StallVerdict) -> None:
        from claudeguard.channel.audit import session_log

        session_log.set(monitor.log_dir)
        try:
            monitor._act(verdict)
        except Exception as exc:  # noqa: BLE001 - reported once; the schedule samples on
            monitor._report_error(exc)
        if not monitor._stop.is_set():
            self.add(monitor, self.next_due(monitor.interval, time.monotonic()))
