"""The answering side of the approval channel: list the requests waiting (``list_pending``),
answer one (``answer``: connect to its waiter's socket, send one line, wait for the waiter's
reply: the waiter alone judges, ``requests.Pending``), and wake when a new one appears
(``Doorbell``, ``wait_for_new``). ``docs/design.md`` ("The approval channel") has the protocol.
"""

from __future__ import annotations

import os
import socket
import stat
import time

from claudeguard.channel.fifo import clean_stale_bells, drain, make_bell, wait_readable
from claudeguard.channel.model import DECISIONS, ID_MIN_PREFIX, SCOPES, Request, is_id_text
from claudeguard.channel.requests import (
    ANSWER_TIMEOUT_S, RECORD_VERSION, REFUSALS, SEND_FLAGS, _sock_name,
)
from claudeguard.channel.store import ORPHAN_AGE_S, ChannelDir, request_id_of, waiter_alive
from claudeguard.channel.wire import REPLY_MAX, decode_reply, encode_answer
from claudeguard.errors import NotFoundError, NotPending, UsageError
from claudeguard.sockets import peer_creds

GRACE_S = 5.0  # past its deadline by this much, a request is removed by whoever lists

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any


def list_pending(session_id: str | None = None, *, held: bool = False) -> list[Request]:
    """Open requests of every session of this user, oldest first (``held``: the held ones
    instead, for the owner of their dialogs; see ``post``). Requests whose waiter died
    (pid and start time), that are past their deadline by more than GRACE_S, or whose files
    were left half-made by a crash are removed here: this is the stale-channel cleanup."""
    now = time.time()
    out: list[Request] = []
    with ChannelDir() as ch:
        names = ch.names()
        published = {n[: -len(".json")] for n in names if n.endswith(".json") and not n.startswith(".")}
        for rid in sorted(published):
            try:
                record = ch.read_json(f"{rid}.json")
                if record is None:
                    continue
                request = Request.from_dict(record["request"])
                if request.id != rid:
                    raise ValueError("request file under another id's name")
            except (ValueError, KeyError, TypeError):
                if (ch.age_s(f"{rid}.json") or 0) > ORPHAN_AGE_S:
                    ch.remove_request(rid)  # unreadable and not being written: junk
                continue
            if not waiter_alive(record) or now > request.deadline + GRACE_S:
                ch.remove_request(rid)
                continue
            if ch.read_marker(rid) is not None:
                continue  # answered or ending right now
            if now > request.deadline:
                continue  # its waiter is ending it with on_timeout
            if bool(record.get("held")) != held:
                continue
            if session_id is None or request.session_id == session_id:
                out.append(request)
        for name in names:
            owner = request_id_of(name)
            if owner is not None and owner not in published and (ch.age_s(name) or 0) > ORPHAN_AGE_S:
                ch.unlink(name)  # a file of a request that crashed before publishing or while ending
    out.sort(key=lambda r: (r.created, r.id))
    return out


def _resolve(ch: ChannelDir, id_or_prefix: str) -> str:
    prefix = id_or_prefix.strip().lower()
    if len(prefix) < ID_MIN_PREFIX:
        raise NotFoundError(f"{id_or_prefix}: give at least {ID_MIN_PREFIX} characters of the request id")
    if not is_id_text(prefix):
        # Also keeps anything like "../" from ever reaching a file name.
        raise NotFoundError(f"{id_or_prefix}: no such pending request (ids are letters a-z and digits 2-7)")
    if ch.exists(f"{prefix}.json"):
        return prefix  # a whole id: no need to list the directory
    ids = [n[: -len(".json")] for n in ch.names() if n.endswith(".json") and not n.startswith(".")]
    matches = [i for i in ids if i.startswith(prefix)]
    if len(matches) > 1:
        raise NotFoundError(f"{id_or_prefix}: matches {len(matches)} requests; give more of the id")
    if not matches:
        raise NotPending(f"{id_or_prefix}: no such pending request (already answered, expired or never existed)",
                         prefix)
    return matches[0]


def answer(id_or_prefix: str, decision: str, *, scope: str = "once", message: str | None = None,
           choice: str | None = None, by: str | None = None, vouched: dict[str, object] | None = None) -> Request:
    """Deliver one answer to its waiter, which says whether it took it: the first good one wins.
    Anything else (unknown, already answered, expired, caller gone, channel lost, refused by the
    waiter: from inside a guarded session, above all) raises NotFoundError with one line (exit 1).
    ``vouched``: who a relaying answerer (the desk, the fleet) answers for; the waiter records it
    beside what it sees of this process."""
    if decision not in DECISIONS:
        raise UsageError(f"decision {decision!r}: expected allow or deny")
    if scope not in SCOPES:
        raise UsageError(f"scope {scope!r}: expected one of {', '.join(SCOPES)}")
    with ChannelDir() as ch:
        rid = _resolve(ch, id_or_prefix)

        def refuse_if_ended() -> None:
            reason = ch.read_marker(rid)
            if reason is not None:
                raise NotPending(f"{rid}: {REFUSALS.get(reason, 'no longer pending')}", rid, reason)
            if not ch.exists(f"{rid}.json"):
                raise NotFoundError(f"{rid}: no longer pending")

        try:
            record = ch.read_json(f"{rid}.json")
            request = Request.from_dict(record["request"]) if record else None
        except (ValueError, KeyError, TypeError):
            raise NotFoundError(f"{rid}: unreadable request file") from None
        if request is None or record is None:
            raise NotFoundError(f"{rid}: no longer pending")
        if record.get("v") != RECORD_VERSION:
            raise NotFoundError(f"{rid}: waits in an older claudeguard (answer it with that version's claudeguardctl)")
        if record.get("held"):
            raise NotFoundError(f"{rid}: no such pending request (not asked yet)")
        if request.kind == "dialog" and choice is not None and choice not in (request.choices or []):
            raise UsageError(f"{rid}: choice {choice!r} is not one of {request.choices}")
        try:
            line = encode_answer(rid, decision, scope=scope, message=message, choice=choice, by=by,
                                 vouched=vouched)
        except ValueError as exc:
            raise UsageError(f"{rid}: {exc}") from None
        refuse_if_ended()
        if time.time() > request.deadline:
            raise NotPending(f"{rid}: {REFUSALS['timeout']}", rid, "timeout")
        if not waiter_alive(record):
            ch.remove_request(rid)
            raise NotFoundError(f"{rid}: {REFUSALS['gone']}; request withdrawn")
        refusal = _exchange(ch, rid, record, line, refuse_if_ended)
    if refusal is not None:
        raise NotFoundError(f"{rid}: {refusal}")
    return request


