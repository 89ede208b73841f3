"""The watchdog's state machine, pure: samples and events in; a state, its evidence and a stall
verdict out.

No clock and no I/O here: every input carries its own time (monotonic seconds), so tests replay
recorded or synthetic runs instantly. ``Tracker`` takes

- ``Sample``: the child's process tree with cumulative CPU, io and what a process is blocked
  reading (``sampler`` builds these);
- ``StreamMsg``: summaries of stream-json lines (``stream`` builds these) and raw output counts;
- guard events (the hook's ``events.jsonl`` records), the number of pending approval requests,
  activity and screen hints from a pty relay, and the child's exit;

and ``sample()`` answers with a ``StallVerdict``.

A stall is no progress for longer than the threshold of the current state. Progress is output,
a stream message, a token count that moved, a guard event, a change of pending requests, or CPU
or io in the tree above a noise floor. The floors come from how an idle Claude CLI looks from
outside (0-50 ms CPU per 2 s with ~100 ms spikes, ~100 bytes of io drift per 2 s):

- the CLI itself must use more than 0.12 s + 0.04 s per second of interval (0.16 s per 1 s
  sample, 0.2 s per 2 s sample): above a spike, below any real work;
- any other process of the tree (a tool, an MCP server) more than 0.03 s + 0.02 s per second,
  since those idle at zero (a tool whose processes keep using CPU is progress), or all of them
  together more than the CLI's floor;
- io (read+written bytes of the tree) more than 256 B + 128 B per second: a flowing model stream
  or a tool reading a file moves far more, the CLI's timers far less.

CPU time alone cannot tell a hung process from a starved one: on a machine at load 8 on 2 cores a
busy loop gets about 0.2 s of CPU a second, at nice 10 a few hundredths, under any floor. So a
process whose main thread was runnable (on a CPU, or on a run queue waiting for one:
``/proc/PID/schedstat``) for longer than the CLI's CPU floor wants the CPU and is working,
whatever it got: that is progress too ("waiting for a CPU"), never a stall. A sleeping process is
runnable only for its wake-ups: the real CLI waiting on a silent stream was runnable 0.5-1.5 % of
each second at load 0 to 16, a node process with a 20 ms timer 1-6 % (bench/RESULTS.md, "The
watchdog under load").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from claudeguard.watchdog.signals import (
    AGENT_TOOLS, AWAITING, BLOCKED, EXITED, FINISHING, IDLE, ODD_STATES, STALLED, STARTING, STREAMING, THINKING,
    TOOL, Call, Limits, ProcInfo, Sample, StallVerdict, StreamMsg, Task,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.events import GuardEvent


def _ago(now: float, at: float | None) -> float | None:
    return None if at is None else round(now - at, 1)


def _secs(x: float) -> str:
    return f"{x:.0f} s"


@dataclass
class Progress:
    """The stall clock: the last progress and what it was, the hold (the clock does not run while
    a human is waited for or the session is idle), the tree's CPU then, the stall episodes."""

    last: float
    hold: float
    what: str = "start"
    cpu_total: float = 0.0
    cpu_at: float = 0.0  # cpu_total at the last progress
    in_stall: bool = False
    stall_count: int = 0


@dataclass
class TreeWatch:
    """What the samples of the process tree left: the last two, each process's CPU in the last
    window and when it was last busy, who has been blocked reading, who waited for a CPU."""

    last_dt: float
    prev: Sample | None = None
    last_sample: Sample | None = None
    io_progress_at: float | None = None
    proc_busy: dict[int, float] = field(default_factory=dict)  # pid -> last time above its floor
    deltas: dict[int, float] = field(default_factory=dict)
    readers: dict[tuple[int, float], int] = field(default_factory=dict)  # consecutive samples blocked reading
    starved_at: float | None = None  # the last sample in which a process waited for a CPU
    starved_what: str | None = None


