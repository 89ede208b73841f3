"""Sessions dispatched from a guarded agent view (``claudeguard agents``, 2.1.330), kept by the
service for their whole life, each like a ``--bg`` session (``service/background.py``).

Agent view passes its ``--settings`` to every session it dispatches (recorded in the job's
``respawnFlags``), so all of them post their hooks to one guard session: the **view**, whose
``background.json`` names the agent view's process and the settings file. The service splits
them by the CLI's own session id (the ``session_id`` of every hook event): each dispatched
session gets a **child** guard session ``<view id>-<first 8 of the CLI's session id>``, with
its own dir, snapshot (the view's policy), requests, grants, audit rows and events, and a
background keeper that finds its process and runs the watchdog on it alone (``ps`` lists it
with the CLI's short id). A child is made at the session's first hook, or earlier when the
view's keeper sees a live session whose job names the view's settings file.

The view ends (dropped, its dir and any child's dir removed) once the agent view has exited
and no child is left, ``END_GRACE_S`` after the last of the two. A restarted service adopts
the view from its ``background.json``; its children are made again from the CLI's records.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field

from claudeguard.files import write_atomic
from claudeguard.paths import private_dir
from claudeguard.service.background import RECORD, Keeper, keep, live_records
from claudeguard.procs import process_start

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable

    from claudeguard.gate.session import Session, Snapshot
    from claudeguard.service.background import BackgroundRecord
    from claudeguard.service.protocol import Done, Failed, WatchSettings
    from claudeguard.service.registry import Registered, Registry, Shown

END_GRACE_S = 5.0  # after agent view exits: a session it just dispatched may not be recorded yet
POLL_S = 0.5
_CLI_SESSION = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")


@dataclass
class View:
    session_id: str
    directory: str
    token: str
    config_dir: str
    settings: str  # the guard's settings file: what every dispatched session's job names
    pid: int | None
    start: str | None
    watch: WatchSettings
    children: dict[str, str] = field(default_factory=dict)  # CLI session id -> child session id
    mine: dict[str, str | None] = field(default_factory=dict)  # CLI session id -> job intent (its prompt)
    read_jobs: set[str] = field(default_factory=set)  # job dirs whose state.json was read
    strangers: set[str] = field(default_factory=set)  # CLI sessions not dispatched here (said once each)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def session_for(self, service: Registry, reg: Registered, body: bytes) -> Session:
        """The child of the event's CLI session (``session_for`` below)."""
        return session_for(service, self, reg, body)

    def shown(self) -> Shown:
        return {"short_id": None, "cli_pid": self.pid}  # agent view's own process


def child_id(view: str, cli_session: str) -> str:
    return f"{view}-{cli_session[:8]}"


def session_for(service: Registry, view: View, reg: Registered, body: bytes) -> Session:
    """The guard session a hook event posted to the view ``reg`` belongs to: the child of the
    event's CLI session (made if new). A body without a usable session id is decided by the
    view itself (same policy; the event is not lost, only not split out)."""
    try:
        data = json.loads(body)
        cli, event = data.get("session_id"), data.get("hook_event_name")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return reg.session
    if not isinstance(cli, str) or not _CLI_SESSION.fullmatch(cli):
        return reg.session
    with view.lock:
        known = cli in view.children or cli in view.mine
        if not known:
            _scan_jobs(view)  # its job is recorded at dispatch, before the session starts
            known = cli in view.mine
            if not known and cli not in view.strangers:
                view.strangers.add(cli)
                print(f"claudeguard service: agent view {view.session_id}: {str(event)[:40]} of CLI session {cli}, "
                      f"which it did not "
                      "dispatch, is decided by the view itself", file=sys.stderr, flush=True)
    if not known:
        return reg.session
    child = ensure_child(service, view, reg, cli)
    return child.session if child is not None else reg.session