def _exchange(ch: ChannelDir, rid: str, record: dict[str, Any], line: bytes, refuse_if_ended: Any) -> str | None:
    """Connect to the waiter, send ``line``, read its reply: None when it took the answer, else its
    refusal. The other end must be the recorded waiter (``SO_PEERCRED``): a socket put there by
    anybody else never receives a human's answer as if it were the call's."""
    waiter = record.get("waiter")
    waiter_pid = waiter.get("pid") if isinstance(waiter, dict) else None
    try:
        st = os.stat(f"{rid}.sock", dir_fd=ch.fd, follow_symlinks=False)
    except FileNotFoundError:
        refuse_if_ended()
        ch.remove_request(rid)  # unanswerable; its waiter notices within CHECK_EVERY_S
        raise NotFoundError(f"{rid}: {REFUSALS['error']} (its socket is missing); request withdrawn") from None
    if not stat.S_ISSOCK(st.st_mode) or [st.st_dev, st.st_ino] != list(record.get("sock") or []):
        raise NotFoundError(f"{rid}: {REFUSALS['error']} (its socket was replaced)")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(ANSWER_TIMEOUT_S)
        try:
            sock.connect(_sock_name(ch, f"{rid}.sock"))
        except (FileNotFoundError, ConnectionRefusedError):
            # Nobody listens: the waiter ended just now (it marks before it closes), or died.
            refuse_if_ended()
            ch.remove_request(rid)  # nobody can answer it: its waiter notices within CHECK_EVERY_S
            if not waiter_alive(record):
                raise NotFoundError(f"{rid}: {REFUSALS['gone']}; request withdrawn") from None
            raise NotFoundError(f"{rid}: its caller stopped listening; request withdrawn") from None
        except TimeoutError:
            raise NotFoundError(f"{rid}: its waiting call is busy; not answered") from None
        creds = peer_creds(sock)
        if creds is None or creds[0] != waiter_pid or creds[1] != os.getuid():
            raise NotFoundError(f"{rid}: {REFUSALS['error']} (another process listens on its socket)")
        try:
            sock.sendall(line, SEND_FLAGS)
            reply = b""
            while b"\n" not in reply and len(reply) < REPLY_MAX:
                chunk = sock.recv(REPLY_MAX)
                if not chunk:
                    break
                reply += chunk
        except TimeoutError:
            raise NotFoundError(f"{rid}: no word from its waiting call within {ANSWER_TIMEOUT_S:g} s; "
                                f"not confirmed") from None
        except OSError:
            reply = b""
        if b"\n" not in reply:
            refuse_if_ended()  # it ended meanwhile: say how
            raise NotFoundError(f"{rid}: no longer pending (its waiting call ended without taking this answer)")
        return decode_reply(reply.partition(b"\n")[0])
    finally:
        sock.close()


class Doorbell:
    """This process's doorbell in the channel: ``fd`` turns readable when a request is posted.
    A context manager: the FIFO exists from ``__enter__`` to ``__exit__`` and never after."""

    def __init__(self) -> None:
        self.fd = -1
        self._name = ""
        self._channel: ChannelDir | None = None
        self._bells = -1

    def __enter__(self) -> Doorbell:
        self._channel = ChannelDir()
        try:
            self._bells = self._channel.bells_fd()
            clean_stale_bells(self._bells)
            self.fd, self._name = make_bell(self._bells)
        except BaseException:
            self._channel.close()
            raise
        return self

    def wait(self, timeout: float) -> bool:
        """Until a ring (True, rings drained) or ``timeout`` (False)."""
        if wait_readable(self.fd, max(0.0, timeout)):
            drain(self.fd)
            return True
        return False

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        try:
            os.unlink(self._name, dir_fd=self._bells)
        except FileNotFoundError:
            pass
        assert self._channel is not None
        self._channel.close()


def wait_for_new(known: set[str], timeout: float) -> list[Request]:
    """For ``console``: block until a request not in ``known`` is pending (returned) or
    ``timeout`` passes (empty list). Wakes on a doorbell rung by ``post``, not on a timer."""
    end = time.monotonic() + max(0.0, timeout)
    with Doorbell() as bell:
        while True:
            new = [r for r in list_pending() if r.id not in known]
            remaining = end - time.monotonic()
            if new or remaining <= 0:
                return new
            bell.wait(remaining)
