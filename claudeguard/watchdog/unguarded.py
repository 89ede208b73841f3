"""Claude CLIs that no claudeguard started (``claudeguardctl ps --all``), and which of them look hung.

Judged from recent evidence, the way the watchdog judges a guarded session, never from the
whole life of the process (a CLI that worked for ten minutes and then hung is a hung CLI):

- **last progress**: the newest write to the CLI's session transcript
  (``<config dir>/projects/<cwd with every non-alphanumeric character as '-'>/<session>.jsonl``
  and its ``<session>/subagents/*.jsonl``; the config dir is the process's ``CLAUDE_CONFIG_DIR``,
  else ``$HOME/.claude`` of the process), to a regular file its stdout or stderr is redirected
  to, else its start;
- **the threshold**: ``watchdog.stall_after``, or ``tool_stall_after`` while the transcript's
  last message is a tool call (not a subagent) that has no result yet;
- **a short window**: two samples of the CLI's process tree ``window_s`` apart; CPU of the CLI,
  of its tools and io above the watchdog's noise floors (``state.Limits``) is progress, and so is
  a process runnable for longer than the CPU floor (it wants the CPU a loaded machine does not
  give it);
- **a terminal**: a CLI with a terminal and no ``-p`` may be waiting for its user; it is listed
  but never flagged.

``suspect_hung``: no terminal (or ``-p``), the last progress older than the threshold, and
nothing moving in the window. Several CLIs in one directory without ``--session-id`` cannot be
told apart by their transcripts: each gets the newest one, which errs towards not flagging.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from dataclasses import dataclass, field

import psutil

from claudeguard.ancestry import cli_executable
from claudeguard.config.schema import STALL_AFTER_S, TOOL_STALL_AFTER_S
from claudeguard.watchdog.bg_sessions import background_rows, component
from claudeguard.watchdog.sampler import TreeSampler
from claudeguard.watchdog.signals import Limits, prompt_words

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any


    from claudeguard.watchdog.signals import Sample

CLI_NAMES = ("claude", "claude.exe")
RUNTIMES = ("node", "bun", "nodejs")
AGENT_TOOLS = frozenset({"Agent", "Task"})
TAIL_BYTES = 65536  # enough for the last few transcript records


@dataclass
class Evidence:
    """What is known about one CLI's recent progress (epoch seconds)."""

    started: float
    transcript: str | None = None
    transcript_write: float | None = None
    output_write: float | None = None
    tool: str | None = None  # a tool call in flight according to the transcript
    notes: list[str] = field(default_factory=list)

    def last_progress(self) -> float:
        return max(t for t in (self.started, self.transcript_write, self.output_write) if t is not None)


def is_claude(name: str | None, exe: str | None, cmdline: list[str] | None) -> bool:
    if name in CLI_NAMES or (exe and cli_executable(exe)):
        return True
    if name in RUNTIMES and cmdline:
        return any("claude-code" in a or a.endswith("/claude") for a in cmdline[1:3])
    return False


def prompt_of(cmdline: list[str]) -> str | None:
    for i, arg in enumerate(cmdline[:-1]):
        if arg in ("-p", "--print") and not cmdline[i + 1].startswith("-"):
            return cmdline[i + 1]
    return None


def print_mode(cmdline: list[str]) -> bool:
    return any(a in ("-p", "--print") or (re.fullmatch(r"-[a-zA-Z]*p[a-zA-Z]*", a) is not None) for a in cmdline[1:])


def _option(cmdline: list[str], *names: str) -> str | None:
    for i, arg in enumerate(cmdline):
        for name in names:
            if arg == name and i + 1 < len(cmdline) and not cmdline[i + 1].startswith("-"):
                return cmdline[i + 1]
            if arg.startswith(name + "="):
                return arg.partition("=")[2]
    return None


def project_dir(config_dir: str, cwd: str) -> str:
    """Where the CLI keeps the transcripts of sessions started in ``cwd`` (observed on 2.1.197
    and 2.1.330: ``/tmp/a.b/work`` -> ``projects/-tmp-a-b-work``)."""
    return os.path.join(config_dir, "projects", re.sub(r"[^A-Za-z0-9]", "-", cwd))


