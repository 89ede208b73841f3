"""The approver's side of the fleet, for the commands (``pending --fleet``, ``approve``/``deny``
of a fleet request, ``console --fleet``, ``ps --fleet``): list the waiting requests of every
machine, answer one and wait for its owner's verdict, list the machines and their sessions.

An answer is reported given only when the owning machine's verdict says it applied it; any
other end (another answer won, the request ended, the owner refused it, no verdict in time) is
a one-line error. docs/design.md ("The fleet") has the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import time

from claudeguard.errors import GuardError, NotFoundError, UsageError
from claudeguard.fleet.conn import FAILURES, connect, describe_failure
from claudeguard.fleet.keys import Keys, is_machine
from claudeguard.fleet.link import forever_refusal
from claudeguard.fleet.model import VERSION, describe_done, user_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.fleet.config import FleetConfig
    from claudeguard.fleet.conn import Conn
    from claudeguard.fleet.model import Done, FleetAnswer, RequestView, Sender, Verdict

IO_TIMEOUT_S = 3.0
WAIT_S = 10.0  # how long `approve` waits for the owner's verdict by default
VERDICT_MARGIN_S = 2.0  # waited past the answer's validity: the owner's apply and its verdict's way back
ID_MIN_PREFIX = 6
BELL_MAXLEN = 100
ANSWERS_MAXLEN = 64


class FleetError(GuardError):
    """The fleet could not be asked, or an answer was not applied: one line, exit 1."""

    exit_code = 1


class FleetClient:
    """An approver's connection to the fleet. A context manager (closes the connection)."""

    def __init__(self, cfg: FleetConfig, *, io_timeout: float = IO_TIMEOUT_S) -> None:
        self.cfg = cfg
        self.keys = Keys(cfg.prefix)
        self._io_timeout = io_timeout
        self._conn: Conn | None = None
        self.sent_at: float | None = None  # wall clock when the last answer went out (bench/fleet.py)

    def __enter__(self) -> FleetClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> Conn:
        if self._conn is None:
            self._conn = connect(self.cfg, io_timeout=self._io_timeout)
        return self._conn

    def _fail(self, exc: BaseException, doing: str) -> FleetError:
        return FleetError(f"fleet {self.cfg.describe()}: {doing}: {describe_failure(exc)}")

    # -- listing -------------------------------------------------------------------------------------

    def machines(self) -> list[tuple[str, float]]:
        """(machine, its last heartbeat) for every machine heard of in the last day."""
        try:
            rows = self.conn.zrange(self.keys.machines(), 0, -1, withscores=True)
        except FAILURES as exc:
            raise self._fail(exc, "listing machines") from None
        return [(str(name), float(score)) for name, score in rows if is_machine(name)]

    def requests(self, machine: str | None = None) -> list[RequestView]:
        """Every request waiting on a live machine (or on ``machine``), oldest first, each with
        ``age_s`` and ``deadline_s`` in this machine's clock. One round trip after the machines."""
        names = [machine] if machine is not None else [name for name, _ in self.machines()]
        if not names:
            return []
        try:
            pipe = self.conn.pipeline(transaction=False)
            for name in names:
                pipe.exists(self.keys.heartbeat(name))
                pipe.hgetall(self.keys.requests(name))
            replies = pipe.execute()
        except FAILURES as exc:
            raise self._fail(exc, "listing requests") from None
        now = time.time()
        out: list[RequestView] = []
        for index, name in enumerate(names):
            alive, table = replies[2 * index], replies[2 * index + 1]
            if not alive:
                continue  # a machine that is gone: its calls cannot be answered (nor run)
            for rid, raw in (table or {}).items():
                try:
                    view = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(view, dict) or view.get("id") != rid or view.get("machine") != name:
                    continue
                deadline = view.get("deadline")
                if not isinstance(deadline, (int, float)) or deadline <= now:
                    continue
                view["age_s"] = round(max(0.0, now - float(view.get("created") or now)), 1)
                view["deadline_s"] = round(deadline - now, 1)
                out.append(view)  # type: ignore[arg-type]  # checked above as far as it is used
        out.sort(key=lambda v: (v.get("created", 0), v.get("id", "")))
        return out

    def find(self, id_or_prefix: str, machine: str | None = None) -> RequestView:
        """The waiting request with this id (or unique prefix of 6+). Not waiting: one line that
        says how it ended when its machine still knows ("already answered by ... at ...")."""
        prefix = id_or_prefix.strip().lower()
        if len(prefix) < ID_MIN_PREFIX:
            raise NotFoundError(f"{id_or_prefix}: give at least {ID_MIN_PREFIX} characters of the request id")
        views = self.requests(machine)
        matches = [v for v in views if v["id"].startswith(prefix)]
        if len(matches) > 1:
            raise NotFoundError(f"{id_or_prefix}: matches {len(matches)} fleet requests; give more of the id")
        if matches:
            return matches[0]
        ended = self._ended(prefix, machine)
        if ended is not None:
            name, rid, done = ended
            raise NotFoundError(f"{rid} ({name}): {describe_done(done, name)}")
        raise NotFoundError(f"{id_or_prefix}: no such pending request in the fleet (answered, expired or never "
                            "existed)")

    def _ended(self, prefix: str, machine: str | None) -> tuple[str, str, Done] | None:
        names = [machine] if machine is not None else [name for name, _ in self.machines()]
        try:
            pipe = self.conn.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(self.keys.done(name))
            tables = pipe.execute()
        except FAILURES:
            return None
        for name, table in zip(names, tables, strict=True):
            for rid, raw in (table or {}).items():
                if rid.startswith(prefix):
                    try:
                        return name, rid, json.loads(raw)
                    except ValueError:
                        continue
        return None

    # -- answering -----------------------------------------------------------------------------------

    def answer(self, id_or_prefix: str, decision: str, *, scope: str = "once", message: str | None = None,
               choice: str | None = None, machine: str | None = None, shown_sha256: str | None = None,
               wait: float = WAIT_S, vouched: dict[str, Any] | None = None) -> Verdict:
        """Answer a fleet request and wait for its owner's verdict. Returns the verdict when the
        owner applied this very answer; raises FleetError (or NotFoundError) with one line
        otherwise: refused, "already answered by <who> at <when>", or no verdict within
        ``wait`` (then the owner can no longer apply it either: the answer says until when it
        holds, in Redis's clock). ``shown_sha256``: the call the approver was shown (a console);
        default the one listed now. ``vouched``: whom this client relays (the service's desk: its
        ``Provenance``), recorded by the owner beside the ACL user as a claim under it."""
        if decision not in ("allow", "deny"):
            raise UsageError(f"decision {decision!r}: expected allow or deny")
        view = self.find(id_or_prefix, machine)
        owner, rid = view["machine"], view["id"]
        if scope == "forever":
            raise FleetError(f"{rid} ({owner}): {forever_refusal(owner)}")
        if scope not in ("once", "agent", "session"):
            raise UsageError(f"scope {scope!r}: expected once, agent or session")
        if view.get("kind") == "dialog" and choice is not None:
            choices = view.get("choices") or []
            if choice.isdigit() and 1 <= int(choice) <= len(choices):
                choice = choices[int(choice) - 1]
            if choice not in choices:
                raise UsageError(f"{rid}: choice {choice!r} is not one of {choices}")
        sha = shown_sha256 or view["call_sha256"]
        user = self.cfg.acl_user
        stream, results = self.keys.answers(owner, user), self.keys.results(owner)
        wait = max(0.5, float(wait))
        try:
            seconds, micros = self.conn.time()
            started = time.monotonic()  # after TIME: the answer's validity ends before our wait does
            answer: FleetAnswer = {
                "v": VERSION, "request_id": rid, "machine": owner, "call_sha256": sha, "decision": decision,  # type: ignore[typeddict-item]  # checked above
                "scope": scope, "message": message, "choice": choice,
                "valid_until_ms": int(seconds) * 1000 + int(micros) // 1000 + int(wait * 1000),
                "sender": _sender(self.cfg.machine),
            }
            if vouched is not None:
                answer["vouched"] = vouched
            pipe = self.conn.pipeline(transaction=False)
            pipe.sadd(self.keys.approvers(owner), user)
            pipe.xrevrange(results, count=1)
            pipe.xadd(stream, {"a": json.dumps(answer)}, maxlen=ANSWERS_MAXLEN, approximate=True)
            self.sent_at = time.time()
            added, last, entry_id = pipe.execute()
            if added:  # a stream the owner may not know yet: ring its bell
                self.conn.xadd(self.keys.bell(owner), {"user": user}, maxlen=BELL_MAXLEN, approximate=True)
        except FAILURES as exc:
            raise self._fail(exc, f"sending the answer to {rid} ({owner})") from None
        ref = f"{user}/{entry_id}"
        verdict = self._await_verdict(results, last[0][0] if last else "0-0", ref, started + wait + VERDICT_MARGIN_S)
        if verdict is None:
            raise FleetError(f"{rid} ({owner}): no word from {owner} within {wait + VERDICT_MARGIN_S:g} s; not "
                             f"confirmed (if {owner} applied it, its audit log says so)")
        if not verdict.get("applied"):
            raise FleetError(f"{rid} ({owner}): {verdict.get('message') or 'not applied'}")
        return verdict

    def _await_verdict(self, results: str, after: str, ref: str, until: float) -> Verdict | None:
        last = after
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return None
            try:
                reply = self.conn.xread({results: last}, count=100, block=max(1, int(min(left, 1.0) * 1000)))
            except FAILURES:
                return None  # the answer cannot be confirmed: said as "no word" by the caller
            for _, items in reply or ():
                for entry_id, fields in items:
                    last = entry_id
                    try:
                        verdict = json.loads(fields.get("r") or "")
                    except ValueError:
                        continue
                    if isinstance(verdict, dict) and verdict.get("answer") == ref:
                        return verdict  # type: ignore[return-value]  # the owner's Verdict

    # -- machines --------------------------------------------------------------------------------------

    def ps(self) -> list[dict[str, Any]]:
        """Every machine heard of in the last day: ``alive`` with its heartbeat (sessions, pending)
        or gone (``last_seen``, ``gone_s``)."""
        machines = self.machines()
        try:
            pipe = self.conn.pipeline(transaction=False)
            for name, _ in machines:
                pipe.get(self.keys.heartbeat(name))
            beats = pipe.execute()
        except FAILURES as exc:
            raise self._fail(exc, "reading heartbeats") from None
        now = time.time()
        rows: list[dict[str, Any]] = []
        for (name, seen), raw in zip(machines, beats, strict=True):
            beat: dict[str, Any] = {}
            if raw:
                try:
                    beat = json.loads(raw)
                except ValueError:
                    beat = {}
            if beat:
                rows.append({"machine": name, "alive": True, "last_seen": beat.get("time", seen),
                             "user": beat.get("user"), "uid": beat.get("uid"), "pid": beat.get("pid"),
                             "pending": beat.get("pending", 0), "sessions": beat.get("sessions") or []})
            else:
                rows.append({"machine": name, "alive": False, "last_seen": seen, "gone_s": round(now - seen, 1),
                             "pending": 0, "sessions": []})
        return rows


def _sender(machine: str) -> Sender:
    return {"machine": machine, "uid": os.getuid(), "user": user_name(), "pid": os.getpid(),
            "command": os.path.basename(sys.argv[0] or "python")[:64]}
