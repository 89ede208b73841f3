"""Post a request and wait for its answer; list and answer requests from other processes.

The waiting side (``post`` -> ``Pending``) listens on a Unix socket of its own, ``<id>.sock`` in
the private channel directory, and sleeps in epoll until an answerer connects or its deadline
passes. The answering side (``answer``) connects, sends one line and waits for the waiter's
reply. The waiter is the only judge of an answer: it asks the kernel who is at the other end
(``SO_PEERCRED``), refuses a process that runs inside a guarded session (``ancestry``: the agent
must never answer for the human), takes the first acceptable answer, tells its answerer so
before anything else, and refuses every later one. An answer is taken exactly when its answerer
is told so. ``docs/design.md ("The approval channel")`` states who creates, writes, reads and
removes each file, and why nothing is lost, duplicated, misrouted or hung.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import stat
import time

from claudeguard import ancestry
# each sibling by its own name, never through the package: channel/__init__.py re-exports this
# module (tests/test_layers.py)
from claudeguard.channel.audit import record as audit_record
from claudeguard.channel.fifo import ring_all
from claudeguard.channel.model import DECISIONS, Answer, Request, is_id_text, new_id
from claudeguard.channel.notify import run_notify
from claudeguard.channel.store import ChannelDir
from claudeguard.channel.wire import LINE_MAX, decode_answer, encode_reply
from claudeguard.errors import GuardError, UsageError
from claudeguard.procs import process_start
from claudeguard.sockets import peer_creds

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NotRequired, TypedDict, Unpack

    class PostedCall(TypedDict):
        """What a request asks about (``post``'s keywords): the call and who makes it."""

        session_id: str
        agent_type: str | None  # None: the main agent
        agent_id: str | None
        tool: str
        input: Mapping[str, object]
        summary: str  # one line for listings (policy.decide.summarize_call)
        cwd: str
        choices: NotRequired[list[str] | None]  # a dialog's labels: the request is a "dialog" then
        extra: NotRequired[Mapping[str, object] | None]  # kept with the request: via, rule, ...

RECORD_VERSION = 2  # 1: answered through a FIFO (claudeguard 0.2 and earlier)
CHECK_EVERY_S = 1.0  # how often a waiter verifies its files are still in place (not for answers)
# A channel dir found gone and not made again at once is tried this many times, this far apart,
# before the request ends denied: about 1 s in all, a race with its removal or making ends in it.
REPUBLISH_TRIES = 5
REPUBLISH_RETRY_S = 0.25
CONN_READ_S = 2.0  # an answerer that has not sent its whole line by then is dropped
MAX_CONNS = 16  # answerers a waiter hears at once; more are told it is busy
ANSWER_TIMEOUT_S = 10.0  # longest an answerer waits to connect and for the waiter's reply
REFUSAL_ROWS = 3  # refusals of one request written to the audit log (the rest are counted)
HELD_MAX_S = 86400.0  # a held request's deadline as listed: its own starts when it is released
OWNER_WORDS = ("go", "drop")  # what the owner of a held request's dialog tells its waiter
SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)  # a peer gone is EPIPE, never a SIGPIPE

class Observer:
    """Who else hears of this process's requests as they start and end waiting (the service's
    fleet link: ``service/fleet.py``). Its methods must only take a lock and return: they run in
    the waiting thread, and what they raise is dropped."""

    def posted(self, request: Request) -> None:
        """``request`` waits for approvers now (posted, or a held one released)."""

    def ended(self, request: Request, answer: Answer) -> None:
        """Its wait ended with ``answer`` (a human's, the deadline's, withdrawn, a lost channel)."""


# Set once by the process that wants it (the service); None everywhere else.
observer: Observer | None = None


def _observe(method: str, *args: Any) -> None:
    found = observer
    if found is None:
        return
    try:
        getattr(found, method)(*args)
    except Exception:  # noqa: BLE001 - an observer never changes a call's fate
        pass


REFUSALS = {
    "answered": "already answered",
    "timeout": "expired (no answer before its deadline)",
    "withdrawn": "withdrawn (answered elsewhere, or its caller stopped waiting)",
    "error": "its approval channel was lost",
    "gone": "its caller went away",
}


