"""Claude Code's own background sessions (``claude --bg``), kept by the service for their whole
life: the launcher exits at once, the session runs on under Claude Code's daemon.

The launcher writes ``background.json`` (0600) into the session dir: the secret, the CLI's short
id, its config dir and the watchdog settings; the service registers the session from it, and
after a restart of its own adopts every such session again (``adopt``), so a service that died
and came back still answers their hooks. A keeper thread per session:

1. finds the session's process: ``<config dir>/sessions/<pid>.json`` with ``jobId`` = the short
   id (pid and start time checked, as the CLI records them);
2. runs the watchdog (``watchdog.monitor.Monitor``) on that process alone: its status file makes
   ``ps`` list the session, and warn/interrupt/kill act on its tree, never on the daemon or
   another session; the watchdog samples in the service's one sampling thread, and after each
   sample checks that the process is still the same one, reads its name now and then and puts
   the session dir back if the runtime dir was removed (the keeper thread sleeps meanwhile);
3. when the process is gone (or never appeared within ``FIND_TIMEOUT_S``), stops the watchdog,
   drops the session and removes its dir.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from claudeguard.channel import audit
from claudeguard.channel.audit import session_log
from claudeguard.files import read_json
from claudeguard.plan.keeper import SessionKeeper
from claudeguard.plan.sandbox import kept_files, restore_box
from claudeguard.plan.report import EndOptions, Run, fail_on_hits, write_report as write_report_file
from claudeguard.procs import process_start
from claudeguard.service.watch import SCHEDULE
from claudeguard.watchdog.monitor import Monitor
from claudeguard.watchdog.signals import WatchConfig
from claudeguard.watchdog.sampler import kill_tree

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, TypedDict

    from claudeguard.gate.session import Session
    from claudeguard.service.protocol import WatchSettings
    from claudeguard.service.registry import Registered, Registry, Shown

    class ReportSpec(TypedDict, total=False):
        """``--guard-report`` of a ``--bg`` launch, written by the service when the session ends."""

        path: str
        fail_on: list[str]
        started: float  # the launch's time
        mark: list[int] | None  # where the audit log ended at the launch (plan.report.audit_mark)
        real_cli: str

    class AgentViewSpec(TypedDict, total=False):
        """The view of a guarded agent view: its process and its settings file."""

        settings: str
        pid: int
        start: str | None

    class BackgroundRecord(TypedDict, total=False):
        """``background.json`` in the session dir (0600), written by the launcher (``shim/background``,
        ``shim/agent_view``) or by the service for a child of agent view; what the service keeps
        the session by, and adopts it again from."""

        token: str  # the session's secret
        config_dir: str  # the CLI's (its session records)
        watch: WatchSettings
        prompt: str | None
        short_id: str  # the CLI's, once the launch printed it
        port: int  # the port its hooks name
        report: ReportSpec
        agent_view: AgentViewSpec | None  # a view of agent view
        cli_session: str  # a child of agent view: the CLI's session id
        parent: str  # a child of agent view: the view's session id

    # One of the CLI's records of its live sessions (``<config dir>/sessions/<pid>.json``).
    CliRecord = dict[str, object]

RECORD = "background.json"
FIND_TIMEOUT_S = 60.0  # from the launch until the CLI records the session's process
POLL_S = 0.5  # while finding the session's process
NAME_EVERY_S = 5.0  # between reads of the session's name
# Once found, the checks run with the watchdog's samples (in the service's one sampling thread):
# the keeper thread itself only wakes this often, for a watchdog that stopped sampling.
SAFETY_POLL_S = 5.0


@dataclass
class Keeper:
    session_id: str
    directory: str
    short_id: str
    config_dir: str
    watch: WatchSettings
    prompt: str | None = None
    cwd: str | None = None
    pid: int | None = None
    log_dir: str | None = None
    report: ReportSpec | None = None  # --guard-report of the launch: path, fail_on, started, mark, real_cli
    # A session dispatched from agent view is known by the CLI's session id (from its hooks or
    # its job record) before its short id: found by that, the short id is then read from the
    # CLI's record (service/agent_view.py).
    cli_session: str | None = None
    parent: str | None = None  # the agent view's guard session, for a session dispatched from it
    stop: threading.Event = field(default_factory=threading.Event)
    gone: bool = False  # the session's process ended (``stop`` is set then too, to wake the keeper)

    def session_for(self, service: Registry, reg: Registered, body: bytes) -> Session:
        """Every hook event of a ``--bg`` session is its own."""
        return reg.session

    def shown(self) -> Shown:
        return {"short_id": self.short_id or None, "cli_pid": self.pid}


def read_record(directory: str) -> BackgroundRecord | None:
    """The session's ``background.json``: our own file, private to this user (its readers check
    what they rely on); None when missing or unreadable."""
    data: Any = read_json(os.path.join(directory, RECORD))  # a JSON object, or None
    record: BackgroundRecord | None = data
    return record


def live_records(config_dir: str) -> Iterator[tuple[CliRecord, str]]:
    """The CLI's records of its live session processes (``<config dir>/sessions/<pid>.json``),
    each with the process's start time: a record whose pid is gone or now another process's
    (``procStart``) is left out."""
    folder = os.path.join(config_dir, "sessions")
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
    except OSError:
        return
    for name in names:
        try:
            with open(os.path.join(folder, name)) as fh:
                rec = json.load(fh)
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int):
            continue
        start = process_start(rec["pid"])
        if start is not None and (rec.get("procStart") is None or str(rec.get("procStart")) == start):
            yield rec, start


def find_process(config_dir: str, short_id: str, cli_session: str | None = None) -> tuple[int, str, str] | None:
    """The session's pid, start time and short id from the CLI's own record of it, if it is
    alive: by short id (``jobId``), or when that is not known yet, by ``sessionId``."""
    for rec, start in live_records(config_dir):
        pid = rec.get("pid")
        if isinstance(pid, int) and ((rec.get("jobId") == short_id) if short_id
                                     else (cli_session and rec.get("sessionId") == cli_session)):
            return pid, start, str(rec.get("jobId") or short_id)
    return None


def hooks_port(directory: str, record: BackgroundRecord) -> int | None:
    """The port a background session's hooks name: its record's, else the first hook URL of its
    settings file (a record written before the record said it)."""
    port = record.get("port")
    if isinstance(port, int) and 0 < port < 65536:
        return port
    settings: Any = read_json(os.path.join(directory, "settings.json")) or {}
    for groups in (settings.get("hooks") or {}).values() if isinstance(settings, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for hook in group.get("hooks") or [] if isinstance(group, dict) else ():
                url = hook.get("url") if isinstance(hook, dict) else None
                if isinstance(url, str) and url.startswith("http://127.0.0.1:"):
                    try:
                        return int(url[len("http://127.0.0.1:"):].split("/", 1)[0])
                    except ValueError:
                        return None
    return None


def end_session(directory: str, record: BackgroundRecord, why: str, sessions_root: str) -> None:
    """End a background session the service cannot keep safely (``server.adopt``): its CLI's
    process tree stopped (a view's: agent view and the sessions it dispatched), one line in
    the service's log and an audit row, its dir (and its children's) removed."""
    session_id = os.path.basename(directory)
    config_dir = str(record.get("config_dir") or "")
    pids: list[int] = []
    view = record.get("agent_view")
    if isinstance(view, dict) and isinstance(view.get("pid"), int) and process_start(view["pid"]) == view.get("start"):
        pids.append(view["pid"])
    dirs = [directory]
    if view:  # its children: the sessions it dispatched, each with its own dir
        try:
            children = [e.path for e in os.scandir(sessions_root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            children = []
        for child in children:
            rec = read_record(child)
            if rec is not None and rec.get("parent") == session_id:
                dirs.append(child)
                found = find_process(config_dir, str(rec.get("short_id") or ""), rec.get("cli_session"))
                if found is not None:
                    pids.append(found[0])
    else:
        found = find_process(config_dir, str(record.get("short_id") or ""))
        if found is not None:
            pids.append(found[0])
    for pid in pids:
        kill_tree(pid, 2.0)
    print(f"claudeguard service: background session {session_id} ended: {why}", file=sys.stderr, flush=True)
    log = None
    try:
        snapshot = read_json(os.path.join(directory, "session.json"))
        log = snapshot.get("log_dir") if isinstance(snapshot, dict) else None
    except OSError:
        pass
    session_log.set(log if isinstance(log, str) else None)
    try:
        audit.record({"event": "compromised", "session_id": session_id, "decision": "compromised",
                      "decided_by": "service", "summary": f"background session ended: {why}",
                      "cli_short_id": record.get("short_id"), "stopped_pids": pids})
    finally:
        session_log.set(None)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def session_name(config_dir: str, pid: int) -> str | None:
    """The name the CLI gives the session (its prompt, then an auto title), from its record."""
    try:
        with open(os.path.join(config_dir, "sessions", f"{pid}.json")) as fh:
            name = json.load(fh).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def keep(keeper: Keeper, on_end: Callable[[], None]) -> None:
    """The keeper thread's body (see the module docstring); ``on_end()`` drops the session."""
    found = None
    deadline = time.monotonic() + FIND_TIMEOUT_S
    while found is None and time.monotonic() < deadline and not keeper.stop.is_set():
        found = find_process(keeper.config_dir, keeper.short_id, keeper.cli_session)
        if found is None:
            keeper.stop.wait(POLL_S)
    monitor = None
    if found is not None:
        pid, start, keeper.short_id = found
        keeper.pid = pid
        restorer = _dir_keeper(keeper)
        named = [-NAME_EVERY_S]
        extra: dict[str, object] = {}  # the monitor's extra_status (the monitor may sample before it is returned)

        def check() -> None:  # after each of the watchdog's samples, in its thread
            if keeper.stop.is_set():
                return
            if process_start(pid) != start:
                keeper.gone = True
                keeper.stop.set()
                return
            if time.monotonic() - named[0] >= NAME_EVERY_S:  # the CLI renames a session (its auto title)
                named[0] = time.monotonic()
                name = session_name(keeper.config_dir, pid)
                if name:
                    extra["name"] = name
            try:
                restorer.check()  # the runtime dir removed under the session: made again
            except Exception as exc:  # noqa: BLE001 - said once by the keeper's own report
                restorer._report(exc)

        monitor = _start_monitor(keeper, pid, check, extra)
        while not keeper.stop.wait(SAFETY_POLL_S):
            if process_start(pid) != start:
                keeper.gone = True
                break
    if monitor is not None:
        monitor.stop(None)
    if keeper.gone or not keeper.stop.is_set():  # the session ended (not the service): forget it for good
        if keeper.report:
            write_report(keeper)

        # The dir first: once forgotten, the same CLI session (respawned) may get it made again.
        shutil.rmtree(keeper.directory, ignore_errors=True)
        on_end()


