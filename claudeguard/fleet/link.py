"""The owning machine's side of the fleet: ``FleetLink``, owned by the service.

The service tells it what happens and never waits on it: ``request_posted(view)`` when a
request starts waiting in the channel, ``request_done(id, done)`` when its wait ended (answered
here or from afar, timed out, withdrawn), ``heartbeat(sessions)`` with its sessions' state.
Each only takes a lock and wakes a thread. Two threads of the link's own do the rest:

- ``claudeguard-fleet-pub`` mirrors the waiting requests into ``m:<machine>:reqs``, how they
  ended into ``m:<machine>:done``, the verdicts on answers into ``m:<machine>:results``, and
  the heartbeat (``m:<machine>:hb``, with a TTL); after any failure it reconnects with a backoff
  and publishes everything again, and it notices a Redis that lost its data (the heartbeat's
  ``SET ... GET`` finds no previous value) the same way;
- ``claudeguard-fleet-inbox`` blocks in ``XREAD`` on the answer streams addressed to this
  machine (``a:<machine>:<acl user>``, found through ``ax:<machine>`` and ``bell:<machine>``)
  and hands each valid answer to ``apply_answer(request_id, fields, answered_by)``, the owner's
  one place that applies an answer (the channel's answer path): the first answer the channel
  takes wins, local or remote, and the link publishes the verdict for every answer it read.

Redis is never in a call's way: the calls wait in the channel, with their own deadlines, and
local answers go there directly; the link only mirrors. docs/design.md ("The fleet") has the
whole protocol.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time

from claudeguard.channel import audit
from claudeguard.channel.answers import answer
from claudeguard.errors import GuardError, NotFoundError
from claudeguard.fleet.conn import FAILURES, connect, describe_failure
from claudeguard.fleet.keys import Keys, is_user
from claudeguard.fleet.model import VERSION, by_text, clock, describe_done, ref_of, user_name, who

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Literal

    from claudeguard.fleet.config import FleetConfig
    from claudeguard.fleet.conn import Conn
    from claudeguard.fleet.model import (
        AnsweredBy, AnswerFields, ApplyAnswer, Done, LinkStatus, Outcome, RequestView, Verdict,
    )

HEARTBEAT_S = 2.0  # how often the heartbeat goes out (and a lost database is noticed)
HEARTBEAT_LIVES = 5  # a machine whose heartbeat is this many intervals old is gone (10 s); its requests with it
BLOCK_MS = 1000  # the inbox's XREAD BLOCK: how soon it notices stop() and new answer streams at worst
IO_TIMEOUT_S = 3.0  # every command's bound (above BLOCK_MS)
RESYNC_S = 30.0  # everything is published again this often, whatever happened
REFRESH_S = 30.0  # the inbox reads the approvers' index this often besides the bell
DONE_KEEP_S = 600.0  # how long an ended request's outcome stays for "already answered by ..."
LOSER_WAIT_S = 5.0  # an answer the channel refused waits this long for request_done to name the winner
STALE_MS = 120_000  # an answer past its validity by this much gets no verdict (its sender is gone)
MACHINES_KEEP_S = 86400.0  # a machine not heard of for a day leaves the machines zset
RESULTS_MAXLEN = 1000
BACKOFF_MAX_S = 5.0
EXPIRED_GRACE_S = 60.0  # a request the service never reported done is dropped this long past its deadline
SESSION_KEYS = ("session_id", "pid", "state", "base_state", "stalled", "diagnosis", "pending", "cwd", "cpu_s",
                "tokens", "last_activity_s", "prompt", "cli_short_id", "guarded", "interactive")
SESSIONS_MAX = 200
# what an answer from another machine may say (forever is refused: it would write this machine's config)
REMOTE_SCOPES: dict[object, Literal["once", "agent", "session"]] = {"once": "once", "agent": "agent",
                                                                    "session": "session"}
DECISIONS: dict[object, Literal["allow", "deny"]] = {"allow": "allow", "deny": "deny"}


def forever_refusal(machine: str) -> str:
    return (f"--scope forever cannot be given from another machine: it would write {machine}'s config from afar; "
            f"answer with --scope session, or on {machine} itself")


class Outgoing:
    """What this machine publishes: the requests waiting (what ``m:<machine>:reqs`` must hold),
    those ended (kept ``DONE_KEEP_S``), which changed since the last publish, the verdicts on
    answers, the sessions, and whether everything is to be published again."""

    __slots__ = ("requests", "done", "dirty", "verdicts", "sessions", "resync")

    def __init__(self) -> None:
        self.requests: dict[str, RequestView] = {}
        self.done: dict[str, Done] = {}
        self.dirty: set[str] = set()  # request ids
        self.verdicts: list[Verdict] = []
        self.sessions: list[dict[str, Any]] = []
        self.resync = True


class AnswerBook:
    """The fleet's answers this machine has seen: those that lost (told so, until they give up),
    the one the channel took per request, and each answer's validity (every one is read once)."""

    __slots__ = ("losers", "applied", "processed")

    def __init__(self) -> None:
        self.losers: dict[str, list[tuple[str, float, str]]] = {}  # id -> [(answer ref, give up at, reason)]
        self.applied: dict[str, AnsweredBy] = {}  # id -> the fleet answer the channel took
        self.processed: dict[str, int] = {}  # answer ref -> its valid_until_ms


