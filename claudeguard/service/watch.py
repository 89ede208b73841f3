"""The watchdog of foreground sessions, run in the service: one ``watchdog.monitor.Monitor`` per
session whose launcher asked for it (``watch``), fed with what only the launcher sees.

The service samples the child's process tree itself and reads the hook events it answered
(``events.jsonl``) and the channel's pending requests, like the monitor of a ``--bg`` session.
The launcher keeps the stream tap and the pty screen: it sends their summaries in ``activity``
lines, at most one per sample interval (``shim/activity.py``). The child belongs to the
launcher, so a verdict goes back to it as a ``stall`` event: the launcher prints the line, runs
the notify command (in the user's environment) and interrupts or kills; the service writes the
audit row. A stall event that cannot be sent is not a stall here: the launcher's own monitor
takes over when the connection breaks, and reports it then (one report per stall either way).

Control messages on the registering connection (one JSON line each, see ``service.server``):

- ``{"op": "watch", "session_id", "pid", "child_pid", "child_start", "config", "output_format",
  "prompt", "cwd", "argv", "carry"}`` → ``{"event": "watching", "ok", "error"?}``
- ``{"op": "activity", "session_id", "out": [bytes, t]?, "msgs": [...]?, "calls": [...]?,
  "tail": [...]?}`` (no answer; times are ``time.monotonic()``, one clock for the machine)
- ``{"op": "watch-end", "session_id", "code", "final"?}`` → ``{"event": "watch-ended"}``: the
  child exited (the last status, with its code), or with ``"final": false`` the launcher
  watches itself after all (a ``watching`` that came after it gave up waiting)
- from the service: ``{"event": "stall", "diagnosis", "action", "stall", "notify", "carry"}``
  and ``{"event": "calm", "carry"}`` when the stall episode ends; ``{"event": "waiting", "id",
  "tool", "summary", "agent_type", "agent_id", "deadline_s", "desk_port"}`` once for each request
  of the session that waits in the channel (a held one once it is released to it).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

from claudeguard.procs import process_start
from claudeguard.service import files
from claudeguard.service.files import bound_sends
from claudeguard.watchdog.monitor import Monitor, Schedule
from claudeguard.watchdog.signals import WatchConfig
from claudeguard.watchdog.signals import StallVerdict, StreamMsg

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from claudeguard.channel.model import Request
    from claudeguard.service.protocol import Received, Watching
    from claudeguard.service.protocol import Waiting as WaitingEvent
    from claudeguard.service.protocol import Stall as StallEvent
    from claudeguard.service.registry import Registered

# Every session's monitor in the service (foreground and --bg) samples in this one thread.
SCHEDULE = Schedule("claudeguard-watchdog")


class Link:
    """A control connection that two threads write to: the control loop's answers and the
    monitor's events."""

    def __init__(self, conn: socket.socket, peer_pid: int | None = None) -> None:
        self.conn = conn
        self.peer_pid = peer_pid  # the process at the other end (SO_PEERCRED, read once); None: unknown
        self.lock = threading.Lock()
        bound_sends(conn)  # a launcher that stops reading must not hold the one sampling thread

    def send(self, msg: Mapping[str, object], fds: list[int] | None = None) -> bool:
        """Send one line (with ``fds``, SCM_RIGHTS, on its first byte); False when it could not be.
        A failed (possibly half-sent) line ends the connection: the launcher then sees it end and
        watches on its own, as after a crash."""
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        try:
            with self.lock:
                if fds:
                    sent = socket.send_fds(self.conn, [data], fds)
                    data = data[sent:]
                self.conn.sendall(data)
        except OSError:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return False
        return True


class ServiceMonitor(Monitor):
    """A foreground session's monitor in the service: verdicts go to the launcher."""

    link: Link

    def _tick(self) -> StallVerdict | None:
        was = self.tracker.progress.in_stall
        verdict = super()._tick()
        if was and not self.tracker.progress.in_stall:
            self.link.send({"event": "calm", "session_id": self.session_id, "carry": self.stall_state()})
        return verdict

    def _act(self, v: StallVerdict) -> None:
        handler = self.stall_handler
        diagnosis, action, stall = handler.stall(v)
        event: StallEvent = {"event": "stall", "session_id": self.session_id, "diagnosis": diagnosis, "action": action,
                             "stall": stall, "notify": handler.notify_args(diagnosis, v), "carry": self.stall_state()}
        if not self.link.send(event):
            return  # the launcher's monitor takes over with the connection's end, and reports it
        handler.stalls.append(stall)
        handler.audit(diagnosis, v, action)
        print(f"claudeguard service: session {self.session_id}: {diagnosis} [{action}, by the service]",
              file=sys.stderr, flush=True)


def waiting(monitor: ServiceMonitor, request: Request) -> None:
    """A request of the session now waits in the channel: tell its launcher (one ``waiting``
    event per request; the launcher says it on stderr when the session runs on pipes). The
    desk's port comes from the service's own record: written when the desk starts."""
    record = files.read_record(files.service_dir())
    event: WaitingEvent = {"event": "waiting", "session_id": monitor.session_id, "id": request.id,
                           "tool": request.tool, "summary": request.summary, "agent_type": request.agent_type,
                           "agent_id": request.agent_id, "deadline_s": round(request.deadline_s, 1),
                           "desk_port": record.get("desk_port") if record is not None else None}
    monitor.link.send(event)