@dataclass
class Flow:
    """The CLI's output and stream: bytes, messages, tokens (per message id, the largest of each
    count), whether a message is half streamed, its MCP servers, an SDK host's open question."""

    output_bytes: int = 0
    last_output: float | None = None
    last_stream: float | None = None
    last_screen: float | None = None
    partial_open: bool = False
    messages: int = 0
    tokens: int = 0
    tokens_by_msg: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    sdk_request: str | None = None


@dataclass
class InFlight:
    """The work under way: tool calls (from the stream and the hooks), background tasks, running
    subagents, the requests waiting in the channel."""

    calls: dict[str, Call] = field(default_factory=dict)
    transcript: str | None = None  # the main agent's transcript, from the hook's tool-start events
    tasks: dict[str, Task] = field(default_factory=dict)
    agents: dict[str, str] = field(default_factory=dict)  # running subagents: agent_id -> agent_type
    pending_n: int | None = None
    pending_ids: set[str] = field(default_factory=set)


@dataclass
class Shown:
    """What the CLI shows of itself: a screen hint or dialog, waiting for its user, a first sign
    of life, its result, its exit."""

    awaiting_user: bool = False
    screen_hint: str | None = None
    dialog_note: str | None = None
    sign_of_life: bool = False
    result_at: float | None = None
    exited_at: float | None = None
    exit_code: int | None = None