def newest_transcripts(folder: str) -> list[tuple[float, str]] | None:
    """(mtime, session id) of every transcript in a project folder, newest first; None when the
    folder cannot be read."""
    found = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                    found.append((entry.stat().st_mtime, entry.name[:-len(".jsonl")]))
    except OSError:
        return None
    return sorted(found, reverse=True)


def transcript_files(folder: str, session: str | None, since: float,
                     listings: dict[str, list[tuple[float, str]] | None] | None = None) -> list[tuple[float, str]]:
    """(mtime, path) of the session's transcript and its subagents' ones, newest first. Without
    a known session id: the session whose transcript was written last, if after ``since``.
    ``listings``: the folders listed so far in this scan (many CLIs of one directory share one)."""
    if session is None:
        if listings is None:
            listings = {}
        if folder not in listings:
            listings[folder] = newest_transcripts(folder)
        listed = listings[folder]
        if not listed or listed[0][0] < since:
            return []
        session = listed[0][1]
    out = []
    main = os.path.join(folder, session + ".jsonl")
    paths = [main]
    try:
        with os.scandir(os.path.join(folder, session, "subagents")) as it:
            paths += [e.path for e in it if e.name.endswith(".jsonl")]
    except OSError:
        pass
    for path in paths:
        try:
            out.append((os.stat(path).st_mtime, path))
        except OSError:
            continue
    return sorted(out, reverse=True)


def last_tool_in_flight(path: str) -> str | None:
    """The tool named by the transcript's last message when that message is the assistant's
    call of a tool (not a subagent) and no result has come yet; else None."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the first, cut line of the tail, or a line being written
        if not isinstance(record, dict) or record.get("type") not in ("assistant", "user"):
            continue  # 2.1.330 appends bookkeeping records after the messages
        if record["type"] == "user":
            return None
        content = (record.get("message") or {}).get("content")
        if not isinstance(content, list):
            content = []
        tools = [b.get("name") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        named = [t for t in tools if isinstance(t, str) and t not in AGENT_TOOLS]
        return named[0] if named else None
    return None


def terminal(p: psutil.Process) -> str | None:
    """The process's controlling terminal. On Linux from ``tty_nr`` in /proc (psutil maps it
    through a table of /dev it builds once per process, which misses terminals opened later),
    named by the fd that points at it when one does."""
    if not sys.platform.startswith("linux"):
        return p.terminal() if hasattr(p, "terminal") else None
    try:
        with open(f"/proc/{p.pid}/stat", "rb") as fh:
            tty_nr = int(fh.read().rsplit(b")", 1)[1].split()[4])
    except (OSError, IndexError, ValueError):
        return None
    if tty_nr == 0:
        return None
    for fd in (0, 1, 2):
        try:
            if os.stat(f"/proc/{p.pid}/fd/{fd}").st_rdev == tty_nr:
                return os.readlink(f"/proc/{p.pid}/fd/{fd}")
        except OSError:
            continue
    return f"tty {os.major(tty_nr)}:{os.minor(tty_nr)}"


def output_write(pid: int) -> float | None:
    """The last write to a regular file the CLI's stdout or stderr goes to (Linux)."""
    latest = None
    for fd in (1, 2):
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            latest = max(latest or 0.0, st.st_mtime)
    return latest


def gather(pid: int, cmdline: list[str], cwd: str | None, environ: dict[str, str], started: float,
           listings: dict[str, list[tuple[float, str]] | None] | None = None) -> Evidence:
    ev = Evidence(started=started, output_write=output_write(pid))
    config_dir = environ.get("CLAUDE_CONFIG_DIR") or (os.path.join(environ["HOME"], ".claude")
                                                      if environ.get("HOME") else None)
    if cwd is None or config_dir is None:
        ev.notes.append("transcript unknown (no cwd or HOME)")
        return ev
    session = _option(cmdline, "--session-id", "--resume", "-r")
    if session is not None and not re.fullmatch(r"[0-9a-fA-F-]{36}", session):
        session = None  # --resume with a search term, not an id
    # A second of slack: the first write may share the start's second on coarse clocks.
    files = transcript_files(project_dir(config_dir, cwd), session, started - 1.0, listings)
    if not files:
        ev.notes.append("no transcript written since it started")
        return ev
    ev.transcript_write, ev.transcript = files[0]
    for _, path in files:
        ev.tool = last_tool_in_flight(path)
        if ev.tool:
            break
    return ev


