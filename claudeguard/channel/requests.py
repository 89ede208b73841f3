"""Post a request and wait for its answer; list and answer requests from other processes.

The waiting side (``post`` -> ``Pending``) sleeps in poll(2) on its own FIFO and wakes the
moment an answer is written; the answering side (``answer``) claims the request under a flock
and writes one atomic line; the waiter marks it done. ``docs/design.md ("The approval channel")`` states who
creates, writes, reads and removes each file, and why no FIFO mishap loses, duplicates,
misroutes or hangs an answer.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import time
from dataclasses import replace

from claudeguard.channel import fifo
from claudeguard.channel.model import DECISIONS, ID_MIN_PREFIX, KINDS, SCOPES, Answer, Request, is_id_text, new_id
from claudeguard.channel.notify import run_notify
from claudeguard.channel.store import ORPHAN_AGE_S, ChannelDir, request_id_of, waiter_alive
from claudeguard.procs import process_start
from claudeguard.errors import GuardError, NotFoundError, UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CHECK_EVERY_S = 1.0  # how often a waiter verifies its files are still in place (not for answers)
GRACE_S = 5.0  # past its deadline by this much, a request is removed by whoever lists
END_LOCK_S = 2.0  # longest a waiter waits for an answerer's lock before ending anyway
ANSWER_LOCK_S = 0.5  # longest an answerer waits for another answerer's lock
HELD_MAX_S = 86400.0  # a held request's deadline as listed: its own starts when it is released
OWNER_WORDS = ("go", "drop")  # what the owner of a held request's dialog tells its waiter

REFUSALS = {
    "answered": "already answered",
    "timeout": "expired (no answer before its deadline)",
    "withdrawn": "withdrawn (answered elsewhere, or its caller stopped waiting)",
    "error": "its approval channel was lost",
    "gone": "its caller went away",
}


def post(*, session_id: str, agent_type: str | None, agent_id: str | None, tool: str, input: Mapping[str, object],
         summary: str, cwd: str, timeout: float, kind: str = "permission", choices: list[str] | None = None,
         extra: Mapping[str, object] | None = None, notify: list[str] | None = None, held: bool = False) -> "Pending":
    """Publish a request and return the handle to wait on. The FIFO exists and is open for
    reading before the request becomes visible, so no answerer can find it without a reader.

    ``held``: published for the owner of the dialog it stands for (a pty session's router, which
    lists it with ``list_pending(held=True)``) but not for approvers, who neither list nor answer
    it until that owner says "go" (``tell_waiter``) and the waiter ``release``s it; "drop" tells
    the waiter to withdraw it (the dialog was answered at the keyboard)."""
    if kind not in KINDS:
        raise UsageError(f"request kind {kind!r}: expected one of {', '.join(KINDS)}")
    if kind == "dialog" and not choices:
        raise UsageError("a dialog request needs its choices")
    ch = ChannelDir()
    now = time.time()
    request = Request(
        id=new_id(), session_id=session_id, agent_type=agent_type, agent_id=agent_id, tool=tool,
        input=dict(input), summary=summary, cwd=cwd, created=now,
        deadline=now + max(0.0, float(timeout)) + (HELD_MAX_S if held else 0.0),
        pid=os.getpid(), kind=kind, choices=list(choices) if choices else None, extra=dict(extra or {}),
    )
    try:
        fifo_fd, lock_fd, fifo_id = _publish(ch, request, held)
    except BaseException as exc:
        ch.close()
        if isinstance(exc, OSError):
            raise GuardError(f"approval channel {ch.path}: {exc.strerror or exc}") from None
        raise
    pending = Pending(ch, request, fifo_fd, lock_fd, fifo_id)
    if held:
        pending.held = pending.owned = True
        pending._on_release = (float(timeout), notify)
        return pending
    _announce(ch, request, notify)
    return pending


def _publish(ch: ChannelDir, request: Request, held: bool,
             **more: Any) -> tuple[int, int, tuple[int, int]]:
    """Make the request's FIFO and lock in ``ch`` and then its ``<id>.json`` (from then on it is
    visible): (fifo fd, lock fd, the FIFO's (dev, ino)). On any failure nothing of it is left in
    the channel and no fd stays open; OSError says what failed."""
    rid = request.id
    fifo_fd = lock_fd = -1
    try:
        os.mkfifo(f"{rid}.fifo", 0o600, dir_fd=ch.fd)
        # O_RDWR: the open never blocks, and we never see EOF when an answerer closes.
        fifo_fd = os.open(f"{rid}.fifo", os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ch.fd)
        st = os.fstat(fifo_fd)
        if not stat.S_ISFIFO(st.st_mode):
            raise OSError(errno.EEXIST, f"{rid}.fifo: not a FIFO")
        lock_fd = os.open(f"{rid}.lock", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o600, dir_fd=ch.fd)
        fifo_id = (st.st_dev, st.st_ino)
        ch.write_json_atomic(f"{rid}.json", dict(_record(request, fifo_id, held), **more))
    except BaseException:
        for fd in (fifo_fd, lock_fd):
            if fd >= 0:
                os.close(fd)
        ch.remove_request(rid)
        raise
    return fifo_fd, lock_fd, fifo_id


def _record(request: Request, fifo_id: tuple[int, int], held: bool) -> dict[str, Any]:
    """What ``<id>.json`` holds (see docs/design.md, "The approval channel")."""
    record = {"v": 1, "request": request.to_dict(), "waiter": {"pid": request.pid, "start": process_start(request.pid)},
              "fifo": list(fifo_id)}
    if held:
        record["held"] = True
    return record


def _announce(ch: ChannelDir, request: Request, notify: list[str] | None) -> None:
    """Tell the approvers: ring the consoles' doorbells, run ``notify``."""
    try:
        bells = ch.bells_fd(create=False)
        if bells >= 0:
            fifo.ring_all(bells)
    except OSError:
        pass  # consoles also list on their own; a doorbell problem must not fail the request

    run_notify(notify, request)


def tell_waiter(request_id: str, word: str) -> None:
    """For the owner of a held request's dialog: "go" (the keyboard's head start is over: publish
    it for approvers) or "drop" (the dialog left the screen: withdraw it). The waiter reads it
    within a fraction of a second; a word for a request that ended is swept with its files."""
    if word not in OWNER_WORDS or not is_id_text(request_id):
        raise UsageError(f"tell_waiter: {word!r} for {request_id!r}")
    with ChannelDir() as ch:
        if not ch.exists(f"{request_id}.json"):
            return
        try:
            fd = os.open(f"{request_id}.{word}", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=ch.fd)
        except OSError as exc:
            raise GuardError(f"approval channel {ch.path}: {exc.strerror or exc}") from None
        os.close(fd)


class Pending:
    """The waiting side of one request. Not thread-safe; one owner waits on it."""

    def __init__(self, ch: ChannelDir, request: Request, fifo_fd: int, lock_fd: int, fifo_id: tuple[int, int]) -> None:
        self.request = request
        self._ch = ch
        self._fd = fifo_fd
        self._lock_fd = lock_fd
        self._fifo_id = fifo_id
        self._buf = b""
        self._answer: Answer | None = None
        self.held = False  # see ``post``
        self.owned = False  # posted held: the owner of its dialog may still say "drop"
        self._on_release: tuple[float, list[str] | None] = (0.0, None)  # (timeout, notify)

    def __enter__(self) -> "Pending":
        return self

    def __exit__(self, *exc: object) -> None:
        self.withdraw()

    @property
    def done(self) -> bool:
        return self._answer is not None

    def fileno(self) -> int:
        """The FIFO's read fd: readable when an answer arrived (then call ``poll``)."""
        return self._fd

    def wait(self, on_timeout: str = "deny") -> Answer:
        """Block until an answer, the deadline (``on_timeout``) or a lost channel. Whatever ends
        it, including an exception from a signal handler, the request's files are removed."""
        try:
            while self._answer is None:
                remaining = self.request.deadline - time.time()
                if remaining <= 0:
                    return self._end_at_deadline(on_timeout)
                if fifo.wait_readable(self._fd, min(remaining, CHECK_EVERY_S)):
                    answer = self.poll()
                    if answer is not None:
                        return answer
                elif time.time() < self.request.deadline:  # at the deadline, the timeout speaks
                    lost = self._check_channel()
                    if lost is not None:
                        return lost
            return self._answer
        finally:
            if self._answer is None:
                self.withdraw()

    def poll(self) -> Answer | None:
        """Take an answer if one is in the FIFO (never blocks). After an answer the request is
        finished and its files are gone; further calls return the same answer."""
        if self._answer is not None:
            return self._answer
        if fifo.pending_bytes(self._fd) == 0 and b"\n" not in self._buf:
            return None
        # Mark before reading: an answerer that sees an empty pipe and then no marker knows that
        # no answer was ever delivered (see the protocol notes).
        self._mark("answered")
        try:
            self._buf += os.read(self._fd, 65536)
        except BlockingIOError:
            pass
        line, newline, rest = self._buf.partition(b"\n")
        if not newline:
            return None  # cannot happen with atomic writes; wait for the rest
        self._buf = rest
        answer = fifo.decode_answer(self.request.id, line)
        self._finish(answer)
        return answer

    def withdraw(self) -> Answer | None:
        """Stop waiting and remove the request (e.g. the keyboard answered first). Returns the
        answer if one had already arrived through the channel (the caller may prefer it)."""
        if self._answer is not None:
            return self._answer
        raced = self._end_with("withdrawn",
                               Answer("deny", message="claudeguard: request withdrawn", decided_by="withdrawn"))
        return None if raced.decided_by == "withdrawn" else raced

    # -- a held request --------------------------------------------------------------------------

    def owner_says(self) -> str | None:
        """A request posted held: "go" or "drop" once the owner of its dialog said so (see ``post``)."""
        if not self.owned or self._answer is not None:
            return None
        for word in ("drop", "go"):  # drop wins: the dialog is gone
            if self._ch.exists(f"{self.request.id}.{word}"):
                return word
        return None

    def release(self) -> None:
        """Publish a held request for approvers, its deadline counted from now."""
        if not self.held or self._answer is not None:
            return

        timeout, notify = self._on_release
        now = time.time()
        self.request = replace(self.request, created=now, deadline=now + max(0.0, timeout))
        self.held = False
        record = _record(self.request, self._fifo_id, held=False)
        try:
            self._ch.write_json_atomic(f"{self.request.id}.json", record)
        except OSError as exc:
            message = (f"claudeguard: the approval channel was lost (request {self.request.id}: "
                       f"{exc.strerror or exc}); denied")
            self._end_with("error", Answer("deny", message=message, decided_by="error"))
            return
        _announce(self._ch, self.request, notify)

    # -- endings ------------------------------------------------------------------------------

    def _end_at_deadline(self, on_timeout: str) -> Answer:
        decision = on_timeout if on_timeout in DECISIONS else "deny"
        timeout = self.request.deadline - self.request.created
        word = "allowed" if decision == "allow" else "denied"
        message = (f"claudeguard: no answer within {timeout:g} s; {word} by approval.on_timeout "
                   f"(request {self.request.id})")
        return self._end_with("timeout", Answer(decision, message=message, decided_by="timeout"))

    def _check_channel(self) -> Answer | None:
        """The FIFO or the .json was removed or replaced under us: nobody can answer any more.
        The whole channel directory gone (systemd removing the runtime dir at logout, a tmp
        cleaner, ``rm -rf``) is not that: the request is published again, same id and deadline."""
        ch, rid = self._ch, self.request.id
        if self._dir_lost():
            answer = self._republish()
            if answer is not None or self._answer is not None:
                return answer or self._answer
            ch = self._ch
        try:
            st = os.stat(f"{rid}.fifo", dir_fd=ch.fd, follow_symlinks=False)
            intact = (st.st_dev, st.st_ino) == self._fifo_id and ch.exists(f"{rid}.json")
        except FileNotFoundError:
            intact = False
        if intact:
            return None
        message = (f"claudeguard: the approval channel was lost (request {rid}: its FIFO or request file was "
                   "removed); denied")
        return self._end_with("error", Answer("deny", message=message, decided_by="error"))

    def check(self) -> Answer | None:
        """For callers that wait with their own loop: verify the channel (republishing the
        request when its directory went away); an Answer when the request had to end."""
        if self._answer is not None:
            return self._answer
        return self._check_channel()

    def _dir_lost(self) -> bool:
        """Our channel directory is no longer at its path (removed, or another one there)."""
        try:
            st = os.stat(self._ch.path, follow_symlinks=False)
        except OSError:
            return True
        mine = os.fstat(self._ch.fd)
        return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino)

    def _republish(self) -> Answer | None:
        """Make the channel again and publish this request in it (new FIFO, lock and .json,
        made in the same order as ``post``). Returns an answer that reached the old FIFO
        first; None when republished, or when that failed (then the request is ended with
        ``error`` by the usual check: the new directory has none of its files)."""
        old_ch, old_fd, old_lock = self._ch, self._fd, self._lock_fd
        # An answerer that opened the old files before they went holds the old lock while it
        # writes: take it, so its answer is either in the old pipe now or never written.
        locked = fifo.lock_bounded(old_lock, END_LOCK_S)
        try:
            if fifo.pending_bytes(old_fd) > 0:
                return self.poll()
            try:
                ch = ChannelDir()
            except GuardError:
                return None
            try:
                fifo_fd, lock_fd, fifo_id = _publish(ch, self.request, self.held, republished=time.time())
            except OSError:
                ch.close()
                return None
            self._ch, self._fd, self._lock_fd, self._fifo_id = ch, fifo_fd, lock_fd, fifo_id
        finally:
            if locked and self._lock_fd != old_lock:
                fifo.unlock(old_lock)
        for fd in (old_fd, old_lock):
            os.close(fd)
        old_ch.close()
        try:
            bells = self._ch.bells_fd(create=False)
            if bells >= 0:
                fifo.ring_all(bells)
        except OSError:
            pass
        return None

    def _end_with(self, reason: str, ending: Answer) -> Answer:
        """End without an answer from the channel: under the lock (so no answerer is between its
        checks and its write), take an answer that made it into the pipe, else mark ``reason``."""
        locked = fifo.lock_bounded(self._lock_fd, END_LOCK_S)
        try:
            if fifo.pending_bytes(self._fd) > 0:
                answer = self.poll()
                if answer is not None:
                    return answer
            # Holding the lock and with an empty pipe, no answer is in flight: our ending counts.
            self._mark(reason)
        finally:
            if locked:
                fifo.unlock(self._lock_fd)
        self._finish(ending)
        return ending

    def _mark(self, reason: str) -> None:
        try:
            self._ch.create_marker(self.request.id, reason)
        except OSError:
            pass  # the directory itself is gone: nobody can answer any more anyway

    def _finish(self, answer: Answer) -> None:
        """Close the read end first (a late writer then gets EPIPE/ENXIO, never a silent
        success), then remove the files, .json first."""
        self._answer = answer
        for fd in (self._fd, self._lock_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self._ch.remove_request(self.request.id)
        except OSError:
            pass
        self._ch.close()


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
        raise NotFoundError(f"{id_or_prefix}: no such pending request (already answered, expired or never existed)")
    return matches[0]


def answer(id_or_prefix: str, decision: str, *, scope: str = "once", message: str | None = None,
           choice: str | None = None, by: str | None = None) -> Request:
    """Deliver one answer; the first one wins. Anything else (unknown, already answered,
    expired, caller gone, channel lost) raises NotFoundError with one line (exit 1)."""
    if decision not in DECISIONS:
        raise UsageError(f"decision {decision!r}: expected allow or deny")
    if scope not in SCOPES:
        raise UsageError(f"scope {scope!r}: expected one of {', '.join(SCOPES)}")
    with ChannelDir() as ch:
        rid = _resolve(ch, id_or_prefix)
        try:
            record = ch.read_json(f"{rid}.json")
            request = Request.from_dict(record["request"]) if record else None
        except (ValueError, KeyError, TypeError):
            raise NotFoundError(f"{rid}: unreadable request file") from None
        if request is None or record is None:
            raise NotFoundError(f"{rid}: no longer pending")
        if record.get("held"):
            raise NotFoundError(f"{rid}: no such pending request (not asked yet)")
        if request.kind == "dialog" and choice is not None and choice not in (request.choices or []):
            raise UsageError(f"{rid}: choice {choice!r} is not one of {request.choices}")
        line = fifo.encode_answer(rid, Answer(decision, scope, message, "human", choice, by))
        try:
            lock_fd = os.open(f"{rid}.lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ch.fd)
        except FileNotFoundError:
            raise NotFoundError(f"{rid}: no longer pending") from None
        try:
            if not fifo.lock_bounded(lock_fd, ANSWER_LOCK_S):
                raise NotFoundError(f"{rid}: being answered by someone else right now")
            _deliver(ch, rid, request, record, line)
        finally:
            # Closing releases the lock. The answerer creates no marker of its own: the waiter
            # marks before it reads, and a file made here could outlive the waiter's cleanup.
            os.close(lock_fd)
    return request


def _deliver(ch: ChannelDir, rid: str, request: Request, record: dict[str, Any], line: bytes) -> None:
    """Under the request's lock: check it is still open, then write the one line."""

    def refuse_if_ended() -> None:
        reason = ch.read_marker(rid)
        if reason is not None:
            raise NotFoundError(f"{rid}: {REFUSALS.get(reason, 'no longer pending')}")

    refuse_if_ended()
    if not ch.exists(f"{rid}.json"):
        raise NotFoundError(f"{rid}: no longer pending")
    if time.time() > request.deadline:
        raise NotFoundError(f"{rid}: {REFUSALS['timeout']}")
    if not waiter_alive(record):
        ch.remove_request(rid)
        raise NotFoundError(f"{rid}: {REFUSALS['gone']}; request withdrawn")
    try:
        fd = os.open(f"{rid}.fifo", os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ch.fd)
    except FileNotFoundError:
        # The waiter removes its .json before its FIFO: with the .json gone it simply finished.
        refuse_if_ended()
        if not ch.exists(f"{rid}.json"):
            raise NotFoundError(f"{rid}: no longer pending") from None
        ch.remove_request(rid)  # unanswerable; its waiter notices within CHECK_EVERY_S
        raise NotFoundError(f"{rid}: {REFUSALS['error']} (its FIFO is missing); request withdrawn") from None
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise GuardError(f"{rid}: cannot open its FIFO: {exc.strerror}") from None
        refuse_if_ended()  # the waiter just finished (it marks before it closes): say how
        if not ch.exists(f"{rid}.json"):
            raise NotFoundError(f"{rid}: no longer pending") from None
        ch.remove_request(rid)  # nobody reads it: the caller is gone
        raise NotFoundError(f"{rid}: {REFUSALS['gone']}; request withdrawn") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode) or [st.st_dev, st.st_ino] != list(record.get("fifo") or []):
            raise NotFoundError(f"{rid}: {REFUSALS['error']} (its FIFO was replaced)")
        # Order matters: empty pipe first, then no marker => no answer was ever delivered (a
        # waiter marks before it reads; an answerer killed after writing leaves its bytes).
        if fifo.pending_bytes(fd) > 0:
            raise NotFoundError(f"{rid}: {REFUSALS['answered']}")
        refuse_if_ended()
        try:
            written = _write_no_sigpipe(fd, line)
        except BrokenPipeError:  # the waiter closed after our open: it ended just now
            refuse_if_ended()
            if not ch.exists(f"{rid}.json"):
                raise NotFoundError(f"{rid}: no longer pending") from None
            raise NotFoundError(f"{rid}: {REFUSALS['gone']}") from None
        except BlockingIOError:
            raise NotFoundError(f"{rid}: its FIFO is full; not answered") from None
        if written != len(line):  # impossible below PIPE_BUF; never report a half answer as given
            raise GuardError(f"{rid}: short write on its FIFO")
    finally:
        os.close(fd)


def _write_no_sigpipe(fd: int, data: bytes) -> int:
    """os.write that reports a reader gone as BrokenPipeError even in a program that restored the
    default SIGPIPE action (which would otherwise kill the answering command)."""
    if signal.getsignal(signal.SIGPIPE) != signal.SIG_DFL:
        return os.write(fd, data)  # Python's default: SIGPIPE ignored, EPIPE raised
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        return os.write(fd, data)
    finally:
        signal.sigtimedwait({signal.SIGPIPE}, 0)  # consume the one our write raised, if any
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPIPE})


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
            fifo.clean_stale_bells(self._bells)
            self.fd, self._name = fifo.make_bell(self._bells)
        except BaseException:
            self._channel.close()
            raise
        return self

    def wait(self, timeout: float) -> bool:
        """Until a ring (True, rings drained) or ``timeout`` (False)."""
        if fifo.wait_readable(self.fd, max(0.0, timeout)):
            fifo.drain(self.fd)
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
