"""``LocalSource``: the desk's data source over this user's runtime dir and log dir, as the
commands see them (``CLAUDEGUARD_RUNTIME_DIR``, ``CLAUDEGUARD_LOG_DIR``).

Requests come from the channel (``list_pending``) and are answered through it, as
``claudeguardctl approve`` answers (``commands.answer.answer_request``: ``forever`` writes the rule
with tomlkit, comments kept); sessions from the status files (``list_sessions``); the audit log and
``audit --suggest``'s rules from the log (``commands.audit_suggest``). Every change made here is
also one audit line with its provenance (``event``: ``desk-answer``, ``desk-stop``,
``desk-apply``), until the answer path records who answered in the decision row itself.

Changes are noticed without polling the data: a console doorbell in the channel wakes
``wait_change`` the moment a request is posted, and a few ``stat`` calls a tick (the channel and
sessions directories, each ``status.json``, the audit log) catch answers, ends and watchdog
updates.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

from claudeguard.channel import Doorbell, list_pending
from claudeguard.channel.audit import audit_path, read_events, record
from claudeguard.channel.model import DECISIONS, SCOPES, is_id_text
from claudeguard.commands.answer import answer_request, gone_line
from claudeguard.commands.audit_suggest import as_json, asked_calls, suggest
from claudeguard.config.write import add_rules, existing_rules
from claudeguard.desk.views import forever_rules
from claudeguard.errors import GuardError, NotFoundError, NotPending, UsageError
from claudeguard.paths import runtime_dir, runtime_root, user_config_file
from claudeguard.procs import process_start
from claudeguard.watchdog.sampler import kill_tree
from claudeguard.watchdog.status import list_sessions, read_status

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from claudeguard.channel.model import Request
    from claudeguard.desk.source import AnswerResult, Decision, FleetView, Provenance, RequestItem, Scope

RELIST_S = 30.0  # the channel is listed again at least this often (its listing is also its cleanup)
TICK_S = 0.25  # how often wait_change looks at the files' times (a doorbell wakes it sooner)
STOP_GRACE_S = 3.0  # SIGTERM, then SIGKILL what is left of a stopped session's tree
STOPPABLE = ("stalled",)


def provenance_text(by: Provenance) -> str:
    """``by`` as the channel's one-line ``by`` field (at most 200 characters)."""
    return json.dumps(by, separators=(",", ":"), sort_keys=True)