def post(*, timeout: float, notify: list[str] | None = None, held: bool = False,
         **call: Unpack[PostedCall]) -> "Pending":
    """Publish a request about ``call`` and return the handle to wait on. The socket listens
    before the request becomes visible, so no answerer can find it without a listener. A call
    with ``choices`` is a dialog's request (``kind`` "dialog"), else a permission request.

    ``held``: published for the owner of the dialog it stands for (a pty session's router, which
    lists it with ``list_pending(held=True)``) but not for approvers, who neither list nor answer
    it until that owner says "go" (``tell_waiter``) and the waiter ``release``s it; "drop" tells
    the waiter to withdraw it (the dialog was answered at the keyboard)."""
    choices = call.get("choices")
    ch = ChannelDir()
    now = time.time()
    request = Request(
        id=new_id(), session_id=call["session_id"], agent_type=call["agent_type"], agent_id=call["agent_id"],
        tool=call["tool"], input=dict(call["input"]), summary=call["summary"], cwd=call["cwd"], created=now,
        deadline=now + max(0.0, float(timeout)) + (HELD_MAX_S if held else 0.0),
        pid=os.getpid(), kind="dialog" if choices else "permission", choices=list(choices) if choices else None,
        extra=dict(call.get("extra") or {}),
    )
    try:
        listener, sock_id = _publish(ch, request, held)
    except BaseException as exc:
        ch.close()
        if isinstance(exc, OSError):
            raise GuardError(f"approval channel {ch.path}: {exc.strerror or exc}") from None
        raise
    pending = Pending(ch, request, listener, sock_id)
    if held:
        pending.held = pending.owned = True
        pending._on_release = (float(timeout), notify)
        return pending
    _announce(ch, request, notify)
    pending.observed = True
    _observe("posted", request)
    return pending


def _sock_name(ch: ChannelDir, name: str) -> str:
    """``name`` in the channel directory, as a socket address: through the directory's checked fd
    (``/proc/self/fd/N/``: no path that could be swapped, and no length limit), else its path."""
    if os.path.isdir(f"/proc/self/fd/{ch.fd}"):
        return f"/proc/self/fd/{ch.fd}/{name}"
    return os.path.join(ch.path, name)


def _publish(ch: ChannelDir, request: Request, held: bool, **more: Any) -> tuple[socket.socket, tuple[int, int]]:
    """Bind and listen on the request's socket in ``ch``, then write its ``<id>.json`` (from then
    on it is visible): (the listening socket, the socket file's (dev, ino)). On any failure
    nothing of it is left in the channel and no socket stays open; OSError says what failed."""
    rid = request.id
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.setblocking(False)
        address = _sock_name(ch, f"{rid}.sock")
        listener.bind(address)
        os.chmod(address, 0o600)  # the directory is 0700 already; the socket says so too
        listener.listen(MAX_CONNS)
        st = os.stat(f"{rid}.sock", dir_fd=ch.fd, follow_symlinks=False)
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(errno.EEXIST, f"{rid}.sock: not a socket")
        sock_id = (st.st_dev, st.st_ino)
        ch.write_json_atomic(f"{rid}.json", dict(_record(request, sock_id, held), **more))
    except BaseException:
        listener.close()
        ch.remove_request(rid)
        raise
    return listener, sock_id


def _record(request: Request, sock_id: tuple[int, int], held: bool) -> dict[str, Any]:
    """What ``<id>.json`` holds (see docs/design.md, "The approval channel")."""
    record = {"v": RECORD_VERSION, "request": request.to_dict(),
              "waiter": {"pid": request.pid, "start": process_start(request.pid)}, "sock": list(sock_id)}
    if held:
        record["held"] = True
    return record


def _announce(ch: ChannelDir, request: Request, notify: list[str] | None) -> None:
    """Tell the approvers: ring the consoles' doorbells, run ``notify``."""
    try:
        bells = ch.bells_fd(create=False)
        if bells >= 0:
            ring_all(bells)
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