class Tracker:
    """The watchdog's state of one session: its parts below, each a reader can hold alone; the
    inputs (``output``, ``activity``, ``stream``, ``guard``, ``sample``, ...) change them, and
    ``verdict`` reads them."""

    def __init__(self, limits: Limits, start: float) -> None:
        self.limits = limits
        self.start = start
        self.progress = Progress(last=start, hold=start)
        self.tree = TreeWatch(last_dt=limits.interval)
        self.flow = Flow()
        self.work = InFlight()
        self.shown = Shown(awaiting_user=limits.interactive and not limits.initial_prompt)

    # -- progress --------------------------------------------------------------------------
    def _progress(self, t: float, what: str) -> None:
        if t >= self.progress.last:
            self.progress.last = t
            self.progress.what = what
            self.progress.cpu_at = self.progress.cpu_total

    def _life(self, t: float, what: str) -> None:
        self.shown.sign_of_life = True
        self._progress(t, what)

    # -- inputs ----------------------------------------------------------------------------
    def output(self, t: float, total_bytes: int) -> None:
        """The relay's running byte count and the time of its last write."""
        if total_bytes > self.flow.output_bytes:
            self.flow.output_bytes = total_bytes
            self.flow.last_output = t
            self.shown.dialog_note = None
            self._life(t, "output")

    def activity(self, t: float, what: str) -> None:
        """What a pty relay saw: ``input`` (keystrokes: progress), ``output`` (screen output:
        a sign of life only, since the CLI's spinner and timer keep redrawing while a model
        stream is silent; the stream itself shows in the io counters), ``at-prompt`` (the input
        box waits for its user: idle) and ``busy`` (a turn runs again)."""
        if what == "output":
            self.shown.sign_of_life = True
            self.flow.last_screen = t
            return
        if what == "at-prompt":
            if self.limits.interactive and not self.shown.awaiting_user:
                self.shown.awaiting_user = True
                self._life(t, "at the prompt")
            return
        if what == "busy":
            if self.shown.awaiting_user:
                self.shown.awaiting_user = False
                self._life(t, "turn started")
            return
        if what == "input":
            self.shown.dialog_note = None
        self._life(t, what)

    def screen(self, t: float, hint: str | None) -> None:
        if hint != self.shown.screen_hint:
            self.shown.screen_hint = hint
            self._life(t, "screen: " + (hint or "dialog closed"))

    def exited(self, t: float, code: int | None) -> None:
        """The child is gone (seen in a sample: code None; told by the supervisor: its code)."""
        if self.shown.exited_at is None:
            self.shown.exited_at = t
        if code is not None:
            self.shown.exit_code = code

    def pending(self, t: float, n: int | None) -> None:
        """Requests waiting in the channel; None: unknown (the count from events is used)."""
        if n != self.work.pending_n:
            if n is not None and (self.work.pending_n is not None or n > 0):
                self._progress(t, f"pending requests: {n}")
            self.work.pending_n = n

    @property
    def pending_count(self) -> int:
        return self.work.pending_n if self.work.pending_n is not None else len(self.work.pending_ids)

    def stream(self, m: StreamMsg) -> None:
        t = m.time
        self.flow.messages += 1
        self.flow.last_stream = t
        self.shown.dialog_note = None
        if m.kind != "control":
            self.flow.sdk_request = None
        self._life(t, f"stream: {m.kind}")
        if m.tokens is not None and m.message_id:
            # The CLI repeats a message's usage on every content block (and partial events give
            # it in pieces): keep the largest of each count per message id.
            old = self.flow.tokens_by_msg.get(m.message_id, (0, 0, 0, 0))
            got = m.tokens
            new = (max(old[0], got[0]), max(old[1], got[1]), max(old[2], got[2]), max(old[3], got[3]))
            self.flow.tokens_by_msg[m.message_id] = new
            self.flow.tokens += (new[0] + new[1]) - (old[0] + old[1])
        if m.kind == "partial":
            self.flow.partial_open = m.partial_event not in ("message_stop", None)
            return
        if m.kind == "assistant":
            self.flow.partial_open = False
            for call_id, name, detail in m.tool_uses:
                known = self.work.calls.get(call_id)
                if known is None:
                    self.work.calls[call_id] = Call(call_id, name, t, detail, agent=m.parent_tool_use_id)
                elif not known.detail:
                    known.detail = detail
        elif m.kind == "user":
            for call_id in m.tool_results:
                self.work.calls.pop(call_id, None)
        elif m.kind == "result":
            self.shown.result_at = t
            if m.tokens is not None:
                self.flow.tokens = max(self.flow.tokens, m.tokens[0] + m.tokens[1])
            # The turn is over: whatever the stream still shows in flight has ended.
            for call_id in [c.id for c in self.work.calls.values() if c.via == "stream"]:
                del self.work.calls[call_id]
            if self.limits.interactive:
                self.shown.awaiting_user = True
        elif m.kind == "task-start" and m.task_id:
            info = m.task or {}
            self.work.tasks[m.task_id] = Task(m.task_id, str(info.get("description") or ""), t,
                                         info.get("subagent_type"), info.get("tool_use_id"))
        elif m.kind == "task-end" and m.task_id:
            self.work.tasks.pop(m.task_id, None)
        elif m.kind == "tasks" and m.tasks is not None:
            fresh: dict[str, Task] = {}
            for info in m.tasks:
                tid = str(info.get("task_id") or "")
                if not tid:
                    continue
                old_task = self.work.tasks.get(tid)
                fresh[tid] = old_task or Task(tid, str(info.get("description") or ""), t,
                                              info.get("subagent_type"), info.get("tool_use_id"))
            self.work.tasks = fresh
        elif m.kind == "init" and m.mcp_servers is not None:
            self.flow.mcp_servers = m.mcp_servers
        elif m.kind == "control" and m.request == "can_use_tool":
            self.flow.sdk_request = m.request

    def guard(self, t: float, ev: GuardEvent) -> None:
        """One record of the hook's events.jsonl (its time already converted to ours)."""
        from claudeguard.events import kind_of

        kind = kind_of(ev)
        tool_use_id = ev.get("tool_use_id")
        agent_id = ev.get("agent_id")
        if kind == "notification":
            ntype = ev.get("notification_type")
            self._life(t, f"hook notification {ntype}")
            if ntype == "permission_prompt":
                self.shown.dialog_note = str(ev.get("message") or "a permission dialog is on screen")
            elif ntype == "idle_prompt" and self.limits.interactive:
                self.shown.awaiting_user = True
            return
        self.shown.dialog_note = None
        if kind == "approval-wait":
            self.work.pending_ids.add(str(ev.get("request_id")))
        elif kind == "approval-done":
            self.work.pending_ids.discard(str(ev.get("request_id")))
        self._life(t, f"hook {kind}" + (f" {ev.get('tool')}" if ev.get("tool") else ""))
        if kind == "tool-start" and tool_use_id:
            self.shown.awaiting_user = False
            if isinstance(ev.get("transcript"), str) and ev["transcript"]:
                self.work.transcript = ev["transcript"]
            call = self.work.calls.get(tool_use_id)
            agent = ev.get("agent_type") or (f"agent {agent_id}" if agent_id else None)
            if call is None:
                self.work.calls[tool_use_id] = Call(tool_use_id, str(ev.get("tool") or "?"), t, "", agent, agent_id,
                                                    "hook")
            else:
                call.agent = call.agent or agent
                call.agent_id = call.agent_id or agent_id
        elif kind == "tool-end" and tool_use_id:
            self.work.calls.pop(tool_use_id, None)
        elif kind == "subagent-start" and agent_id:
            self.work.agents[str(agent_id)] = str(ev.get("agent_type") or "?")
        elif kind == "subagent-stop" and agent_id:
            self.work.agents.pop(str(agent_id), None)
            for call_id in [c.id for c in self.work.calls.values() if c.agent_id == agent_id]:
                del self.work.calls[call_id]
        elif kind == "prompt":
            self.shown.awaiting_user = False
            self.shown.result_at = None
        elif kind == "stop":
            # The main agent's turn ended: its hook-tracked calls are over (PostToolUse does not
            # fire for a call that failed or was denied), and an interactive CLI waits for its user.
            for call_id in [c.id for c in self.work.calls.values() if c.via == "hook" and c.agent_id is None]:
                del self.work.calls[call_id]
            if self.limits.interactive:
                self.shown.awaiting_user = True

    def transcripts_to_read(self) -> list[str]:
        """The transcripts that would show the end of a hook-tracked call still in flight: the
        main agent's, and each calling subagent's (watchdog/transcript.py)."""
        if not self.work.transcript:
            return []
        from claudeguard.watchdog.transcript import subagent_transcript

        paths: list[str] = []
        for c in self.work.calls.values():
            if c.via != "hook":
                continue
            path = subagent_transcript(self.work.transcript, c.agent_id) if c.agent_id else self.work.transcript
            if path and path not in paths:
                paths.append(path)
        return paths

    def calls_ended(self, ended: dict[str, float]) -> None:
        """Hook-tracked calls whose result the transcript shows (``ended``: id -> time, ours)."""
        for c in [c for c in self.work.calls.values() if c.via == "hook" and c.id in ended]:
            del self.work.calls[c.id]
            self._life(max(c.started, ended[c.id]), f"transcript tool-end {c.name}")

    # -- samples ---------------------------------------------------------------------------
    def sample(self, s: Sample) -> StallVerdict:
        lim = self.limits
        prev = self.tree.prev
        dt = max(1e-3, s.time - prev.time) if prev is not None else lim.interval
        self.tree.last_dt = dt
        deltas: dict[int, float] = {}
        io_delta = 0.0
        if prev is None:
            # The baseline: start-up CPU is counted in the total but is not judged.
            for pid, p in s.procs.items():
                deltas[pid] = 0.0
                self.progress.cpu_total += p.cpu + p.cpu_children
            self.progress.cpu_at = self.progress.cpu_total
        else:
            credit: dict[int, float] = {}
            for pid, q in prev.procs.items():
                cur = s.procs.get(pid)
                if cur is None or cur.start != q.start:
                    # Exited since: its parent's reaped-children time will include all of it.
                    credit[q.ppid] = credit.get(q.ppid, 0.0) + q.cpu + q.cpu_children
            for pid, p in s.procs.items():
                before = prev.procs.get(pid)
                if before is None or before.start != p.start:
                    d = p.cpu + p.cpu_children
                    proc_io = p.io or 0
                else:
                    d = (max(0.0, p.cpu - before.cpu)
                         + max(0.0, p.cpu_children - before.cpu_children - credit.get(pid, 0.0)))
                    proc_io = max(0, p.io - before.io) if p.io is not None and before.io is not None else 0
                # With a dialog on the screen the CLI's own io is its redraw (2.1.330 repaints
                # about 2 KB a second while it waits), not progress.
                if not (pid == s.root_pid and self.shown.screen_hint):
                    io_delta += proc_io
                deltas[pid] = d
            self.progress.cpu_total += sum(deltas.values())
        self.tree.deltas = deltas
        self.tree.prev = s
        self.tree.last_sample = s

        root_d = deltas.get(s.root_pid, 0.0)
        desc = {pid: d for pid, d in deltas.items() if pid != s.root_pid}
        root_floor, desc_floor = lim.root_cpu_floor(dt), lim.desc_cpu_floor(dt)
        for pid, d in deltas.items():
            if d > (root_floor if pid == s.root_pid else desc_floor):
                self.tree.proc_busy[pid] = s.time
        for pid in [pid for pid in self.tree.proc_busy if pid not in s.procs]:
            del self.tree.proc_busy[pid]
        if prev is not None:
            busy = max(desc.items(), key=lambda kv: kv[1], default=(0, 0.0))
            starved = self._starved(prev, s, dt)
            if root_d > root_floor:
                self._progress(s.time, f"CPU: {self._pname(s, s.root_pid)} {root_d:.2f} s")
            elif busy[1] > desc_floor:
                self._progress(s.time, f"CPU: {self._pname(s, busy[0])} {busy[1]:.2f} s")
            elif sum(desc.values()) > root_floor:
                self._progress(s.time, f"CPU: {len(desc)} processes {sum(desc.values()):.2f} s")
            elif starved is not None:
                pid, ran, waited = starved
                self._progress(s.time, f"waiting for a CPU: {self._pname(s, pid)} runnable {ran + waited:.2f} s "
                                       f"of {dt:.2f} s, of which {waited:.2f} s on a run queue"
                                       + (f" (load {s.load:.1f})" if s.load is not None else ""))
            if starved is not None:
                self.tree.starved_at = s.time
                self.tree.starved_what = (f"{self._pname(s, starved[0])} waited {starved[2]:.2f} s for a CPU in "
                                          f"{dt:.2f} s")
            if io_delta > lim.io_floor(dt):
                self.tree.io_progress_at = s.time
                self._progress(s.time, f"io: {int(io_delta)} bytes")

        live = set()
        for pid, p in s.procs.items():
            if p.reading and deltas.get(pid, 0.0) <= desc_floor and p.status != "Z":
                key = (pid, p.start)
                live.add(key)
                self.tree.readers[key] = self.tree.readers.get(key, 0) + 1
        self.tree.readers = {k: v for k, v in self.tree.readers.items() if k in live}
        if not s.root_alive:
            self.exited(s.time, None)
        return self.verdict(s.time)

    def _starved(self, prev: Sample, s: Sample, dt: float) -> tuple[int, float, float] | None:
        """(pid, seconds on a CPU, seconds waiting for one) of the process of the tree that was
        runnable longest in the window, when that is at least the floor (``Limits.runnable_floor``);
        None when no process wanted the CPU that long (or schedstat cannot be read)."""
        floor = self.limits.runnable_floor(dt)
        best: tuple[int, float, float] | None = None
        for pid, p in s.procs.items():
            q = prev.procs.get(pid)
            if (q is None or q.start != p.start or p.sched_run is None or p.sched_wait is None
                    or q.sched_run is None or q.sched_wait is None):
                continue
            ran = max(0.0, p.sched_run - q.sched_run)
            waited = max(0.0, p.sched_wait - q.sched_wait)
            if ran + waited >= floor and (best is None or ran + waited > best[1] + best[2]):
                best = (pid, ran, waited)
        return best

    @staticmethod
    def _pname(s: Sample, pid: int) -> str:
        p = s.procs.get(pid)
        return f"{p.name if p else '?'} (pid {pid})"

    # -- evaluation ------------------------------------------------------------------------
    def _blocked_readers(self) -> list[ProcInfo]:
        s = self.tree.last_sample
        if s is None:
            return []
        out = []
        for (pid, start), n in self.tree.readers.items():
            p = s.procs.get(pid)
            if p is not None and p.start == start and n >= 2:
                out.append(p)
        return out

    def _tty_readers(self) -> list[ProcInfo]:
        s = self.tree.last_sample
        out = []
        for p in self._blocked_readers():
            if not (p.reading or "").startswith("/dev/"):
                continue
            if s is not None and p.pid == s.root_pid and self.limits.interactive:
                continue  # an interactive CLI reading its own terminal waits for its user
            out.append(p)
        return out

    def _base(self, now: float) -> tuple[str, str | None]:
        lim = self.limits
        if self.shown.exited_at is not None:
            return EXITED, None if self.shown.exit_code is None else f"exit code {self.shown.exit_code}"
        if self.pending_count > 0:
            n = self.pending_count
            return AWAITING, f"{n} request{'s' if n != 1 else ''} waiting in the channel"
        if self.flow.sdk_request:
            return AWAITING, "the SDK host was asked (can_use_tool)"
        if self.shown.screen_hint:
            return BLOCKED, self.shown.screen_hint
        if self.shown.dialog_note:
            return BLOCKED, self.shown.dialog_note
        readers = self._tty_readers()
        if readers:
            p = readers[0]
            return BLOCKED, f"{p.name} (pid {p.pid}) reads {p.reading}"
        tools = [c for c in self.work.calls.values() if c.name not in AGENT_TOOLS]
        if tools:
            c = max(tools, key=lambda c: c.started)
            return TOOL, c.name
        shells = [tk for tk in self.work.tasks.values() if not tk.subagent_type]
        agents = [c for c in self.work.calls.values() if c.name in AGENT_TOOLS]
        if lim.interactive and self.shown.awaiting_user and not agents and not self.work.tasks:
            return IDLE, None
        if agents or self.work.tasks:
            if shells and not agents and len(shells) == len(self.work.tasks):
                return TOOL, f"background task: {shells[0].description or shells[0].id}"
            if agents:
                c = max(agents, key=lambda c: c.started)
                return THINKING, f"subagent via {c.name} ({c.id}){': ' + c.detail if c.detail else ''}"
            tk = max(self.work.tasks.values(), key=lambda tk: tk.started)
            return THINKING, f"background {tk.subagent_type or 'task'}: {tk.description or tk.id}"
        if self.shown.result_at is not None and not lim.interactive:
            return FINISHING, None
        if not self.shown.sign_of_life and now - self.start < lim.startup_grace:
            return STARTING, None
        recent = 2 * max(lim.interval, self.tree.last_dt)
        if (self.flow.last_output is not None and now - self.flow.last_output <= recent) or (
            self.tree.io_progress_at is not None and now - self.tree.io_progress_at <= recent
        ) or (self.flow.last_stream is not None and self.flow.partial_open and now - self.flow.last_stream <= recent):
            return STREAMING, None
        if not self.shown.sign_of_life:
            return STARTING, None
        return THINKING, None

    def threshold(self, base: str) -> float | None:
        if base in (AWAITING, IDLE, EXITED):
            return None
        if base == TOOL:
            return self.limits.tool_stall_after
        return self.limits.stall_after

    def verdict(self, now: float) -> StallVerdict:
        base, detail = self._base(now)
        threshold = self.threshold(base)
        if threshold is None:
            self.progress.hold = now
        quiet = max(0.0, now - max(self.progress.last, self.progress.hold))
        stalled = threshold is not None and quiet >= threshold
        new_stall = stalled and not self.progress.in_stall
        if new_stall:
            self.progress.stall_count += 1
        self.progress.in_stall = stalled
        diagnosis = self._diagnose(base, detail, quiet, now) if stalled else None
        return StallVerdict(
            time=now,
            state=STALLED if stalled else base,
            base=base,
            detail=detail,
            quiet_s=quiet,
            threshold_s=threshold,
            stalled=stalled,
            new_stall=new_stall,
            diagnosis=diagnosis,
            evidence=self.evidence(now, quiet, threshold),
        )

    # -- words -----------------------------------------------------------------------------
    def stream_silent(self, now: float) -> float:
        seen = (self.flow.last_output, self.flow.last_stream, self.tree.io_progress_at)
        marks = [self.start] + [x for x in seen if x is not None]
        return max(0.0, now - max(marks))

    def window_cpu(self) -> float:
        return max(0.0, self.progress.cpu_total - self.progress.cpu_at)

    def _odd_states(self) -> list[str]:
        s = self.tree.last_sample
        if s is None:
            return []
        out = []
        for p in s.procs.values():
            if p.status in ODD_STATES and not (p.status == "Z" and p.pid != s.root_pid):
                who = "the CLI" if p.pid == s.root_pid else f"{p.name} (pid {p.pid})"
                out.append(f"{who} is {ODD_STATES[p.status]}")
        return out

    def _load_note(self) -> str | None:
        """The machine's load, when a sample knew it: a stall on a loaded machine is still one
        (no process of the tree wanted the CPU), but the reader should know."""
        s = self.tree.last_sample
        if s is None or s.load is None or not s.cpus or s.load <= s.cpus:
            return None
        return f"machine load {s.load:.1f} on {s.cpus} CPUs"

    def _stdin_note(self) -> str | None:
        # Only the CLI's own stdin: MCP stdio servers and many tools wait on theirs by design.
        root = self.tree.last_sample.root_pid if self.tree.last_sample else None
        for p in self._blocked_readers():
            if p.pid == root and not (p.reading or "").startswith("/dev/"):
                return f"the CLI is blocked reading its {p.reading}"
        return None

    def _tree_words(self, pids: set[int] | None = None) -> str:
        s = self.tree.last_sample
        if s is None:
            return ""
        procs = [p for p in s.procs.values() if pids is None or p.pid in pids]
        return ", ".join(f"{p.name} {p.pid} {p.status}" for p in procs[:6]) + (" ..." if len(procs) > 6 else "")

    def _diagnose(self, base: str, detail: str | None, quiet: float, now: float) -> str:
        cpu = f"tree CPU {self.window_cpu():.2f} s"
        extra = [x for x in [self._stdin_note(), *self._odd_states(), self._load_note()] if x]
        tail = ("; " + "; ".join(extra)) if extra else ""
        if base == TOOL:
            tools = [c for c in self.work.calls.values() if c.name not in AGENT_TOOLS]
            if tools:
                c = max(tools, key=lambda c: c.started)
                who = f" in {c.agent}" if c.agent and not c.agent.startswith("toolu_") else ""
                if c.name.startswith("mcp__"):
                    server = c.name.split("__")[1] if c.name.count("__") >= 2 else c.name
                    return (f"stalled: tool {c.name} ({c.id}){who} for {_secs(quiet)}: MCP server {server} idle "
                            f"with a request outstanding, {cpu}{tail}")
                last = self.tree.last_sample
                procs = self._tree_words({p for p in last.procs if p != last.root_pid}) if last else ""
                return (f"stalled: tool {c.name} ({c.id}){who} for {_secs(quiet)} with no CPU in its processes"
                        f" ({procs or 'none left'}), {cpu}{tail}")
            return f"stalled: {detail} for {_secs(quiet)} with no CPU in its processes, {cpu}{tail}"
        if base == BLOCKED:
            readers = self._tty_readers()
            if self.shown.screen_hint or self.shown.dialog_note or not readers:
                return (f"stalled: blocked reading its terminal: a prompt is waiting ({detail}) for {_secs(quiet)}, "
                        f"{cpu}{tail}")
            return f"stalled: blocked reading its terminal: {detail} for {_secs(quiet)}, {cpu}{tail}"
        if base == STARTING:
            return f"stalled: starting for {_secs(quiet)}: no output and no hook event yet, {cpu}{tail}"
        if base == FINISHING:
            left = self._tree_words()
            return (f"stalled: finishing for {_secs(quiet)}: the result came "
                    f"{_secs(now - (self.shown.result_at or now))} ago "
                    f"but the CLI has not exited ({left}), {cpu}{tail}")
        silent = self.stream_silent(now)
        mid = " mid-answer" if self.flow.partial_open else ""
        sub = f" ({detail})" if detail else ""
        return f"stalled: {base}{sub} for {_secs(quiet)}: model stream silent{mid} {_secs(silent)}, {cpu}{tail}"

    def evidence(self, now: float, quiet: float, threshold: float | None) -> dict[str, Any]:
        s = self.tree.last_sample
        procs = []
        if s is not None:
            for p in list(s.procs.values())[:12]:
                busy = self.tree.proc_busy.get(p.pid)
                procs.append({
                    "pid": p.pid, "name": p.name, "state": p.status,
                    "cpu_s": round(p.cpu + p.cpu_children, 2),
                    "cpu_delta_s": round(self.tree.deltas.get(p.pid, 0.0), 3),
                    "busy_ago_s": None if busy is None else round(now - busy, 1),
                    **({"reading": p.reading} if p.reading else {}),
                })
        ev: dict[str, Any] = {
            "quiet_s": round(quiet, 1),
            "threshold_s": threshold,
            "last_progress": self.progress.what,
            "last_progress_ago_s": round(max(0.0, now - self.progress.last), 1),
            "tree_cpu_s": round(self.progress.cpu_total, 2),
            "quiet_cpu_s": round(self.window_cpu(), 3),
            "output_bytes": self.flow.output_bytes,
            "last_output_ago_s": _ago(now, self.flow.last_output),
            "last_screen_output_ago_s": _ago(now, self.flow.last_screen),
            "stream_silent_s": round(self.stream_silent(now), 1),
            "messages": self.flow.messages,
            "tokens": self.flow.tokens,
            "tools": [
                {"id": c.id, "name": c.name, "age_s": round(now - c.started, 1), "agent": c.agent, "detail": c.detail}
                for c in sorted(self.work.calls.values(), key=lambda c: c.started)
            ][:10],
            "tasks": [{"id": tk.id, "description": tk.description, "type": tk.subagent_type,
                       "age_s": round(now - tk.started, 1)} for tk in self.work.tasks.values()][:10],
            "pending": self.pending_count,
            "procs": procs,
        }
        if self.shown.screen_hint:
            ev["screen"] = self.shown.screen_hint
        if self.shown.dialog_note:
            ev["dialog"] = self.shown.dialog_note
        readers = self._blocked_readers()
        if readers:
            ev["blocked_reading"] = [{"pid": p.pid, "name": p.name, "reading": p.reading} for p in readers]
        odd = self._odd_states()
        if odd:
            ev["odd"] = odd
        if s is not None and s.load is not None:
            ev["load"] = round(s.load, 2)
        starved_at = self.tree.starved_at
        if starved_at is not None and now - starved_at <= 2 * max(self.limits.interval, self.tree.last_dt):
            ev["waiting_for_cpu"] = self.tree.starved_what
        failed = [m.get("name") for m in self.flow.mcp_servers if m.get("status") not in (None, "connected")]
        if failed:
            ev["mcp_not_connected"] = failed
        if self.work.agents:
            ev["subagents"] = dict(list(self.work.agents.items())[:10])
        return ev