def _dir_keeper(keeper: Keeper) -> SessionKeeper:
    """What puts the session dir back if the runtime dir is removed (``plan.keeper``): the files
    the launcher wrote, read now, while they are there."""
    files = {}
    for name in ("session.json", RECORD, "settings.json"):
        try:
            with open(os.path.join(keeper.directory, name)) as fh:
                files[name] = fh.read()
        except OSError:
            pass
    kept = kept_files(keeper.directory)  # the box goes with the dir: put back with it
    return SessionKeeper(keeper.session_id, keeper.directory, files,
                         [lambda: restore_box(keeper.directory, kept)])


def _start_monitor(keeper: Keeper, pid: int, after_sample: Callable[[], None] | None = None,
                   extra: dict[str, object] | None = None) -> Monitor:
    # As the launcher wrote them (our own file): the fields WatchConfig knows.
    known: dict[str, Any] = {k: v for k, v in keeper.watch.items() if k in WatchConfig.__dataclass_fields__}
    monitor = Monitor(child_pid=pid, session_id=keeper.session_id, session_dir=Path(keeper.directory),
                      config=WatchConfig(**known), output_format=None, prompt=keeper.prompt, cwd=keeper.cwd or "/",
                      argv=[], on_stall=lambda diagnosis: None)
    monitor.extra_status = {} if extra is None else extra
    monitor.extra_status.update({"background": True, "short_id": keeper.short_id, "kind": "background"})
    if keeper.parent:
        monitor.extra_status["agent_view"] = keeper.parent
    monitor.log_dir = keeper.log_dir
    monitor.after_sample = after_sample

    monitor.start(SCHEDULE)
    return monitor