def start(reg: Registered, msg: Received, link: Link) -> Watching:
    """The ``watch`` op: a monitor for the registered session ``reg`` (``service.registry.Registered``)."""
    child = msg.get("child_pid")
    if not isinstance(child, int) or child <= 0 or process_start(child) != msg.get("child_start"):
        return {"event": "watching", "ok": False, "error": "no such child process"}
    config = msg.get("config")
    if not isinstance(config, dict):
        config = {}
    known = {k: v for k, v in config.items()
             if k in WatchConfig.__dataclass_fields__ and k not in ("notify", "writes_are_screen", "tap_stream")}
    session = reg.session
    if session.dir is None:
        return {"event": "watching", "ok": False, "error": "the session has no directory"}
    argv = msg.get("argv")
    try:
        monitor = ServiceMonitor(child_pid=child, session_id=session.id,
                                 session_dir=session.dir, config=WatchConfig(**known, tap_stream=False),
                                 output_format=_text(msg.get("output_format")),
                                 prompt=_text(msg.get("prompt")), cwd=str(msg.get("cwd") or "/"),
                                 argv=[str(a) for a in argv] if isinstance(argv, list) else [], on_stall=lambda d: None)
    except Exception as exc:  # noqa: BLE001 - one line back; the launcher watches itself
        return {"event": "watching", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    monitor.link = link
    monitor.inputs.on_waiting = lambda request: waiting(monitor, request)
    pid = msg.get("pid")
    # The status file says the launcher's pid (``ps`` tells a dead launcher by it) and who samples.
    monitor.extra_status = {"pid": pid, "pid_start": process_start(pid) if isinstance(pid, int) else None,
                            "watcher": "service", "watcher_pid": os.getpid()}
    monitor.log_dir = session.snapshot.get("log_dir")
    carry = msg.get("carry")
    if isinstance(carry, dict):
        monitor.carry_stall(bool(carry.get("in_stall")), int(carry.get("stall_count") or 0), _num(carry.get("since")))
    old, reg.watch = reg.watch, monitor
    if old is not None:
        old.stop(None, final=False)
    monitor.start(SCHEDULE)
    return {"event": "watching", "ok": True, "pid": os.getpid()}


def activity(monitor: Monitor, msg: Received) -> None:
    """The ``activity`` op: what the launcher's relay saw since its last one."""
    out = msg.get("out")
    if isinstance(out, list) and len(out) == 2:
        monitor.output_seen(int(out[0]), float(out[1]))
    msgs = msg.get("msgs")
    for item in msgs if isinstance(msgs, list) else ():
        if isinstance(item, dict):
            collapsed = int(item.pop("collapsed", 0) or 0)
            monitor.feed_stream(stream_msg(item), collapsed)
    calls = msg.get("calls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, list) and len(call) == 3:
            kind, t, value = call
            if kind == "activity":
                monitor.note_activity(str(value), float(t))
            elif kind == "screen":
                monitor.set_screen_hint(value if isinstance(value, str) else None, float(t))
    if "tail" in msg:
        tail = msg.get("tail")
        monitor.set_screen_tail([str(x) for x in tail] if isinstance(tail, list) else None)


def stream_msg(d: dict[str, object]) -> StreamMsg:
    """A ``StreamMsg`` back from its JSON form (``shim.activity.compact``)."""
    # As the launcher's compact() sent them: field by field, unchecked, as before this was typed.
    fields: dict[str, Any] = {k: v for k, v in d.items() if k in StreamMsg.__dataclass_fields__}
    if isinstance(fields.get("tokens"), list):
        fields["tokens"] = tuple(fields["tokens"])
    if isinstance(fields.get("tool_uses"), list):
        fields["tool_uses"] = [tuple(x) for x in fields["tool_uses"]]
    return StreamMsg(**fields)


def end(reg: Registered, code: object) -> None:
    """``watch-end`` (the child exited: the final status, with its code) or the connection's
    end (``code`` is ``...``: the launcher is gone or another service took over; no last status)."""
    monitor, reg.watch = reg.watch, None
    if monitor is not None:
        if code is ...:
            monitor.stop(None, final=False)
        else:
            monitor.stop(code if isinstance(code, int) else None)


def stop(reg: Registered, why: str) -> int | None:
    """Have the launcher of ``reg`` stop its CLI as on a ``kill`` verdict (the desk's Stop on a
    stalled session): it kills the CLI's tree and exits 124, saying ``why``. The CLI's pid, or
    None when the service does not watch the session (or its launcher cannot be told)."""
    monitor = reg.watch
    if not isinstance(monitor, ServiceMonitor):
        return None
    from claudeguard.channel.audit import now_iso  # noqa: PLC0415 - a stop from the desk only

    event: StallEvent = {"event": "stall", "session_id": monitor.session_id, "diagnosis": why, "action": "kill",
                         "stall": {"time": now_iso(), "state": "stalled", "diagnosis": why, "action": "kill"},
                         "notify": None, "carry": monitor.stall_state()}
    return monitor.child_pid if monitor.link.send(event) else None


def _text(x: object) -> str | None:
    return x if isinstance(x, str) else None


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) else None