# -- the window --------------------------------------------------------------------------------
def window_moved(first: Sample, second: Sample) -> tuple[bool, float, int]:
    """Between two samples of one tree: (progress, CPU seconds, io bytes), with the watchdog's
    noise floors (an idle CLI's timers use a little of both)."""
    dt = max(1e-3, second.time - first.time)
    lim = Limits()
    moved = False
    cpu_total, io_total, desc = 0.0, 0, 0.0
    for pid, b in second.procs.items():
        a = first.procs.get(pid)
        own = b.cpu + b.cpu_children - ((a.cpu + a.cpu_children) if a is not None and a.start == b.start else 0.0)
        own = max(0.0, own)
        cpu_total += own
        if a is not None and a.start == b.start and a.io is not None and b.io is not None:
            io_total += max(0, b.io - a.io)
        if (a is not None and a.start == b.start and None not in (a.sched_run, a.sched_wait, b.sched_run, b.sched_wait)
                and (b.sched_run or 0.0) - (a.sched_run or 0.0) + (b.sched_wait or 0.0) - (a.sched_wait or 0.0)
                >= lim.runnable_floor(dt)):
            moved = True  # it wants the CPU and the machine is busy: working, not hung (state.py)
        if pid == second.root_pid:
            moved = moved or own > lim.root_cpu_floor(dt)
        else:
            desc += own
            moved = moved or own > lim.desc_cpu_floor(dt)
    moved = moved or desc > lim.root_cpu_floor(dt) or io_total > lim.io_floor(dt)
    return moved, round(cpu_total, 3), io_total


def judge(ev: Evidence, now: float, *, interactive: bool, stall_after: float,
          tool_stall_after: float) -> tuple[bool, float, float]:
    """Before the window: (worth a look, quiet seconds, threshold)."""
    quiet = max(0.0, now - ev.last_progress())
    threshold = tool_stall_after if ev.tool else stall_after
    return (not interactive and quiet >= threshold), quiet, threshold


def diagnosis(ev: Evidence, quiet: float, window_s: float, cpu: float) -> str:
    if ev.transcript_write is not None and ev.transcript_write == ev.last_progress():
        since = "its transcript was last written"
    elif ev.output_write is not None and ev.output_write == ev.last_progress():
        since = "its output file was last written"
    else:
        since = "it started, with no transcript write since"
    what = f"tool {ev.tool} in flight, " if ev.tool else ""
    return f"no progress for {quiet:.0f} s ({what}{since} {quiet:.0f} s ago; {cpu:.2f} s CPU in a {window_s:g} s look)"


