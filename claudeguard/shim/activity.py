"""The launcher's side of the watchdog: what the relay and the supervisor tell it, and who judges.

``Feed`` takes the calls the relay made to a ``Monitor`` before (``feed_stdout``,
``note_activity``, ``set_screen_hint``, ``set_screen_tail``) and owns the stream tap. Who samples
and judges is chosen at start and changes with the service:

- registered with the resident service: the service runs the monitor (``service/watch.py``);
  the feed sends it compact summaries over the registration's connection, at most one line per
  sample interval, from a thread of its own (the relay thread only counts and appends), and
  carries out the service's verdicts on the child it owns: the stderr line, the notify command,
  SIGINT, or the tree's kill (exit 124);
- no service (``CLAUDEGUARD_SERVICE=0``, none to be had, the watch refused) or the connection
  broke: a local ``Monitor`` in this process, as before the service, until a service takes the
  session again (the link re-registers it), then the local monitor stops before the service's
  starts. One monitor acts at a time; a stall reported by one is carried to the next as the
  same episode (no second line, no second kill).

Nothing here imports the sampler or psutil unless a local monitor is needed (or a kill).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.service.protocol import Activity, Carry, Received, WatchSettings

    from claudeguard.config.load import Config
    from claudeguard.service.client import Registration
    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.watchdog.monitor import Monitor
    from claudeguard.watchdog.signals import StreamMsg

END_WAIT_S = 2.0  # how long the launcher waits for the service's final status at exit
ANSWER_WAIT_S = 5.0  # a service that has not answered ``watch`` by then: the launcher watches


SUMMARY_CHARS = 200  # of a call's summary in the waiting line (the full input: claudeguardctl pending --json)


def waiting_line(request_id: str, summary: str, agent_type: str | None, agent_id: str | None, deadline_s: float,
                 desk_port: int | None) -> str:
    """The one stderr line of a request that waits for a human (issue 36): what waits, which
    agent, how long at most, and how to answer it. The desk is named by its port, never by its
    page's address: that path keeps the desk's cookie from other servers on 127.0.0.1, and
    stderr may end up in a file the agent can read."""
    text = " ".join(summary.split())
    if len(text) > SUMMARY_CHARS:
        text = text[:SUMMARY_CHARS - 1] + "…"
    agent = "main agent" if not agent_type else f"subagent {agent_type}" + (f" {agent_id[:8]}" if agent_id else "")
    desk = (f"; or on the approval desk (127.0.0.1:{desk_port}; claudeguardctl desk --open)"
            if desk_port else "")
    return (f"claudeguard: waiting for approval ({agent}, up to {deadline_s:.0f} s): {text}; answer: "
            f"claudeguardctl approve {request_id} (or deny {request_id}){desk}\n")


def compact(msgs: list[Any]) -> list[dict[str, Any]]:
    """Stream summaries as JSON objects without their empty fields; a run of partial-message
    summaries without usage (one per token) is sent as its last one, with the count left out."""
    out: list[dict[str, Any]] = []
    collapsed = 0
    for i, m in enumerate(msgs):
        if m.kind == "partial" and m.tokens is None and i + 1 < len(msgs) and msgs[i + 1].kind == "partial":
            collapsed += 1
            continue
        d = {k: v for k, v in vars(m).items() if v not in (None, [], False) or k in ("time", "kind")}
        if collapsed:
            d["collapsed"], collapsed = collapsed, 0
        out.append(d)
    return out


class FeedSession:
    """The session a feed watches, as its monitor (the service's or the launcher's own) is told it."""

    __slots__ = ("child_pid", "session_id", "session_dir", "config", "output_format", "prompt", "cwd", "argv",
                 "interval")

    def __init__(self, *, child_pid: int, session_id: str, session_dir: str, cfg: Config, args: ClaudeArgs, cwd: str,
                 argv: list[str]) -> None:
        self.child_pid = child_pid
        self.session_id = session_id
        self.session_dir = session_dir
        watchdog = cfg.watchdog()
        self.config: WatchSettings = {
            "stall_after": watchdog["stall_after"], "tool_stall_after": watchdog["tool_stall_after"],
            "on_stall": watchdog["on_stall"], "sample_interval": watchdog["sample_interval"],
            "kill_grace": watchdog["kill_grace"], "interactive": not args.print_mode}
        self.output_format = args.last("--output-format")
        self.prompt = args.prompt
        self.cwd = cwd
        self.argv = list(argv)
        self.interval = max(0.05, self.config["sample_interval"])


class Outbox:
    """What the relay and tap threads write and the flush thread takes (under the feed's lock):
    output counts, stream summaries, activity notes, the screen's tail."""

    __slots__ = ("out_bytes", "out_last", "sent_bytes", "msgs", "calls", "tail", "tail_sent")

    def __init__(self) -> None:
        self.out_bytes = 0
        self.out_last = 0.0
        self.sent_bytes = 0
        self.msgs: collections.deque[StreamMsg] = collections.deque()
        self.calls: collections.deque[tuple[str, float, object]] = collections.deque()
        self.tail: list[str] | None = None
        self.tail_sent: list[str] | None = None


class Feed:
    """The launcher's side of a session's watchdog: what the relay sees goes to the service's
    monitor (or to a monitor of its own when there is no service); the verdicts come back."""

    def __init__(self, *, child_pid: int, session_id: str, session_dir: str, cfg: Config, args: ClaudeArgs, cwd: str,
                 argv: list[str], registration: Registration | None = None, say_waiting: bool = False) -> None:
        self.s = FeedSession(child_pid=child_pid, session_id=session_id, session_dir=session_dir, cfg=cfg, args=args,
                             cwd=cwd, argv=argv)
        self.out = Outbox()
        # Say each request that waits for a human in one stderr line: a session on pipes (a
        # pty session's screen is the CLI's, and its status line says what waits).
        self.say_waiting = say_waiting
        self._said: set[str] = set()  # request ids said (a new service's monitor tells them again)
        self.registration = registration
        self.lock = threading.RLock()
        self.mode = "off"  # local | pending (watch asked) | service | ended
        self.monitor: Monitor | None = None  # the local one, in mode "local"
        self.carry: Carry = {"in_stall": False, "stall_count": 0, "since": None}  # the last stall state heard
        self.stalls: list[dict[str, Any]] = []  # for the end-of-run report, from every monitor in turn
        self.killed = False
        self._ended = threading.Event()
        self._notifiers: list[int] = []
        self._killer: threading.Thread | None = None
        self._asked = 0.0
        self._stop = threading.Event()
        self.tap = None
        if self.s.output_format == "stream-json":
            from claudeguard.watchdog.stream import StreamTap

            self.tap = StreamTap(self._stream)

    @property
    def output_format(self) -> str | None:
        return self.s.output_format

    # -- start and stop --------------------------------------------------------------------
    def start(self) -> "Feed":
        if self.tap is not None:
            self.tap.start()
        reg = self.registration
        if reg is not None:
            reg.listener = self
            with self.lock:
                self._ask_service()
            from claudeguard.procs import start_thread

            start_thread(self._flush_loop, "claudeguard-activity")  # no thread of ours takes the supervisor's signals
        else:
            with self.lock:
                self._go_local()
        return self

    def stop(self, exit_code: int | None) -> None:
        """The child exited: the final status, with its exit code, by whichever monitor runs."""
        self._stop.set()
        if self.tap is not None:
            self.tap.stop()
        told = False
        with self.lock:
            mode, self.mode = self.mode, "ended"
            if mode == "local":
                self._stop_local(exit_code, final=True)
            elif mode in ("service", "pending") and self.registration is not None:
                self._flush()
                told = self.registration.send({"op": "watch-end", "session_id": self.s.session_id, "code": exit_code})
        if told:
            self._ended.wait(END_WAIT_S)  # the service's last status is written before the dir goes
        if self._killer is not None:  # the tree's stragglers get their SIGKILL before we exit
            self._killer.join(self.s.config["kill_grace"] + 5.0)
        self._reap()

    # -- the relay's side: counts and appends only -----------------------------------------
    def feed_stdout(self, data: bytes) -> None:
        t = time.monotonic()
        self.out.out_bytes += len(data)
        self.out.out_last = t
        mon = self.monitor
        if mon is not None:
            mon.output_seen(self.out.out_bytes, t)
        if self.tap is not None:
            self.tap.feed(data, t)

    def _stream(self, m: StreamMsg) -> None:
        mon = self.monitor
        if mon is not None:
            mon.feed_stream(m)
        else:
            self.out.msgs.append(m)

    def note_activity(self, what: str) -> None:
        self._call("activity", what)

    def set_screen_hint(self, hint: str | None) -> None:
        self._call("screen", hint)

    def _call(self, kind: str, value: object) -> None:
        t = time.monotonic()
        mon = self.monitor
        if mon is not None:
            _replay(mon, kind, t, value)
        else:
            self.out.calls.append((kind, t, value))

    def set_screen_tail(self, lines: list[str] | None) -> None:
        self.out.tail = list(lines)[-20:] if lines else None
        mon = self.monitor
        if mon is not None:
            mon.set_screen_tail(lines)

    # -- the service ---------------------------------------------------------------------
    def _ask_service(self) -> None:
        """Ask the service to watch (under the lock, with no local monitor running)."""
        from claudeguard.procs import process_start

        self.mode, self._asked = "pending", time.monotonic()
        reg = self.registration
        if reg is None:  # nothing to ask: watch here
            self._go_local()
            return
        s = self.s
        ok = reg.send({
            "op": "watch", "session_id": s.session_id, "pid": os.getpid(), "child_pid": s.child_pid,
            "child_start": process_start(s.child_pid), "config": s.config, "output_format": s.output_format,
            "prompt": s.prompt, "cwd": s.cwd, "argv": s.argv, "carry": self.carry})
        if not ok:
            self._go_local()

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.s.interval):
            with self.lock:
                if self.mode == "service":
                    self._flush()
                elif self.mode == "pending" and time.monotonic() - self._asked > ANSWER_WAIT_S:
                    self._go_local()  # fail closed: never a session nobody watches
                self._reap()

    def _flush(self) -> None:
        """One ``activity`` line with what happened since the last one; nothing when nothing did."""
        msg: Activity = {"op": "activity", "session_id": self.s.session_id}
        if self.out.out_bytes != self.out.sent_bytes:
            self.out.sent_bytes = self.out.out_bytes
            msg["out"] = [self.out.sent_bytes, self.out.out_last]
        msgs = []
        while self.out.msgs:
            msgs.append(self.out.msgs.popleft())
        if msgs:
            msg["msgs"] = compact(msgs)
        calls: list[list[object]] = []
        while self.out.calls:
            kind, t, value = self.out.calls.popleft()
            if (calls and kind == "activity" and value == "output" and calls[-1][0] == "activity"
                    and calls[-1][2] == "output"):
                calls[-1] = [kind, t, value]  # screen output: only the latest sign of life counts
            else:
                calls.append([kind, t, value])
        if calls:
            msg["calls"] = calls
        if self.out.tail != self.out.tail_sent:
            self.out.tail_sent = self.out.tail
            msg["tail"] = self.out.tail
        if len(msg) > 2 and self.registration is not None:
            self.registration.send(msg)  # lost with a broken connection: the local monitor starts anew

    # the link thread's calls (service.client.Registration.listener)
    def message(self, msg: Received) -> None:
        event = msg.get("event")
        with self.lock:
            if event == "watching":
                if self.mode != "pending":
                    if msg.get("ok") and self.registration is not None:  # too late: this process watches
                        self.registration.send({"op": "watch-end", "session_id": self.s.session_id, "final": False})
                else:
                    if msg.get("ok"):
                        self.mode = "service"
                    else:
                        if os.environ.get("CLAUDEGUARD_DEBUG"):
                            print(f"claudeguard: the guard service does not watch this session ({msg.get('error')})",
                                  file=sys.stderr, flush=True)
                        self._go_local()
            elif event == "watch-ended":
                self._ended.set()
            elif event == "waiting":
                deadline, desk = msg.get("deadline_s"), msg.get("desk_port")
                self._waiting(str(msg.get("id") or ""), str(msg.get("summary") or msg.get("tool") or "?"),
                              _text(msg.get("agent_type")), _text(msg.get("agent_id")),
                              float(deadline) if isinstance(deadline, (int, float)) else 0.0,
                              desk if isinstance(desk, int) else None)
            elif event in ("stall", "calm") and self.mode in ("service", "pending"):  # its monitor may speak first
                carry = msg.get("carry")
                if isinstance(carry, dict):  # as the service's monitor said it (stall_state)
                    since = carry.get("since")
                    self.carry = {"in_stall": bool(carry.get("in_stall")),
                                  "stall_count": int(carry.get("stall_count") or 0),
                                  "since": since if isinstance(since, (int, float)) else None}
                if event == "stall":
                    self._act(msg)

    def lost(self) -> None:
        self._ended.set()  # no final status will come from that service
        with self.lock:
            if self.mode in ("pending", "service"):
                self._go_local()

    def registered(self) -> None:
        with self.lock:
            if self.mode != "local" or self.killed:
                return
            self._stop_local(None, final=False)
            self._ask_service()

    def _waiting(self, request_id: str, summary: str, agent_type: str | None, agent_id: str | None,
                 deadline_s: float, desk_port: int | None) -> None:
        """One line per request, said once whichever monitor saw it first."""
        if not self.say_waiting or not request_id or request_id in self._said:
            return
        self._said.add(request_id)
        try:
            sys.stderr.write(waiting_line(request_id, summary, agent_type, agent_id, deadline_s, desk_port))
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a closed stderr must not stop the watchdog
            pass

    # -- acting on the service's verdict ---------------------------------------------------
    def _act(self, msg: Received) -> None:
        from claudeguard.watchdog.signals import stall_line

        diagnosis, action = str(msg.get("diagnosis") or "stalled"), str(msg.get("action") or "warn")
        try:
            sys.stderr.write(stall_line(diagnosis, action))
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a closed stderr must not stop the action
            pass
        stall = msg.get("stall")
        if isinstance(stall, dict):
            self.stalls.append(stall)
        notify = msg.get("notify")
        if isinstance(notify, list) and notify:
            from claudeguard.procs import spawn_detached

            try:
                self._notifiers.append(spawn_detached([str(a) for a in notify]))
            except OSError as exc:
                print(f"claudeguard: watchdog: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if action == "interrupt":
            try:
                os.kill(self.s.child_pid, 2)  # SIGINT to the CLI alone, as a user pressing Ctrl-C
            except (ProcessLookupError, PermissionError):
                pass
        elif action == "kill":
            self.killed = True
            from claudeguard.watchdog.sampler import kill_tree

            grace = self.s.config["kill_grace"]
            self._killer = threading.Thread(target=kill_tree, args=(self.s.child_pid, grace),
                                            name="claudeguard-kill", daemon=True)
            self._killer.start()

    def _reap(self) -> None:
        if self._notifiers:  # only after a stall: the monitor's module is loaded by then
            from claudeguard.watchdog.acts import reap

            self._notifiers = reap(self._notifiers)

    # -- the local monitor -----------------------------------------------------------------
    def _go_local(self) -> None:
        """Watch from this process (under the lock)."""
        self.mode = "local"
        try:
            from claudeguard.watchdog.monitor import Monitor
            from claudeguard.watchdog.signals import WatchConfig
        except ImportError:
            return
        from pathlib import Path

        mon = Monitor(child_pid=self.s.child_pid, session_id=self.s.session_id, session_dir=Path(self.s.session_dir),
                      config=WatchConfig(**self.s.config, tap_stream=False), output_format=self.s.output_format,
                      prompt=self.s.prompt, cwd=self.s.cwd,
                      argv=self.s.argv, on_stall=lambda diagnosis: None)
        mon.extra_status = {"watcher": "launcher"}
        if self.say_waiting:
            mon.inputs.on_waiting = lambda r: self._waiting(r.id, r.summary, r.agent_type, r.agent_id, r.deadline_s,
                                                            None)
        carry = self.carry
        mon.carry_stall(bool(carry.get("in_stall")), int(carry.get("stall_count") or 0), carry.get("since"))
        self.monitor = mon  # the relay's calls go to it from now on
        # What the service has not been sent yet goes to the local monitor.
        if self.out.out_bytes:
            mon.output_seen(self.out.out_bytes, self.out.out_last)
        while self.out.msgs:
            mon.feed_stream(self.out.msgs.popleft())
        while self.out.calls:
            kind, t, value = self.out.calls.popleft()
            _replay(mon, kind, t, value)
        if self.out.tail:
            mon.set_screen_tail(self.out.tail)
        mon.start()

    def _stop_local(self, exit_code: int | None, *, final: bool) -> None:
        mon, self.monitor = self.monitor, None
        if mon is None:
            return
        mon.stop(exit_code, final=final)
        self.stalls.extend(mon.stalls)
        self.killed = self.killed or mon.killed
        self.carry = mon.stall_state()


def _text(x: object) -> str | None:
    return x if isinstance(x, str) and x else None


def _replay(mon: Monitor, kind: str, t: float, value: object) -> None:
    """One relay call (``note_activity``/``set_screen_hint``), handed to a local monitor."""
    if kind == "activity":
        mon.note_activity(str(value), t)
    else:
        mon.set_screen_hint(value if isinstance(value, str) else None, t)