class FleetLink:
    """One machine's link to the fleet (see the module docstring). ``start()`` starts its two
    threads, ``stop()`` ends them and takes this machine's requests and heartbeat down."""

    def __init__(self, cfg: FleetConfig, apply_answer: ApplyAnswer, *, heartbeat_s: float = HEARTBEAT_S,
                 audit: bool = True) -> None:
        self.cfg = cfg
        self.machine = cfg.machine
        self.keys = Keys(cfg.prefix)
        self._apply = apply_answer
        self._heartbeat_s = heartbeat_s
        self._ttl = max(2, math.ceil(heartbeat_s * HEARTBEAT_LIVES))  # seconds, for EXPIRE
        self._audit_on = audit
        self._user = user_name()  # once: a lookup (NSS, LDAP) never runs under the lock the service takes
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.pub = Outgoing()  # what the pub thread publishes (under _lock)
        self.book = AnswerBook()  # the fleet answers seen (under _lock)
        self._threads: list[threading.Thread] = []
        self.connected = {"pub": False, "inbox": False}
        self.last_error: str | None = None
        self.counts = {"applied": 0, "refused": 0, "connects": 0, "failures": 0}

    # -- the service's side ----------------------------------------------------------------------

    def start(self) -> None:
        for name, target in (("pub", self._pub_loop), ("inbox", self._inbox_loop)):
            thread = threading.Thread(target=target, name=f"claudeguard-fleet-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = IO_TIMEOUT_S + 1) -> None:
        """End both threads (each within BLOCK_MS or a command's IO_TIMEOUT_S); the pub thread
        first takes this machine's requests and heartbeat out of Redis (best effort)."""
        self._stop.set()
        self._wake.set()
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))

    def request_posted(self, view: RequestView) -> None:
        """A request started waiting in the channel (``model.request_view`` of its Request)."""
        with self._lock:
            self.pub.requests[view["id"]] = view
            self.pub.dirty.add(view["id"])
        self._wake.set()

    def request_done(self, request_id: str, done: Done) -> None:
        """Its wait ended (``model.done_from_answer`` of the Answer the call got). Answers that
        lost to it are told who won."""
        done = dict(done)  # type: ignore[assignment]  # a copy of the same TypedDict
        done.setdefault("at", time.time())
        with self._lock:
            self.pub.requests.pop(request_id, None)
            self.pub.done[request_id] = done
            self.pub.dirty.add(request_id)
            for ref, _, _ in self.book.losers.pop(request_id, []):
                self.pub.verdicts.append(self._lost_verdict(request_id, ref, done))
        self._wake.set()

    def heartbeat(self, sessions: list[dict[str, Any]]) -> None:
        """This machine's sessions now (``ps --json`` rows; only SESSION_KEYS are published).
        Published with the next heartbeat."""
        rows = []
        for row in sessions[:SESSIONS_MAX]:
            rows.append({k: (v[:300] if isinstance(v, str) else v) for k, v in row.items() if k in SESSION_KEYS})
        with self._lock:
            self.pub.sessions = rows

    def status(self) -> LinkStatus:
        """For ``service status`` and ``doctor``: connected, the last failure, counts."""
        with self._lock:
            pending = len(self.pub.requests)
        counts = self.counts
        return {"machine": self.machine, "redis": self.cfg.describe(), "connected": dict(self.connected),
                "last_error": self.last_error, "pending": pending, "applied": counts["applied"],
                "refused": counts["refused"], "connects": counts["connects"], "failures": counts["failures"]}

    # -- publishing --------------------------------------------------------------------------------

    def _pub_loop(self) -> None:
        conn: Conn | None = None
        retry_at = next_beat = next_resync = 0.0
        backoff = 0.0
        while True:
            now = time.monotonic()
            self._wake.wait(max(0.0, (retry_at if conn is None else next_beat) - now))
            self._wake.clear()
            if self._stop.is_set():
                break
            self._expire_losers()
            if conn is None:
                if time.monotonic() < retry_at:
                    continue
                try:
                    conn = connect(self.cfg, io_timeout=IO_TIMEOUT_S)
                    conn.ping()
                except Exception as exc:  # noqa: BLE001 - Redis down, a credential unreadable: retried alike
                    self._failed("pub", exc, conn)
                    conn = None
                    backoff = min(max(0.25, backoff * 2), BACKOFF_MAX_S)
                    retry_at = time.monotonic() + backoff
                    continue
                next_beat = 0.0
                self._connected("pub")
                with self._lock:
                    self.pub.resync = True
            try:
                now = time.monotonic()
                if now >= next_beat:
                    self._beat(conn)
                    next_beat = now + self._heartbeat_s
                if now >= next_resync:
                    next_resync = now + RESYNC_S
                    with self._lock:
                        self.pub.resync = True
                self._flush(conn)
                backoff = 0.0  # the backoff grows until a round goes through (NOPERM after a good PING too)
            except Exception as exc:  # noqa: BLE001 - Redis's failures, and a bug must not end the thread either
                self._failed("pub", exc, conn)
                conn = None
                backoff = min(max(0.25, backoff * 2), BACKOFF_MAX_S)
                retry_at = time.monotonic() + backoff
        if conn is not None:
            try:  # a clean stop: nothing of ours stays listed; ps shows the machine gone at once
                conn.delete(self.keys.requests(self.machine), self.keys.heartbeat(self.machine))
            except FAILURES:
                pass
            conn.close()

    def _beat(self, conn: Conn) -> None:
        with self._lock:
            payload = {"v": VERSION, "machine": self.machine, "uid": os.getuid(), "user": self._user,
                       "pid": os.getpid(), "time": time.time(), "interval_s": self._heartbeat_s,
                       "pending": len(self.pub.requests), "sessions": list(self.pub.sessions)}
        ttl = self._ttl
        pipe = conn.pipeline(transaction=False)
        pipe.set(self.keys.heartbeat(self.machine), json.dumps(payload, default=str), ex=ttl, get=True)
        pipe.zadd(self.keys.machines(), {self.machine: time.time()})
        pipe.zremrangebyscore(self.keys.machines(), "-inf", time.time() - MACHINES_KEEP_S)
        for key in (self.keys.requests(self.machine), self.keys.done(self.machine), self.keys.results(self.machine)):
            pipe.expire(key, ttl)
        previous = pipe.execute()[0]
        if previous is None:  # first beat, expired, or the database was emptied: publish everything
            with self._lock:
                self.pub.resync = True

    def _flush(self, conn: Conn) -> None:
        now = time.time()
        with self._lock:
            self._drop_stale(now)
            resync, self.pub.resync = self.pub.resync, False
            dirty, self.pub.dirty = self.pub.dirty, set()
            verdicts, self.pub.verdicts = self.pub.verdicts, []
            if resync:
                views = dict(self.pub.requests)
                ended = dict(self.pub.done)
            else:
                pub = self.pub
                views = {rid: pub.requests[rid] for rid in dirty if rid in pub.requests}
                ended = {rid: pub.done[rid] for rid in dirty if rid in pub.done and rid not in pub.requests}
        if not (resync or views or ended or verdicts):
            return
        reqs, done, results = (self.keys.requests(self.machine), self.keys.done(self.machine),
                               self.keys.results(self.machine))
        ttl = self._ttl
        try:
            pipe = conn.pipeline(transaction=True)  # a lister never sees a half-made state
            if resync:
                pipe.delete(reqs, done)
            elif ended:
                pipe.hdel(reqs, *ended)
            if views:
                pipe.hset(reqs, mapping={rid: json.dumps(view, default=str) for rid, view in views.items()})
            if ended:
                pipe.hset(done, mapping={rid: json.dumps(d, default=str) for rid, d in ended.items()})
            for verdict in verdicts:
                pipe.xadd(results, {"r": json.dumps(verdict, default=str)}, maxlen=RESULTS_MAXLEN, approximate=True)
            for key in (reqs, done, results):
                pipe.expire(key, ttl)
            pipe.execute()
        except BaseException:
            with self._lock:  # published again after the reconnect
                self.pub.dirty |= dirty
                self.pub.verdicts[:0] = verdicts
                self.pub.resync = self.pub.resync or resync
            raise

    def _drop_stale(self, now: float) -> None:
        """Under the lock: forget ended requests after DONE_KEEP_S, and treat a request the
        service never reported done, long past its deadline, as timed out."""
        late = [rid for rid, view in self.pub.requests.items() if view.get("deadline", now) + EXPIRED_GRACE_S < now]
        for rid in late:
            self.pub.requests.pop(rid)
            self.pub.done[rid] = {"status": "timeout", "at": now}
            self.pub.dirty.add(rid)
        for rid in [rid for rid, d in self.pub.done.items() if d.get("at", now) + DONE_KEEP_S < now]:
            self.pub.done.pop(rid)
            self.book.applied.pop(rid, None)

    # -- answers -------------------------------------------------------------------------------------

    def _inbox_loop(self) -> None:
        conn: Conn | None = None
        retry_at = next_refresh = backoff = 0.0
        streams: dict[str, str] = {}  # key -> last id read
        authors: dict[str, str] = {}  # answer stream key -> its ACL user (from the key: see keys.py)
        bell = self.keys.bell(self.machine)
        while not self._stop.is_set():
            if conn is None:
                if self._stop.wait(max(0.0, retry_at - time.monotonic())):
                    break
                try:
                    conn = connect(self.cfg, io_timeout=IO_TIMEOUT_S)
                    # Everything from the start: what was read before is in _processed, and a
                    # database that came back empty (or from another clock) has new ids.
                    streams, authors = {bell: "0-0"}, {}
                    self._refresh(conn, streams, authors)
                except Exception as exc:  # noqa: BLE001 - Redis down, a credential unreadable: retried alike
                    self._failed("inbox", exc, conn)
                    conn = None
                    backoff = min(max(0.25, backoff * 2), BACKOFF_MAX_S)
                    retry_at = time.monotonic() + backoff
                    continue
                next_refresh = time.monotonic() + REFRESH_S
                self._connected("inbox")
            try:
                reply = conn.xread(streams, count=100, block=BLOCK_MS)
                entries: list[tuple[str, str, dict[str, str]]] = []
                rang = False
                for key, items in reply or ():
                    for entry_id, fields in items:
                        streams[key] = entry_id
                        if key == bell:
                            rang = True
                        elif key in authors:
                            entries.append((entry_id, authors[key], fields))
                if rang or time.monotonic() >= next_refresh:
                    self._refresh(conn, streams, authors)
                    next_refresh = time.monotonic() + REFRESH_S
                if entries and not self._stop.is_set():
                    seconds, micros = conn.time()
                    now_ms = int(seconds) * 1000 + int(micros) // 1000
                    for entry_id, user, fields in sorted(entries, key=lambda e: _id_order(e[0])):
                        try:
                            self._take(user, entry_id, fields, now_ms)
                        except Exception as exc:  # noqa: BLE001 - one odd answer must not stop the others
                            self.book.processed.setdefault(f"{user}/{entry_id}", now_ms)
                            self._verdict(f"{user}/{entry_id}", None, False, f"refused: {describe_failure(exc)}")
                    self._forget_processed(now_ms)
                backoff = 0.0
            except Exception as exc:  # noqa: BLE001 - Redis's failures, and a bug must not end the thread either
                self._failed("inbox", exc, conn)
                conn = None
                backoff = min(max(0.25, backoff * 2), BACKOFF_MAX_S)
                retry_at = time.monotonic() + backoff
        if conn is not None:
            conn.close()

    def _refresh(self, conn: Conn, streams: dict[str, str], authors: dict[str, str]) -> None:
        """Read the approvers' index: one answer stream per ACL user name in it. The name only
        says where to look: a stream ``a:<machine>:<user>`` can be written by ``user`` alone."""
        for user in conn.smembers(self.keys.approvers(self.machine)):
            if is_user(user):
                key = self.keys.answers(self.machine, user)
                if key not in authors:
                    authors[key] = user
                    streams[key] = "0-0"

    def _take(self, user: str, entry_id: str, fields: dict[str, str], now_ms: int) -> None:
        """One answer from ``user``'s stream: check it, apply it, say what became of it."""
        ref = f"{user}/{entry_id}"
        if ref in self.book.processed:
            return
        try:
            answer = json.loads(fields.get("a") or "")
            if not isinstance(answer, dict):
                raise ValueError("not an object")
            valid_until = answer.get("valid_until_ms")
            if not isinstance(valid_until, int):
                raise ValueError("no valid_until_ms")
        except ValueError:
            self.book.processed[ref] = now_ms
            self._verdict(ref, None, False, "refused: unreadable answer")
            return
        self.book.processed[ref] = valid_until
        rid = answer.get("request_id")
        sender = answer.get("sender")
        if not isinstance(sender, dict):
            sender = {}
        uid, pid = sender.get("uid"), sender.get("pid")
        answered_by: AnsweredBy = {
            "via": "fleet", "acl_user": user, "machine": _text(sender.get("machine"), 64) or "?",
            "uid": uid if isinstance(uid, int) else None, "user": _text(sender.get("user"), 64),
            "pid": pid if isinstance(pid, int) else None, "ref": ref,
        }
        vouched = answer.get("vouched")
        if isinstance(vouched, dict) and vouched.get("via") == "desk":
            # answered on the sender's desk (its service relays it): the desk's provenance, a claim
            # under the ACL user like the sender's machine and uid
            answered_by["via"] = "desk"
            answered_by["browser_session"] = _text(vouched.get("browser_session"), 64) or "?"
        if now_ms > valid_until:
            if now_ms - valid_until <= STALE_MS:
                self._verdict(ref, rid, False, f"not applied: it reached {self.machine} after its validity "
                                               f"({clock(valid_until / 1000)})", answered_by)
            return
        refusal, fields_ok = self._check(answer, rid)
        if refusal is not None or fields_ok is None:
            self._verdict(ref, rid, False, refusal or "refused", answered_by)
            return
        assert isinstance(rid, str)
        try:
            outcome = self._apply(rid, fields_ok, answered_by)
        except Exception as exc:  # noqa: BLE001 - whether it took is then told by request_done
            outcome = {"applied": False, "reason": f"error while applying: {describe_failure(exc)}"}
        self._audit(rid, fields_ok, answered_by, outcome)
        if outcome.get("applied"):
            with self._lock:
                self.book.applied[rid] = answered_by
                self.counts["applied"] += 1
                self.pub.verdicts.append({"answer": ref, "request_id": rid, "applied": True, "message": "applied",
                                       "winner": who(answered_by, self.machine), "at": time.time()})
            self._wake.set()
            return
        with self._lock:
            self.counts["refused"] += 1
            done = self.pub.done.get(rid)
            if outcome.get("refused"):  # the answer itself was refused: the request still waits
                self.pub.verdicts.append({"answer": ref, "request_id": rid, "applied": False,
                                       "message": f"refused: {outcome.get('reason') or 'by the owner'}",
                                       "winner": None, "at": time.time()})
            elif done is not None:
                self.pub.verdicts.append(self._lost_verdict(rid, ref, done))
            elif outcome.get("winner"):
                self.pub.verdicts.append({"answer": ref, "request_id": rid, "applied": False,
                                          "winner": outcome["winner"],
                                          "message": f"already answered by {outcome['winner']} at "
                                                     f"{clock(outcome.get('at'))}", "at": time.time()})
            else:  # the channel said no: request_done will say who won (or LOSER_WAIT_S passes)
                reason = outcome.get("reason") or "not applied"
                self.book.losers.setdefault(rid, []).append((ref, time.monotonic() + LOSER_WAIT_S, reason))
        self._wake.set()

    def _check(self, answer: dict[str, Any], rid: object) -> tuple[str | None, AnswerFields | None]:
        """(refusal, None) or (None, what to apply)."""
        if answer.get("v") != VERSION:
            return f"refused: answer format {answer.get('v')!r}, this machine speaks {VERSION}", None
        if answer.get("machine") != self.machine:
            return f"refused: addressed to {answer.get('machine')!r}, not {self.machine}", None
        if not isinstance(rid, str):
            return "refused: no request id", None
        with self._lock:
            view = self.pub.requests.get(rid)
            done = self.pub.done.get(rid)
        if view is None:
            if done is not None:
                return describe_done(done, self.machine), None
            return f"no such pending request on {self.machine} (answered, expired or never existed)", None
        if answer.get("call_sha256") != view.get("call_sha256"):
            return (f"refused: its call_sha256 is not the one of the call waiting on {self.machine}: "
                    "approve exactly what was shown"), None
        decision, scope = DECISIONS.get(answer.get("decision")), REMOTE_SCOPES.get(answer.get("scope") or "once")
        if decision is None:
            return f"refused: decision {answer.get('decision')!r}", None
        if answer.get("scope") == "forever":
            return f"refused: {forever_refusal(self.machine)}", None
        if scope is None:
            return f"refused: scope {answer.get('scope')!r}", None
        choice = answer.get("choice")
        if view.get("kind") == "dialog":
            if choice is not None and choice not in (view.get("choices") or []):
                return f"refused: choice {choice!r} is not one of {view.get('choices')}", None
        else:
            choice = None
        message = answer.get("message")
        fields: AnswerFields = {"decision": decision, "scope": scope, "message": _text(message, 2000),
                                "choice": choice if isinstance(choice, str) else None}
        return None, fields

    def _lost_verdict(self, rid: str, ref: str, done: Done) -> Verdict:
        by = done.get("by")
        if ref_of(by) == ref:  # it did win (an apply that raised after the channel took it)
            return {"answer": ref, "request_id": rid, "applied": True, "message": "applied",
                    "winner": who(by, self.machine), "at": done.get("at", time.time())}
        winner = who(by, self.machine) if done.get("status") == "answered" else None
        return {"answer": ref, "request_id": rid, "applied": False, "message": describe_done(done, self.machine),
                "winner": winner, "at": done.get("at", time.time())}

    def _verdict(self, ref: str, rid: object, applied: bool, message: str,
                 answered_by: AnsweredBy | None = None) -> None:
        if answered_by is not None and isinstance(rid, str):
            self._audit(rid, None, answered_by, {"applied": applied, "reason": message})
        with self._lock:
            self.counts["refused"] += 0 if applied else 1
            self.pub.verdicts.append({"answer": ref, "request_id": rid if isinstance(rid, str) else "",
                                   "applied": applied, "message": message, "winner": None, "at": time.time()})
        self._wake.set()

    def _expire_losers(self) -> None:
        now = time.monotonic()
        with self._lock:
            for rid in list(self.book.losers):
                keep = []
                for ref, give_up, reason in self.book.losers[rid]:
                    if now < give_up:
                        keep.append((ref, give_up, reason))
                    else:
                        self.pub.verdicts.append({"answer": ref, "request_id": rid, "applied": False,
                                               "message": f"not applied: {reason}", "winner": None,
                                               "at": time.time()})
                if keep:
                    self.book.losers[rid] = keep
                else:
                    del self.book.losers[rid]

    def _forget_processed(self, now_ms: int) -> None:
        """Forget refs well past their validity (Redis's clock, as they are checked): read again
        after a reconnect, they are skipped as stale."""
        if len(self.book.processed) < 1024:
            return
        horizon = now_ms - 2 * STALE_MS
        for ref in [ref for ref, until in self.book.processed.items() if until < horizon]:
            del self.book.processed[ref]

    def _audit(self, rid: str, fields: AnswerFields | None, answered_by: AnsweredBy, outcome: Outcome) -> None:
        """The owner's record of every answer from the fleet: who (the ACL user from the key, the
        machine and uid its client gave), what, and whether it was applied."""
        if not self._audit_on:
            return

        audit.record({"event": "fleet-answer", "request_id": rid, "machine": self.machine,
                      "decision": fields["decision"] if fields else None, "scope": fields["scope"] if fields else None,
                      "applied": bool(outcome.get("applied")), "reason": outcome.get("reason"),
                      "answered_by": dict(answered_by)})

    # -- failures ------------------------------------------------------------------------------------

    def _connected(self, which: str) -> None:
        with self._lock:
            self.connected[which] = True
            self.counts["connects"] += 1

    def _failed(self, which: str, exc: BaseException, conn: Conn | None) -> None:
        with self._lock:
            self.connected[which] = False
            self.counts["failures"] += 1
            self.last_error = f"{which}: {describe_failure(exc)}"
        if conn is not None:
            try:
                conn.close()
            except FAILURES:
                pass


def _id_order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return 0, 0


def _text(value: object, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def channel_apply(request_id: str, fields: AnswerFields, answered_by: AnsweredBy) -> Outcome:
    """``apply_answer`` through the channel's answer path (``channel.answer``): the first answer
    the request's waiter takes wins, from here or from afar. The waiter records ``answered_by``
    (the fleet member and machine, vouched for by this link) beside this process."""
    try:
        answer(request_id, fields["decision"], scope=fields["scope"], message=fields["message"],
               choice=fields["choice"], by=by_text(answered_by), vouched=dict(answered_by))
    except NotFoundError as exc:
        return {"applied": False, "reason": str(exc)}
    except GuardError as exc:
        return {"applied": False, "reason": f"error: {exc}"}
    return {"applied": True}