class _Conn:
    """One answerer at the other end of a request's socket."""

    __slots__ = ("sock", "pid", "uid", "buf", "until")

    def __init__(self, sock: socket.socket, pid: int, uid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.uid = uid
        self.buf = b""
        self.until = time.monotonic() + CONN_READ_S


class Pending:
    """The waiting side of one request. Not thread-safe; one owner waits on it."""

    def __init__(self, ch: ChannelDir, request: Request, listener: socket.socket, sock_id: tuple[int, int]) -> None:
        self.request = request
        self._ch = ch
        self._listener = listener
        self._sock_id = sock_id
        self._conns: dict[int, _Conn] = {}
        # One fd that turns readable for an answerer connecting or speaking: ``fileno()``.
        self._poller = select.epoll()
        self._poller.register(listener.fileno(), select.EPOLLIN)
        self._answer: Answer | None = None
        self._next_check = time.monotonic() + CHECK_EVERY_S
        self._republish_failures = 0  # checks in a row that found the dir gone and could not make it again
        self._republish_error = ""
        self.held = False  # see ``post``
        self.owned = False  # posted held: the owner of its dialog may still say "drop"
        self._on_release: tuple[float, list[str] | None] = (0.0, None)  # (timeout, notify)
        self.refused = 0  # answers refused because they came from inside a guarded session
        self.observed = False  # the observer heard of it waiting (and so hears of its end)

    def __enter__(self) -> "Pending":
        return self

    def __exit__(self, *exc: object) -> None:
        self.withdraw()

    @property
    def done(self) -> bool:
        return self._answer is not None

    def fileno(self) -> int:
        """Readable when an answerer connected or spoke (then call ``poll``)."""
        return self._poller.fileno()

    def wait(self, on_timeout: str = "deny") -> Answer:
        """Block until an answer, the deadline (``on_timeout``) or a lost channel. Whatever ends
        it, including an exception from a signal handler, the request's files are removed."""
        try:
            while self._answer is None:
                remaining = self.request.deadline - time.time()
                if remaining <= 0:
                    return self._end_at_deadline(on_timeout)
                answer = self._serve(max(0.0, min(remaining, self._next_check - time.monotonic())))
                if answer is not None:
                    return answer
                if time.monotonic() >= self._next_check and time.time() < self.request.deadline:
                    lost = self.check()  # at the deadline, the timeout speaks
                    if lost is not None:
                        return lost
            return self._answer
        finally:
            if self._answer is None:
                self.withdraw()

    def poll(self) -> Answer | None:
        """Hear the answerers that are ready, never blocking; the answer once one was taken. After
        an answer the request is finished and its files are gone; further calls return it."""
        if self._answer is not None:
            return self._answer
        return self._serve(0)

    def withdraw(self) -> Answer | None:
        """Stop waiting and remove the request (e.g. the keyboard answered first). Returns the
        answer if one had already arrived through the channel (the caller may prefer it)."""
        if self._answer is not None:
            return self._answer
        raced = self._end_without("withdrawn",
                                  Answer("deny", message="claudeguard: request withdrawn", decided_by="withdrawn"))
        return None if raced.decided_by == "withdrawn" else raced

    # -- answerers -----------------------------------------------------------------------------

    def _serve(self, timeout: float) -> Answer | None:
        """Wait up to ``timeout`` for answerers; hear each one that is ready. The answer taken, if any."""
        soonest = min((c.until for c in self._conns.values()), default=None)
        if soonest is not None:
            timeout = max(0.0, min(timeout, soonest - time.monotonic()))
        try:
            events = self._poller.poll(timeout)
        except InterruptedError:
            events = []
        for fd, _ in events:
            if fd == self._listener.fileno():
                self._accept()
            elif fd in self._conns:
                answer = self._hear(fd)
                if answer is not None:
                    return answer
        now = time.monotonic()
        for fd in [fd for fd, c in self._conns.items() if c.until <= now]:
            self._refuse(fd, "no whole answer within the time allowed")
        return None

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            creds = peer_creds(sock)
            if creds is None or creds[1] != os.getuid() or len(self._conns) >= MAX_CONNS:
                # Another uid never gets here (the directory is 0700); nobody gets a reply
                # the kernel could not say the sender of.
                _reply(sock, "busy, or the answering process could not be identified")
                sock.close()
                continue
            self._conns[sock.fileno()] = _Conn(sock, *creds)
            self._poller.register(sock.fileno(), select.EPOLLIN)

    def _hear(self, fd: int) -> Answer | None:
        """Read what answerer ``fd`` sent; judge its line once it is whole."""
        conn = self._conns[fd]
        try:
            data = conn.sock.recv(LINE_MAX + 1 - len(conn.buf))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data:
            self._close(fd)  # gone without a whole line: nothing was said
            return None
        conn.buf += data
        line, newline, _ = conn.buf.partition(b"\n")
        if not newline:
            if len(conn.buf) > LINE_MAX:
                self._refuse(fd, "answer too long")
            return None
        return self._judge(fd, line)

    def _judge(self, fd: int, line: bytes) -> Answer | None:
        """One whole answer: refused with one line, or taken (its answerer told so first)."""
        conn = self._conns[fd]
        request = self.request
        try:
            fields = decode_answer(request.id, line)
        except ValueError as exc:
            self._refuse(fd, str(exc))
            return None
        if self.held:
            self._refuse(fd, "no such pending request (not asked yet)")
            return None
        choice = fields["choice"]
        if request.kind == "dialog" and choice is not None and choice not in (request.choices or []):
            self._refuse(fd, f"choice {choice!r} is not one of {request.choices}")
            return None
        before = process_start(conn.pid)
        inside = ancestry.inside_guarded_session(conn.pid, root=str(self._ch.path.parent)) if before else None
        who = ancestry.identity(conn.pid, conn.uid)
        if before is None or process_start(conn.pid) != before:
            self._refuse(fd, "the answering process went away before it could be checked")
            return None
        if inside is not None:
            self._refused_from_inside(fd, inside, who)
            return None
        answered_by: dict[str, Any] = dict(who)
        if fields["vouched"]:
            answered_by = {**fields["vouched"], "relayed_by": dict(who)}
        # Tell the answerer first: an answer is taken exactly when its answerer hears so (one
        # that gave up meanwhile, EPIPE, was not told, and its answer is not taken).
        if not _reply(conn.sock, None):
            self._close(fd)
            return None
        self._close(fd)
        answer = Answer(fields["decision"], fields["scope"], fields["message"], "human", fields["choice"],
                        fields["by"], answered_by)
        self._end(answer, "answered")
        return answer

    def _refused_from_inside(self, fd: int, inside: str, who: ancestry.Identity) -> None:
        """An answer from a process the agent runs: refused, and said in the audit log (the first
        few times per request; a loop of them is counted in ``refused``)."""
        self.refused += 1
        if self.refused <= REFUSAL_ROWS:  # on record before the answerer hears of it
            request = self.request
            audit_record({"event": "answer-refused", "session_id": request.session_id,
                          "agent_type": request.agent_type, "agent_id": request.agent_id, "tool": request.tool,
                          "summary": f"answer refused: from inside session {inside}", "request_id": request.id,
                          "inside_session": inside, "answered_by": dict(who)})
        self._refuse(fd, f"answer refused: from inside session {inside}")

    def _refuse(self, fd: int, why: str) -> None:
        conn = self._conns.get(fd)
        if conn is not None:
            _reply(conn.sock, why)
            self._close(fd)

    def _close(self, fd: int) -> None:
        conn = self._conns.pop(fd, None)
        if conn is None:
            return
        try:
            self._poller.unregister(fd)
        except (OSError, ValueError):
            pass
        conn.sock.close()

    def _drain(self, listener: socket.socket | None = None) -> Answer | None:
        """Before an ending: the answerers already connected and the lines they already sent are
        heard (an answer that arrived in time wins), without waiting for anything."""
        listener = listener or self._listener
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                break
            sock.setblocking(False)
            creds = peer_creds(sock)
            if creds is None or creds[1] != os.getuid():
                sock.close()
                continue
            self._conns[sock.fileno()] = _Conn(sock, *creds)
            self._poller.register(sock.fileno(), select.EPOLLIN)
        for fd in list(self._conns):
            if fd in self._conns:
                answer = self._hear(fd)
                if answer is not None:
                    return answer
        return None

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
        self.request = self.request.replace(created=now, deadline=now + max(0.0, timeout))
        self.held = False
        record = _record(self.request, self._sock_id, held=False)
        try:
            self._ch.write_json_atomic(f"{self.request.id}.json", record)
        except OSError as exc:
            message = (f"claudeguard: the approval channel was lost (request {self.request.id}: "
                       f"{exc.strerror or exc}); denied")
            self._end_without("error", Answer("deny", message=message, decided_by="error"))
            return
        _announce(self._ch, self.request, notify)
        self.observed = True
        _observe("posted", self.request)

    # -- endings ------------------------------------------------------------------------------

    def _end_at_deadline(self, on_timeout: str) -> Answer:
        decision = on_timeout if on_timeout in DECISIONS else "deny"
        timeout = self.request.deadline - self.request.created
        word = "allowed" if decision == "allow" else "denied"
        message = (f"claudeguard: no answer within {timeout:g} s; {word} by approval.on_timeout "
                   f"(request {self.request.id})")
        return self._end_without("timeout", Answer(decision, message=message, decided_by="timeout"))

    def check(self) -> Answer | None:
        """For callers that wait with their own loop: hear ready answerers, verify the channel
        (republishing the request when its directory went away); an Answer when the request ended."""
        if self._answer is not None:
            return self._answer
        answer = self._serve(0)
        if answer is not None:
            return answer
        self._next_check = time.monotonic() + CHECK_EVERY_S
        return self._check_channel()

    def _check_channel(self) -> Answer | None:
        """The socket or the .json was removed or replaced under us: nobody can answer any more.
        The whole channel directory gone (systemd removing the runtime dir at logout, a tmp
        cleaner, ``rm -rf``) is not that: the request is published again, same id and deadline."""
        rid = self.request.id
        for _ in range(3):  # a dir removed between its check and its files' is one removed: again
            if self._dir_lost():
                answer = self._republish_or_retry()
                if answer is not None or self._dir_lost():
                    return answer  # None: tried again at the next check
            try:
                st = os.stat(f"{rid}.sock", dir_fd=self._ch.fd, follow_symlinks=False)
                intact = (st.st_dev, st.st_ino) == self._sock_id and self._ch.exists(f"{rid}.json")
            except FileNotFoundError:
                intact = False
            if intact:
                return None
            if not self._dir_lost():
                break
        message = (f"claudeguard: the approval channel was lost (request {rid}: its socket or request file was "
                   "removed); denied")
        return self._end_without("error", Answer("deny", message=message, decided_by="error"))

    def _republish_or_retry(self) -> Answer | None:
        """The dir is gone: publish the request again. An answer when the request ended (one that
        reached the old socket first, or denied after the last try); None when republished or
        to be tried again."""
        before = self._ch
        answer = self._republish()
        if answer is not None or self._answer is not None:
            return answer or self._answer
        if self._ch is not before:
            self._republish_failures = 0
            return None
        # Not republished: the dir could not be made or used. Often a race (its removal still
        # under way, another process making it at that instant): tried again soon, a few times,
        # then the request ends denied like any other lost channel.
        self._republish_failures += 1
        if self._republish_failures < REPUBLISH_TRIES:
            self._next_check = time.monotonic() + REPUBLISH_RETRY_S
            return None
        message = (f"claudeguard: the approval channel was lost and could not be made again (request "
                   f"{self.request.id}: {self._republish_error}); denied")
        return self._end_without("error", Answer("deny", message=message, decided_by="error"))

    def _dir_lost(self) -> bool:
        """Our channel directory is no longer at its path (removed, or another one there)."""
        try:
            st = os.stat(self._ch.path, follow_symlinks=False)
        except OSError:
            return True
        mine = os.fstat(self._ch.fd)
        return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino) or mine.st_nlink == 0

    def _republish(self) -> Answer | None:
        """Make the channel again and publish this request in it (a new socket and .json, made in
        the same order as ``post``). Returns an answer that reached the old socket first; None
        when republished, or when that failed (``_check_channel`` then tries again a few times
        before it ends the request with ``error``)."""
        old_ch, old_listener = self._ch, self._listener
        try:
            ch = ChannelDir()
        except GuardError as exc:
            self._republish_error = str(exc)
            return None
        try:
            listener, sock_id = _publish(ch, self.request, self.held, republished=time.time())
        except OSError as exc:
            ch.close()
            self._republish_error = f"publishing it again: {exc.strerror or exc}"
            return None
        # An answerer that connected to the old socket before it went is heard, then the old
        # socket closes: one that connects to it later reaches nothing.
        answer = self._drain(old_listener)
        try:
            self._poller.unregister(old_listener.fileno())
        except (OSError, ValueError):
            pass
        old_listener.close()
        old_ch.close()
        self._ch, self._listener, self._sock_id = ch, listener, sock_id
        self._poller.register(listener.fileno(), select.EPOLLIN)
        if answer is not None:
            return answer
        try:
            bells = self._ch.bells_fd(create=False)
            if bells >= 0:
                ring_all(bells)
        except OSError:
            pass
        return None

    def _end_without(self, reason: str, ending: Answer) -> Answer:
        """End without an answer of a human: what the answerers already sent is heard first (an
        answer that arrived in time wins), then the request ends with ``reason``."""
        answer = self._drain()
        if answer is not None:
            return answer
        self._end(ending, reason)
        return ending

    def _end(self, answer: Answer, reason: str) -> None:
        """Mark the ending, tell the answerers still connected, stop listening (a later one gets
        ECONNREFUSED, never a silent success), then remove the files, .json first."""
        self._answer = answer
        if self.observed:
            _observe("ended", self.request, answer)
        try:
            self._ch.create_marker(self.request.id, reason)
        except OSError:
            pass  # the directory itself is gone: nobody can answer any more anyway
        for fd in list(self._conns):
            self._refuse(fd, REFUSALS.get(reason, "no longer pending"))
        self._listener.close()
        self._poller.close()
        try:
            self._ch.remove_request(self.request.id)
        except OSError:
            pass
        self._ch.close()


def _reply(sock: socket.socket, error: str | None) -> bool:
    """The waiter's one reply line; False when the answerer is gone (it was not told)."""
    try:
        sock.sendall(encode_reply(error), SEND_FLAGS)
    except OSError:
        return False
    return True