# -- the scan ----------------------------------------------------------------------------------
def unguarded_sessions(guarded: list[dict[str, Any]], *, stall_after: float = STALL_AFTER_S,
                       tool_stall_after: float = TOOL_STALL_AFTER_S, window_s: float = 1.0) -> list[dict[str, Any]]:
    """The Claude Code processes of this user that no guarded session runs, each as a ``ps``
    row; one quiet past its threshold is looked at for ``window_s`` and said suspect-hung when
    nothing in its tree moved. The CLI's own background daemon, pty hosts and spares are listed
    as the sessions they host (``bg_sessions``)."""
    skip = {r.get("pid") for r in guarded} | {r.get("child_pid") for r in guarded}
    parents, candidates = _claude_processes()
    machinery = [(p, cmdline, part) for p, cmdline in candidates if (part := component(cmdline))]
    cand_pids = {p.pid for p, _ in candidates}
    candidates = [(p, cmdline) for p, cmdline in candidates if not component(cmdline)]

    def outside(pid: int) -> bool:
        seen = set()
        cur = parents.get(pid, 0)
        while cur and cur not in seen:
            if cur in skip or cur in cand_pids:
                return False
            seen.add(cur)
            cur = parents.get(cur, 0)
        return True

    rows, probes = [], []
    listings: dict[str, list[tuple[float, str]] | None] = {}
    now = time.time()
    for p, cmdline in candidates:
        if p.pid in skip or p.pid == os.getpid() or not outside(p.pid):
            continue
        found = _row_of(p, cmdline, listings, now, stall_after, tool_stall_after)
        if found is None:
            continue
        row, ev, look, quiet = found
        rows.append(row)
        if look:
            sampler = TreeSampler(p.pid, clock=time.monotonic, check_reads=False)
            probes.append((row, ev, quiet, sampler, sampler.sample()))
    if probes:
        # The quiet time is the suspicion; nothing moving while we look confirms it.
        time.sleep(window_s)
        for row, ev, quiet, sampler, first in probes:
            second = sampler.sample()
            if not second.root_alive:
                continue
            moved, cpu, io = window_moved(first, second)
            row["evidence"].update(window_s=window_s, window_cpu_s=cpu, window_io=io)
            if not moved:
                row["suspect_hung"] = True
                row["state"] = "suspect-hung"
                row["diagnosis"] = diagnosis(ev, quiet, window_s, cpu)
    if machinery:
        rows.extend(background_rows(machinery, skip))
    return rows


def _claude_processes() -> tuple[dict[int, int], list[tuple[Any, list[str]]]]:
    """Every process's parent, and this user's Claude Code processes with their command lines."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    parents: dict[int, int] = {}
    found: list[Any] = []
    for p in psutil.process_iter(["ppid", "name"]):
        parents[p.pid] = p.info.get("ppid") or 0
        name = p.info.get("name")
        if name in CLI_NAMES + RUNTIMES or (name or "").startswith("claude"):
            found.append(p)
    candidates = []
    for p in found:
        try:
            if uid is not None and p.uids().real != uid:
                continue
            cmdline = p.cmdline()
            try:
                exe = p.exe()
            except psutil.Error:
                exe = None
            if is_claude(p.info.get("name"), exe, cmdline):
                candidates.append((p, cmdline))
        except psutil.Error:
            continue
    return parents, candidates


def _row_of(p: Any, cmdline: list[str], listings: dict[str, list[tuple[float, str]] | None], now: float,
            stall_after: float, tool_stall_after: float) -> tuple[dict[str, Any], Evidence, bool, float] | None:
    """One unguarded CLI's ``ps`` row, its evidence, whether to look at it and its quiet time;
    None when it is gone."""
    try:
        with p.oneshot():
            t = p.cpu_times()
            started = p.create_time()
            tty = terminal(p)
        try:
            cwd = p.cwd()
        except psutil.Error:
            cwd = None
        try:
            environ = p.environ()
        except psutil.Error:
            environ = {}
    except psutil.Error:
        return None
    ev = gather(p.pid, cmdline, cwd, environ, started, listings)
    interactive = tty is not None and not print_mode(cmdline)
    look, quiet, threshold = judge(ev, now, interactive=interactive, stall_after=stall_after,
                                   tool_stall_after=tool_stall_after)
    row = {"pid": p.pid, "child_pid": None, "guarded": False, "cwd": cwd, "state": "unguarded",
           "cpu_s": round(t.user + t.system, 2), "tokens": None, "last_activity_s": round(quiet, 1),
           "pending": None,
           "prompt": prompt_words(prompt_of(cmdline)), "tty": tty, "interactive": interactive,
           "age_s": round(max(0.0, now - started), 1), "suspect_hung": False,
           "evidence": {"transcript": ev.transcript,
                        "transcript_write_s": None
                        if ev.transcript_write is None else round(now - ev.transcript_write, 1),
                        "output_write_s": None if ev.output_write is None else round(now - ev.output_write, 1),
                        "tool_in_flight": ev.tool, "threshold_s": threshold, "notes": ev.notes}}
    return row, ev, look, quiet