def ensure_child(service: Registry, view: View, parent: Registered, cli: str,
                 prompt: str | None = None) -> Registered | None:
    """The child guard session of dispatched CLI session ``cli``: registered with the service
    and kept (``background.keep``) until its process ends."""
    with view.lock:
        sid = view.children.get(cli)
        if sid is not None:
            with service.lock:
                reg = service.sessions.get(sid)
            if reg is not None:
                return reg
        sid = child_id(view.session_id, cli)
        directory = os.path.join(os.path.dirname(view.directory), sid)
        snapshot: Snapshot = {**parent.session.snapshot, "session_id": sid, "kind": "background",
                              "agent_view": view.session_id, "pty": False}  # no screen of ours: its hooks post as usual
        prompt = prompt or view.mine.get(cli)
        try:
            private_dir(directory)
            write_atomic(directory + "/session.json", json.dumps(snapshot))
            write_atomic(directory + "/" + RECORD, json.dumps(
                {"token": view.token, "config_dir": view.config_dir, "watch": view.watch, "prompt": prompt,
                 "cli_session": cli, "agent_view": None, "parent": view.session_id}))
        except OSError:
            return None
        reply = service.register({"session_id": sid, "dir": directory, "token": view.token, "kind": "background"}, None)
        if not reply.get("ok"):
            return None
        with service.lock:
            reg = service.sessions.get(sid)
        if reg is None:
            return None
        keeper = Keeper(sid, directory, "", view.config_dir, view.watch, prompt=prompt, cwd=snapshot.get("cwd"),
                        log_dir=snapshot.get("log_dir"), cli_session=cli, parent=view.session_id)
        reg.keeper = keeper
        view.children[cli] = sid

    def ended() -> None:
        with view.lock:
            if view.children.get(cli) == sid:
                del view.children[cli]
            service.forget(sid, keeper)

    threading.Thread(target=keep, args=(keeper, ended), name=f"claudeguard-av-{sid}", daemon=True).start()
    return reg


def _scan_jobs(view: View) -> None:
    """Note the jobs that name the view's settings file (each job dir is read once, when its
    ``state.json`` has appeared: agent view records the flags at dispatch)."""
    root = os.path.join(view.config_dir, "jobs")
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if name in view.read_jobs:
            continue
        try:
            with open(os.path.join(root, name, "state.json")) as fh:
                state = json.load(fh)
        except (OSError, ValueError):
            continue  # not written yet (or a spare's dir, which never gets one)
        view.read_jobs.add(name)
        flags = state.get("respawnFlags") if isinstance(state, dict) else None
        words = [str(f) for f in flags] if isinstance(flags, list) else []
        if view.settings in words or f"--settings={view.settings}" in words:
            cli = state.get("sessionId")
            if isinstance(cli, str) and _CLI_SESSION.fullmatch(cli):
                view.mine[cli] = str(state.get("intent") or "") or None


def _live_sessions(config_dir: str) -> set[str]:
    """The CLI session ids of live session processes (``sessions/<pid>.json``, start checked)."""
    return {cli for rec, _ in live_records(config_dir) if isinstance(cli := rec.get("sessionId"), str)}


def keep_view(service: Registry, view: View, on_end: Callable[[], None]) -> None:
    """The view's keeper thread: makes a child for every live dispatched session it finds,
    and ends the view when agent view is gone and no child is left."""
    gone_at: float | None = None
    while not view.stop.wait(POLL_S):
        try:
            with view.lock:
                _scan_jobs(view)
            with service.lock:
                parent = service.sessions.get(view.session_id)
            if parent is not None and view.mine:
                with view.lock:
                    waiting = [cli for cli in view.mine if cli not in view.children]
                live = _live_sessions(view.config_dir) if waiting else set()
                for cli in waiting:
                    if cli in live:
                        ensure_child(service, view, parent, cli)
        except Exception as exc:  # noqa: BLE001 - the keeper must go on; said once in the log
            print(f"claudeguard service: agent view {view.session_id}: {exc}", file=sys.stderr, flush=True)
        if view.pid is not None and process_start(view.pid) == view.start:
            gone_at = None
            continue
        with view.lock:
            busy = bool(view.children)
        if busy:
            gone_at = None
            continue
        gone_at = gone_at if gone_at is not None else time.monotonic()
        if time.monotonic() - gone_at >= END_GRACE_S:
            break
    if not view.stop.is_set():  # agent view and its sessions ended (not the service): forget it

        on_end()
        root = os.path.dirname(view.directory)
        try:
            leftovers = [n for n in os.listdir(root) if n.startswith(view.session_id + "-")]
        except OSError:
            leftovers = []
        for name in leftovers:  # children of an earlier service whose sessions had ended
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        shutil.rmtree(view.directory, ignore_errors=True)


def start(service: Registry, session_id: str, reg: Registered, record: BackgroundRecord) -> Done | Failed:
    """``attach`` of a view: its keeper thread starts."""
    spec = record.get("agent_view") or {}
    settings = spec.get("settings") if isinstance(spec, dict) else None
    if not isinstance(settings, str):
        return {"ok": False, "error": "background.json: agent_view has no settings file"}
    if isinstance(reg.keeper, View):
        return {"ok": True}
    if reg.session.dir is None:
        return {"ok": False, "error": "agent view's session has no directory"}
    pid = spec.get("pid")
    view = View(session_id, reg.session.dir, reg.token, str(record.get("config_dir") or ""), settings,
                pid if isinstance(pid, int) else None, spec.get("start"), record.get("watch") or {})
    reg.keeper = view
    threading.Thread(target=keep_view, args=(service, view, lambda: service.forget(session_id, view)),
                     name=f"claudeguard-av-{session_id}", daemon=True).start()
    return {"ok": True}