class LocalSource:
    """See the module docstring. ``config_file``: where ``forever`` and applied suggestions
    write (default: the user config file, as ``approve --scope forever``)."""

    def __init__(self, *, config_file: str | None = None, machine: str | None = None,
                 stopper: Callable[[str, str], int | None] | None = None,
                 fleet: Callable[[], FleetView | None] | None = None) -> None:
        self.machine = machine or socket.gethostname()
        self._config_file = config_file
        # The guard service's way to stop a session it watches: its launcher kills the CLI as on
        # a ``kill`` verdict and exits 124 (``service.watch.stop``): the CLI's pid, or None (then
        # the CLI's tree is killed from here).
        self._stopper = stopper
        # The fleet, when the guard service has a link to one (None: this machine only).
        self._fleet = fleet
        self._lock = threading.Lock()
        self._bell: Doorbell | None = None
        self._fingerprint: tuple[Any, ...] | None = None
        self._audit_cache: tuple[tuple[int, int, int], list[dict[str, Any]]] | None = None
        self._requests_cache: tuple[Any, float, list[RequestItem], list[int]] | None = None

    # -- requests -----------------------------------------------------------------------------

    def config_file(self) -> Path:
        if self._config_file:
            return Path(self._config_file)

        return user_config_file()

    def requests(self) -> list[RequestItem]:
        """The channel listed again only when its directory changed, a waiter is gone, a
        deadline passed or ``RELIST_S`` went by (listing 200 requests costs ~10 ms); otherwise
        the same list object as last time (the desk then keeps the JSON it made of it)."""
        root = str(runtime_root())
        key = (_stamp(os.path.join(root, "channel")), _stamp(os.path.join(root, "sessions")))
        now = time.time()
        with self._lock:
            cached = self._requests_cache
        if (cached is not None and key[0] is not None and cached[0] == key and now - cached[1] < RELIST_S
                and all(_pid_alive(pid) for pid in cached[3]) and all(r["deadline"] > now for r in cached[2])):
            return cached[2]
        pending = list_pending()
        by_session = {row.get("session_id"): row for row in self._sessions_quiet()} if pending else {}
        target = str(self.config_file())
        items = [self._item(req, by_session.get(req.session_id) or {}, target) for req in pending]
        with self._lock:
            self._requests_cache = (key, now, items, [req.pid for req in pending])
        return items

    def _item(self, req: Request, session: dict[str, Any], target: str) -> RequestItem:
        extra = req.extra or {}
        short = extra.get("cli_short_id") or session.get("short_id")
        return {
            "id": req.id, "session_id": req.session_id, "machine": self.machine, "local": True,
            "agent_type": req.agent_type, "agent_id": req.agent_id,
            "background": bool(short or session.get("background") or extra.get("background")),
            "kind": req.kind, "choices": req.choices, "tool": req.tool, "input": req.input,
            "summary": req.summary, "cwd": req.cwd, "created": req.created, "deadline": req.deadline,
            "prompt": session.get("prompt"), "rule": extra.get("rule"), "rule_source": extra.get("rule_source"),
            "short_id": short, "forever_file": target,
        }

    def fleet_requests(self) -> list[RequestItem] | None:
        fleet = self._fleet() if self._fleet is not None else None
        return fleet.requests() if fleet is not None else None

    def answer_remote(self, machine: str, request_id: str, decision: Decision, scope: Scope, message: str | None,
                      choice: str | None, answered_by: Provenance) -> AnswerResult:
        fleet = self._fleet() if self._fleet is not None else None
        if fleet is None:
            raise GuardError(f"{str(request_id)[:40]}: a request of {str(machine)[:60]}, and this desk has no fleet")
        if decision not in DECISIONS or scope not in SCOPES or scope == "forever":
            raise UsageError(f"answer {decision!r} {scope!r}: another machine's request is answered once, for this "
                             "agent or for this session, never forever")
        if decision == "deny" and scope != "once":
            raise UsageError("a deny from the desk is for this call only (scope once)")
        result = fleet.answer(machine, request_id, decision, scope, message, choice, answered_by)
        self._audit({"event": "desk-answer", "request_id": request_id, "machine": machine, "decision": decision,
                     "scope": scope, "message": message, "answered_by": dict(answered_by), **answered_by})
        return result

    def answer(self, request_id: str, decision: Decision, scope: Scope, message: str | None,
               choice: str | None, answered_by: Provenance) -> AnswerResult:
        if decision not in DECISIONS or scope not in SCOPES:
            raise UsageError(f"answer {decision!r} {scope!r}: expected allow|deny and once|agent|session|forever")
        if decision == "deny" and scope != "once":
            raise UsageError("a deny from the desk is for this call only (scope once)")
        request = self._find(request_id)
        rules: list[str] = []
        target: str | None = None
        if scope != "once":
            rules = forever_rules(request.tool, request.input, request.cwd)
        if scope == "forever":
            target = str(self.config_file())
        row = {"event": "desk-answer", "request_id": request.id, "session_id": request.session_id,
               "agent_type": request.agent_type, "tool": request.tool, "summary": request.summary,
               "decision": decision, "scope": scope, "rules": rules, "file": target, "message": message,
               "answered_by": dict(answered_by), **answered_by}
        try:
            answer_request(request.id, decision, scope=scope, message=message, file=target,
                           by=provenance_text(answered_by), quiet=True, choice=choice, vouched=dict(answered_by))
        except GuardError as exc:
            if not any(r.id == request.id for r in _pending_quiet()):
                # answered, but what came after failed (a forever rule not written): still the desk's answer
                self._audit(dict(row, error=str(exc)))
            raise
        word = "approved" if decision == "allow" else "denied"
        self._audit(row)
        line = f"{request.id} {word} ({scope})" + (f": {', '.join(rules)}" if rules else "")
        if target:
            line += f" written to [permissions].{decision} in {target}"
        return {"line": line, "rules": rules, "file": target}

    def _find(self, request_id: str) -> Request:
        if not (isinstance(request_id, str) and len(request_id) == 16 and is_id_text(request_id)):
            raise NotFoundError(f"{str(request_id)[:40]!r}: not a request id")
        for req in list_pending():
            if req.id == request_id:
                return req
        raise NotFoundError(gone_line(NotPending("no such pending request", request_id)))  # what became of it

    # -- sessions -----------------------------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        return list_sessions()

    def _sessions_quiet(self) -> list[dict[str, Any]]:
        try:
            return self.sessions()
        except GuardError:
            return []

    def stop_session(self, session_id: str, answered_by: Provenance) -> str:
        if not isinstance(session_id, str) or not session_id or "/" in session_id or session_id.startswith("."):
            raise NotFoundError(f"{str(session_id)[:40]!r}: not a session id")
        path = runtime_dir("sessions") / session_id
        status = read_status(path) if path.is_dir() and not path.is_symlink() else None
        if status is None:
            raise NotFoundError(f"{session_id}: no such guarded session")
        state = status.get("state")
        if state not in STOPPABLE and not status.get("stalled"):
            raise UsageError(f"{session_id}: {state}, not stalled; only a stalled session is stopped from the desk")
        child, start = status.get("child_pid"), status.get("child_start")
        actual = process_start(child) if isinstance(child, int) else None
        if not isinstance(child, int) or actual is None or (start is not None and actual != start):
            raise NotFoundError(f"{session_id}: its CLI is no longer running")

        why = f"stopped from the desk ({answered_by['browser_session']}): {status.get('diagnosis') or state}"
        told = self._stopper(session_id, why) if self._stopper is not None else None
        if told is not None:
            self._audit({"event": "desk-stop", "session_id": session_id, "decision": "stop", "state": state,
                         "summary": status.get("diagnosis"), "child_pid": told, "by_launcher": True, **answered_by})
            return f"{session_id}: its launcher stops its CLI (pid {told}) and exits 124"
        killed = kill_tree(child, STOP_GRACE_S)
        self._audit({"event": "desk-stop", "session_id": session_id, "decision": "stop", "state": state,
                     "summary": status.get("diagnosis"), "child_pid": child, "sigkill": killed, **answered_by})
        return f"{session_id}: stopped its CLI (pid {child})" + (f", {len(killed)} killed" if killed else "")

    # -- the audit log -------------------------------------------------------------------------

    def audit_rows(self) -> list[dict[str, Any]]:
        path = audit_path()
        try:
            st = os.stat(path)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            return []
        with self._lock:
            if self._audit_cache is not None and self._audit_cache[0] == key:
                return self._audit_cache[1]
        rows = list(read_events())
        with self._lock:
            self._audit_cache = (key, rows)
        return rows

    def _audit(self, event: dict[str, Any]) -> None:
        record(event)

    def suggestions(self, since_s: float | None) -> dict[str, Any]:
        target = self.config_file()
        try:
            present = existing_rules(target)
        except GuardError:
            present = set()
        since = time.time() - since_s if since_s is not None else None
        calls = asked_calls(self.audit_rows(), since=since)
        found = suggest(calls, present)
        out = as_json(found)
        notes = {st.rule: st.note() for st in (*found.allow, *found.deny)}
        for kind in ("allow", "deny"):
            for row in out[kind]:
                row["note"] = notes.get(row["rule"], "")
                row["preview"] = _preview(calls, {row["rule"]})
        for row in out["broader"]:
            row["preview"] = _preview(calls, set(row["covers"]))
        out["file"] = str(target)
        return out

    def apply_suggestion(self, rule: str, kind: Decision, since_s: float | None, answered_by: Provenance) -> str:
        found = self.suggestions(since_s)
        offered = {r["rule"]: r.get("note") or "" for r in found.get(kind, [])}
        if kind == "allow":
            offered.update({b["rule"]: f"covers {len(b['covers'])} asked commands, {b['calls']} calls"
                            for b in found.get("broader", [])})
        if not isinstance(rule, str) or rule not in offered:
            raise NotFoundError(f"{str(rule)[:200]}: not a suggested {kind} rule (any more)")
        target = self.config_file()
        added = add_rules(target, {kind: [(rule, offered[rule] or "applied from the desk")]})
        self._audit({"event": "desk-apply", "decision": kind, "rule": rule, "file": str(target), **answered_by})
        if not added.get(kind):
            return f"{rule} is already in {target}"
        return f"{rule} added to [permissions].{kind} in {target}"

    # -- change notices --------------------------------------------------------------------------

    def wait_change(self, timeout: float) -> bool:
        end = time.monotonic() + max(0.0, timeout)
        while True:
            rang = self._wait_bell(min(TICK_S, max(0.0, end - time.monotonic())))
            now = self._stat_fingerprint()
            with self._lock:
                changed = rang or now != self._fingerprint
                self._fingerprint = now
            if changed:
                return True
            if time.monotonic() >= end:
                return False

    def _wait_bell(self, timeout: float) -> bool:
        if self._bell is None:
            try:
                bell = Doorbell()
                bell.__enter__()
                self._bell = bell
            except (GuardError, OSError):
                time.sleep(timeout)  # no channel yet (or a broken one): the stats still tell
                return False
        try:
            return self._bell.wait(timeout)
        except OSError:
            self._drop_bell()
            return True

    def _drop_bell(self) -> None:
        bell, self._bell = self._bell, None
        if bell is not None:
            try:
                bell.__exit__(None, None, None)
            except OSError:
                pass

    def _stat_fingerprint(self) -> tuple[Any, ...]:
        root = str(runtime_root())
        fleet = self._fleet() if self._fleet is not None else None
        out: list[Any] = [fleet.version() if fleet is not None else None]
        for path in (os.path.join(root, "channel"), os.path.join(root, "sessions"), str(audit_path())):
            out.append(_stamp(path))
        try:
            with os.scandir(os.path.join(root, "sessions")) as entries:
                for entry in entries:
                    out.append((entry.name, _stamp(os.path.join(entry.path, "status.json"))))
        except OSError:
            pass
        return tuple(out)

    def close(self) -> None:
        self._drop_bell()


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _pending_quiet() -> list[Request]:
    try:
        return list_pending()
    except GuardError:
        return []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # another user's pid: not our waiter any more, but listing will tell
    return True


def _preview(calls: list[dict[str, Any]], rules: set[str], limit: int = 20) -> list[dict[str, Any]]:
    """The past asked calls (newest first) among whose narrowest rules one of ``rules`` is: the
    calls the suggested rule would have decided."""
    out = []
    for event in reversed(calls):
        if rules & set(event.get("rules") or []):
            out.append({key: event.get(key) for key in ("time", "session_id", "agent_type", "tool", "summary",
                                                         "decision", "decided_by")})
            if len(out) >= limit:
                break
    return out