def write_report(keeper: Keeper) -> None:
    """The end-of-run report of a --bg launch, written when its session ends: the session's audit
    rows since the launch (stalls included, from the audit: a restarted service has no earlier
    watchdog's list). The launcher exited long ago: ``exit_code`` is the one it returned (0),
    the session's own exit code is unknown (null), and ``fail_on`` names the words that would
    have failed the run."""
    spec = keeper.report or {}
    session_log.set(keeper.log_dir)
    try:
        run = Run(session_id=keeper.session_id, real_cli=spec.get("real_cli") or "claude",
                  end=EndOptions(spec.get("path"), frozenset(spec.get("fail_on") or ())), non_interactive=True)
        run.started = float(spec.get("started") or run.started)
        mark = spec.get("mark")
        run.mark = (mark[0], mark[1], mark[2]) if isinstance(mark, list) and len(mark) == 3 else None
        report = run.build(0)
        report["background"] = {"short_id": keeper.short_id, "cli_pid": keeper.pid}
        report["fail_on"] = fail_on_hits(report["counts"], report["calls"], run.end.fail_on)
        write_report_file(str(spec["path"]), report)
    except Exception as exc:  # noqa: BLE001 - a report must not keep the session registered

        print(f"claudeguard service: --guard-report of {keeper.session_id}: {exc}", file=sys.stderr, flush=True)
    finally:
        session_log.set(None)
