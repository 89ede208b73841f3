"""The approval channel in one process: post, list, answer, refusals, deadlines, withdrawal,
the answer line, doorbells, notify, file modes and the checks on the runtime dir. The waiter
judges every answer while it waits, so a test's waiter waits in a thread of its own
(``waiting``) or answers come from one (``answer_soon``)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudeguard import channel
from claudeguard.channel import requests, wire
from claudeguard.channel.model import Answer, new_id
from claudeguard.errors import InsecurePathError, NotFoundError, UsageError
from tests.shim_helpers import wait_until


@pytest.fixture
def chan(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path / "run" / "channel"


def post(timeout: float = 10, **kw) -> channel.Pending:
    args = dict(session_id="sess-1", agent_type=None, agent_id=None, tool="Bash", input={"command": "git push"},
                summary="Bash(git push)", cwd="/tmp/project", timeout=timeout)
    args.update(kw)
    return channel.post(**args)


def files(chan: Path) -> list[str]:
    """Request files left in the channel dir, and doorbells (the ``bells`` dir itself does not count)."""
    if not chan.exists():
        return []
    names = sorted(n for n in os.listdir(chan) if n != "bells")
    if (chan / "bells").exists():
        names += sorted(os.listdir(chan / "bells"))
    return names


class waiting(threading.Thread):
    """``pending.wait()`` in a thread: ``.answer`` once it returned (``join`` first)."""

    def __init__(self, pending: channel.Pending, **kw) -> None:
        super().__init__(daemon=True)
        self.pending, self.kw = pending, kw
        self.answer: Answer | None = None
        self.start()

    def run(self) -> None:
        self.answer = self.pending.wait(**self.kw)

    def result(self, timeout: float = 10) -> Answer:
        self.join(timeout)
        assert self.answer is not None, "the waiter did not end"
        return self.answer


class answer_soon(threading.Thread):
    """``channel.answer(...)`` in a thread, for a test whose own thread waits: ``.result()`` is
    the answered request, or the error it raised."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(daemon=True)
        self.args, self.kw = args, kw
        self.value: object = None
        self.start()

    def run(self) -> None:
        try:
            self.value = channel.answer(*self.args, **self.kw)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self.value = exc

    def result(self, timeout: float = 15) -> object:
        self.join(timeout)
        assert not self.is_alive(), "the answer did not return"
        return self.value


def _task_state(tid: int) -> str | None:
    """This process's thread ``tid``: R (running), S (asleep in a wait), ...; None when gone."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0]
    except OSError:
        return None


def until(cond, timeout: float = 5.0, step: float = 0.01):  # type: ignore[no-untyped-def]
    return wait_until(cond, timeout, interval=step)


# -- the happy path ------------------------------------------------------------------------


def test_post_list_answer_wait(chan):
    pending = post(agent_type="Explore", agent_id="a1", extra={"tool_use_id": "toolu_1"})
    req = pending.request
    assert len(req.id) == 16 and req.id == req.id.lower() and req.id.isalnum()
    [listed] = channel.list_pending()
    assert listed.id == req.id and listed.agent_type == "Explore" and listed.agent_id == "a1"
    assert listed.input == {"command": "git push"} and listed.extra == {"tool_use_id": "toolu_1"}
    assert 0 <= listed.age_s < 5 and 5 < listed.deadline_s <= 10 and listed.pid == os.getpid()
    waiter = waiting(pending)
    answered = channel.answer(req.id[:6], "allow", scope="session", message="go", by="test")
    assert answered.id == req.id  # returned only once the waiter took it
    answer = waiter.result()
    me = {"uid": os.getuid(), "pid": os.getpid(), "tty": answer.answered_by["tty"],
          "command": " ".join(Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode().split("\0")).strip()[:300]}
    assert answer == Answer("allow", "session", "go", "human", None, "test", me)  # who answered, as the waiter saw it
    assert channel.list_pending() == []
    assert files(chan) == []


def test_deny_message_reaches_waiter_and_second_answer_refused(chan):
    pending = post()
    waiter = waiting(pending)
    channel.answer(pending.request.id, "deny", message="not on main")
    answer = waiter.result()
    assert (answer.decision, answer.message, answer.decided_by) == ("deny", "not on main", "human")
    with pytest.raises(NotFoundError, match="no such pending request") as exc:
        channel.answer(pending.request.id, "allow")
    assert exc.value.exit_code == 1 and "\n" not in str(exc.value)


def test_two_answers_at_once_one_is_taken_the_other_told_already_answered(chan):
    pending = post()
    rid = pending.request.id
    first, second = answer_soon(rid, "allow", by="one"), answer_soon(rid, "deny", by="two")
    # The waiter hears one, takes it and tells it so; the other is told it came too late.
    answer = pending.wait()
    results = [first.result(), second.result()]
    taken = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(taken) == 1 and len(refused) == 1
    assert answer.by == ("one" if results[0] is taken[0] else "two")
    assert re.search("already answered|no longer pending|no such pending request", str(refused[0]))


def test_answer_after_waiter_took_it_is_refused(chan):
    pending = post()
    taken = answer_soon(pending.request.id, "allow")
    assert until(lambda: pending.poll() is not None)
    assert not isinstance(taken.result(), Exception)
    with pytest.raises(NotFoundError):
        channel.answer(pending.request.id, "deny")


def test_listing_shares_sessions_and_filters(chan):
    a = post(session_id="s1")
    b = post(session_id="s2", agent_type="general-purpose", agent_id="x")
    try:
        assert [r.id for r in channel.list_pending()] == [a.request.id, b.request.id]  # oldest first
        assert [r.id for r in channel.list_pending("s2")] == [b.request.id]
    finally:
        a.withdraw()
        b.withdraw()
    assert files(chan) == []


def test_unknown_short_ambiguous_and_bad_ids(chan):
    with pytest.raises(NotFoundError, match="no such pending request"):
        channel.answer("abcdefgh", "allow")
    with pytest.raises(NotFoundError, match="at least 6"):
        channel.answer("abc", "allow")
    with pytest.raises(NotFoundError):
        channel.answer("../../etc", "allow")
    with pytest.raises(UsageError):
        channel.answer("abcdefgh", "maybe")
    with pytest.raises(UsageError):
        channel.answer("abcdefgh", "allow", scope="galaxy")
    pending = post()
    try:
        waiter = waiting(pending)
        channel.answer(pending.request.id.upper(), "allow")  # pasted in capitals: still found
        assert waiter.result().decision == "allow"
    finally:
        pending.withdraw()
    assert files(chan) == []


def test_ambiguous_prefix_refused(chan, monkeypatch):
    ids = iter(["aaaaaaaaaaaaaaaa", "aaaaaaabbbbbbbbb"])
    monkeypatch.setattr(requests, "new_id", lambda: next(ids))
    one, two = post(), post()
    try:
        with pytest.raises(NotFoundError, match="matches 2 requests"):
            channel.answer("aaaaaaa", "allow")
        waiter = waiting(two)
        channel.answer("aaaaaaab", "deny")
        assert waiter.result().decision == "deny"
    finally:
        one.withdraw()
        two.withdraw()


# -- deadlines -------------------------------------------------------------------------------


def test_deadline_denies_and_says_why(chan):
    pending = post(timeout=0.3)
    started = time.monotonic()
    answer = pending.wait()
    assert time.monotonic() - started < 20  # ends at its deadline (0.3 s on a quiet machine)
    assert (answer.decision, answer.decided_by) == ("deny", "timeout")
    assert "no answer within 0.3 s" in answer.message and pending.request.id in answer.message
    assert files(chan) == []
    with pytest.raises(NotFoundError):
        channel.answer(pending.request.id, "allow")


def test_on_timeout_allow(chan):
    answer = post(timeout=0.1).wait(on_timeout="allow")
    assert (answer.decision, answer.decided_by) == ("allow", "timeout")
    assert "allowed by approval.on_timeout" in answer.message


def test_expired_request_is_unlisted_and_refused(chan, monkeypatch):
    pending = post(timeout=0.2)
    try:
        # past the deadline, but nobody waits: the files are still there
        wait_until(lambda: time.time() > pending.request.deadline, 60, "the deadline to pass")
        assert channel.list_pending() == []
        with pytest.raises(NotFoundError, match="expired"):
            channel.answer(pending.request.id, "allow")
        assert pending.wait().decided_by == "timeout"
    finally:
        pending.withdraw()
    assert files(chan) == []


def sent(answerer: answer_soon) -> bool:
    """The answerer sent its line and sleeps waiting for the waiter's reply."""
    return bool(answerer.native_id) and _task_state(answerer.native_id) == "S"


def test_answer_that_arrived_just_before_deadline_wins(chan):
    pending = post(timeout=0.5)
    answerer = answer_soon(pending.request.id, "allow")
    # the waiter was not looking; at its deadline the answer waits on its socket
    wait_until(lambda: sent(answerer), 60, "the answer to be sent")
    wait_until(lambda: time.time() > pending.request.deadline, 60, "the deadline to pass")
    answer = pending.wait()
    assert (answer.decision, answer.decided_by) == ("allow", "human")
    assert not isinstance(answerer.result(), Exception)  # and its answerer was told so


# -- the caller's side: poll, fileno, withdraw -------------------------------------------------


def test_poll_and_fileno_for_callers_that_select(chan):
    import select

    pending = post()
    assert pending.poll() is None
    assert select.select([pending], [], [], 0)[0] == []
    answerer = answer_soon(pending.request.id, "allow", by="ctl")
    answer = None
    while answer is None:  # readable at the connection, then at its line
        assert select.select([pending], [], [], 2)[0] == [pending]
        answer = pending.poll()
    assert answer.by == "ctl" and pending.done
    assert not isinstance(answerer.result(), Exception)
    assert pending.poll() is answer and pending.wait() is answer
    assert files(chan) == []


def test_withdraw_removes_and_refuses_late_answers(chan):
    pending = post()
    assert pending.withdraw() is None
    assert channel.list_pending() == [] and files(chan) == []
    with pytest.raises(NotFoundError):
        channel.answer(pending.request.id, "allow")
    assert pending.withdraw() is not None  # idempotent; returns the recorded ending
    assert pending.poll().decided_by == "withdrawn"


def test_withdraw_returns_an_answer_that_raced_in(chan):
    pending = post()
    answerer = answer_soon(pending.request.id, "deny", message="channel was first")
    wait_until(lambda: sent(answerer), 60, "the answer to be sent")
    raced = pending.withdraw()
    assert raced is not None and raced.message == "channel was first"
    assert not isinstance(answerer.result(), Exception)
    assert files(chan) == []


def test_context_manager_withdraws(chan):
    with post() as pending:
        assert len(channel.list_pending()) == 1
    assert pending.done and files(chan) == []


def test_exception_in_wait_cleans_up(chan):
    pending = post(timeout=30)

    def interrupt() -> None:
        raise KeyboardInterrupt

    # A caller's signal handler that raises (e.g. SIGTERM -> SystemExit) ends the wait cleanly.
    import signal

    old = signal.signal(signal.SIGALRM, lambda *a: interrupt())
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    try:
        with pytest.raises(KeyboardInterrupt):
            pending.wait()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert channel.list_pending() == [] and files(chan) == []


def test_wait_wakes_at_once_from_another_thread(chan):
    pending = post()
    held: list[float] = []

    def waiter() -> None:
        pending.wait()
        held.append(time.perf_counter())

    thread = threading.Thread(target=waiter)
    thread.start()
    # the waiter asleep in its wait (its task's state in /proc), so that the answer must wake it
    wait_until(lambda: thread.native_id and _task_state(thread.native_id) == "S", 60, "the waiter to block")
    sent = time.perf_counter()
    channel.answer(pending.request.id, "allow")
    thread.join(60)
    assert held and held[0] - sent < 0.5  # woken by the socket, not by a timer


# -- dialogs ----------------------------------------------------------------------------------


def test_dialog_choice(chan):
    pending = post(choices=["1. Yes", "2. Yes, and always", "3. No"])  # with choices: a dialog's request
    assert pending.request.kind == "dialog" and post().request.kind == "permission"
    with pytest.raises(UsageError, match="not one of"):
        channel.answer(pending.request.id, "allow", choice="4. Maybe")
    assert channel.list_pending()[0].choices == ["1. Yes", "2. Yes, and always", "3. No"]
    waiter = waiting(pending)
    # The waiter checks the choice too: a line written by hand names none of the others.
    assert "not one of" in raw_answer(chan, pending.request.id, {"decision": "allow", "choice": "9. Evil"})
    channel.answer(pending.request.id, "allow", choice="2. Yes, and always")
    assert waiter.result().choice == "2. Yes, and always"


# -- the one-line answer ------------------------------------------------------------------------


def test_long_message_is_cut_to_one_line(chan):
    pending = post()
    waiter = waiting(pending)
    channel.answer(pending.request.id, "deny", message="é" * 10000, by="b" * 1000)
    answer = waiter.result()
    assert answer.message.endswith("…") and answer.message.startswith("éé")
    assert len(answer.by) == wire.BY_MAX


@settings(max_examples=200, deadline=None, database=None)
@given(message=st.one_of(st.none(), st.text(max_size=20000)), by=st.one_of(st.none(), st.text(max_size=300)),
       decision=st.sampled_from(["allow", "deny"]), scope=st.sampled_from(["once", "agent", "session", "forever"]))
def test_answer_line_fits_and_round_trips(message, by, decision, scope):
    rid = new_id()
    line = wire.encode_answer(rid, decision, scope=scope, message=message, by=by)
    assert len(line) <= wire.LINE_MAX and line.endswith(b"\n") and line.count(b"\n") == 1
    back = wire.decode_answer(rid, line[:-1])
    assert (back["decision"], back["scope"]) == (decision, scope)
    if message is not None and not back["message"].endswith("…"):
        assert back["message"] == message


def test_misrouted_or_garbage_line_is_refused_not_taken():
    rid = new_id()
    other = wire.encode_answer(new_id(), "allow")
    for line, why in ((other[:-1], "another request"), (b"{nope", "unreadable"),
                      (b'{"id": "%s", "decision": "yes"}' % rid.encode(), "without allow or deny")):
        with pytest.raises(ValueError, match=why):
            wire.decode_answer(rid, line)


def raw_answer(chan: Path, rid: str, fields: dict, *, line: bytes | None = None) -> str | None:
    """Connect to a request's socket by hand and send one line: the waiter's refusal, None when taken."""
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    try:
        sock.connect(str(chan / f"{rid}.sock"))
        sock.sendall(line if line is not None else (json.dumps({"id": rid, **fields}) + "\n").encode())
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    finally:
        sock.close()
    return wire.decode_reply(reply)


def test_a_bad_line_on_the_socket_is_refused_and_the_request_waits_on(chan):
    pending = post()
    waiter = waiting(pending)
    rid = pending.request.id
    assert "another request" in raw_answer(chan, rid, {}, line=wire.encode_answer(new_id(), "allow"))
    assert "unreadable" in raw_answer(chan, rid, {}, line=b"garbage\n")
    assert "without allow or deny" in raw_answer(chan, rid, {"decision": "maybe"})
    assert "too long" in raw_answer(chan, rid, {}, line=b"x" * (wire.LINE_MAX + 10))
    assert channel.list_pending()[0].id == rid  # nothing of it ended the request
    assert raw_answer(chan, rid, {"decision": "deny", "message": "by hand"}) is None  # a good one is taken
    answer = waiter.result()
    assert (answer.decision, answer.message, answer.decided_by) == ("deny", "by hand", "human")
    assert files(chan) == []


def test_an_answerer_that_sends_nothing_is_dropped_and_holds_nothing_up(chan, monkeypatch):
    import socket

    monkeypatch.setattr(requests, "CONN_READ_S", 0.3)
    pending = post()
    waiter = waiting(pending)
    mute = socket.socket(socket.AF_UNIX)
    mute.connect(str(chan / f"{pending.request.id}.sock"))
    try:
        mute.settimeout(5)
        assert wire.decode_reply(mute.recv(4096)) == "no whole answer within the time allowed"
        channel.answer(pending.request.id, "allow")  # meanwhile, and after, others are heard
        assert waiter.result().decision == "allow"
    finally:
        mute.close()


# -- files, modes and the runtime dir checks ---------------------------------------------------


def test_modes_are_private(chan):
    pending = post()
    try:
        assert stat.S_IMODE(os.stat(chan).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(chan.parent).st_mode) == 0o700
        rid = pending.request.id
        for suffix in (".json", ".sock"):
            st_ = os.lstat(chan / f"{rid}{suffix}")
            assert stat.S_IMODE(st_.st_mode) == 0o600 and st_.st_uid == os.getuid(), suffix
        assert stat.S_ISSOCK(os.lstat(chan / f"{rid}.sock").st_mode)
        record = json.loads((chan / f"{rid}.json").read_text())
        assert record["waiter"]["pid"] == os.getpid() and record["request"]["id"] == rid
    finally:
        pending.withdraw()


def test_refuses_runtime_dir_open_to_others(chan):
    chan.parent.mkdir(mode=0o700)
    os.chmod(chan.parent, 0o755)
    with pytest.raises(InsecurePathError, match="0755"):
        post()
    with pytest.raises(InsecurePathError):
        channel.list_pending()


def test_refuses_channel_dir_that_is_a_symlink(chan, tmp_path):
    chan.parent.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, chan)
    with pytest.raises(InsecurePathError, match="symlink"):
        post()
    assert os.listdir(elsewhere) == []


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make files owned by another user")
def test_refuses_dir_owned_by_someone_else_and_their_symlinks(chan, tmp_path):
    chan.mkdir(parents=True, mode=0o700)
    os.chmod(chan.parent, 0o700)
    os.chown(chan, 65534, 65534)
    with pytest.raises(InsecurePathError, match="owned by uid 65534"):
        post()
    os.chown(chan, 0, 0)
    # A symlink in the runtime path planted by another user is not followed.
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    link = tmp_path / "planted"
    os.symlink(target, link)
    os.lchown(link, 65534, 65534)
    os.environ["CLAUDEGUARD_RUNTIME_DIR"] = str(link / "run")
    with pytest.raises(InsecurePathError, match="symlink owned by uid 65534"):
        post()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run as another user")
def test_another_user_cannot_list_read_or_answer(chan, tmp_path):
    pending = post()
    rid = pending.request.id
    try:
        # Let the other user reach the runtime dir's parent, so only our own modes stop them.
        os.chmod(tmp_path, 0o711)
        pid = os.fork()
        if pid == 0:  # the other user: a forked child that drops to nobody and reports a bitmask
            code = 0
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                import socket

                ops = (lambda: os.listdir(chan), lambda: os.open(chan / f"{rid}.json", os.O_RDONLY),
                       lambda: socket.socket(socket.AF_UNIX).connect(str(chan / f"{rid}.sock")))
                for bit, op in enumerate(ops):
                    try:
                        op()
                        code |= 1 << bit
                    except PermissionError:
                        pass
            finally:
                os._exit(code if code else 100)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 100  # every operation was refused
        assert [r.id for r in channel.list_pending()] == [rid]
    finally:
        os.chmod(tmp_path, 0o700)
        pending.withdraw()


# -- the console's doorbell ---------------------------------------------------------------------


def test_wait_for_new_wakes_on_post_and_times_out(chan):
    assert channel.wait_for_new(set(), 0.1) == []
    result: list = []

    def console() -> None:
        result.append((channel.wait_for_new(set(), 5), time.perf_counter()))

    thread = threading.Thread(target=console)
    thread.start()
    assert until(lambda: (chan / "bells").exists() and any(n.endswith(".bell") for n in os.listdir(chan / "bells")))
    posted = time.perf_counter()
    pending = post()
    thread.join(60)
    try:
        [(new, woke)] = result
        assert [r.id for r in new] == [pending.request.id]
        assert woke - posted < 0.5  # the doorbell, not the timeout
        assert os.listdir(chan / "bells") == []  # the bell is removed
        assert channel.wait_for_new({pending.request.id}, 0.05) == []
    finally:
        pending.withdraw()


def test_stale_doorbell_of_a_dead_console_is_removed(chan):
    pending = post()
    pending.withdraw()
    bells = chan / "bells"
    bells.mkdir(mode=0o700)
    os.mkfifo(bells / "deadbeef.bell", 0o600)  # nobody reads it
    pending = post()
    pending.withdraw()
    assert os.listdir(bells) == []


# -- notify ---------------------------------------------------------------------------------


def test_notify_runs_detached_with_placeholders(chan, tmp_path):
    out = tmp_path / "notified"
    script = ("import os,sys; "
              "open(sys.argv[1],'w').write(str(os.getpid())+' '+str(os.getsid(0)==os.getpid())+' '+sys.argv[2])")
    pending = post(agent_type="Explore",
                   notify=[sys.executable, "-c", script, str(out), "{id}|{tool}|{session}|{agent}|{summary}|{other}"])
    try:
        assert until(lambda: out.exists() and out.read_text().count("|") == 5)
        pid, own_session, text = out.read_text().split(" ", 2)
        assert own_session == "True"
        assert text == f"{pending.request.id}|Bash|sess-1|Explore|Bash(git push)|{{other}}"
        assert until(lambda: not Path(f"/proc/{pid}").exists()
                     or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3])
    finally:
        pending.withdraw()


def test_notify_failure_is_logged_not_fatal(chan, tmp_path):
    pending = post(notify=[str(tmp_path / "no-such-notifier"), "{summary}"])
    pending.withdraw()
    log = tmp_path / "log" / "audit.jsonl"
    [event] = [json.loads(line) for line in log.read_text().splitlines()]
    assert event["event"] == "notify-failed" and event["request_id"] == pending.request.id
    assert "cannot start" in event["error"] and event["time"]
    pending = post(notify=[sys.executable, "-c", "raise SystemExit(3)"])
    try:
        assert until(lambda: len(log.read_text().splitlines()) == 2)
        assert "status 3" in json.loads(log.read_text().splitlines()[1])["error"]
    finally:
        pending.withdraw()


def test_answering_command_with_default_sigpipe_survives_a_closed_reader():
    import subprocess

    code = (
        "import signal, socket\n"
        "from claudeguard.channel.requests import _reply\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
        "a, b = socket.socketpair(); b.close()\n"
        "if not _reply(a, None): print('refused, alive')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (out.returncode, out.stdout.strip()) == (0, "refused, alive")


def test_unusable_runtime_dir_is_one_clean_error(chan, tmp_path, monkeypatch):
    from claudeguard.errors import GuardError

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(blocker / "run"))
    with pytest.raises(GuardError, match="approval channel"):
        post()
    with pytest.raises(GuardError, match="approval channel"):
        channel.list_pending()


# -- a held request (a pty session's permission dialog: its router owns it) ------------------


def test_a_held_request_is_listed_for_its_owner_only_until_it_says_go(chan, tmp_path):
    marker = tmp_path / "notified"
    pending = post(timeout=30, held=True, extra={"via": "dialog"}, notify=["touch", str(marker)])
    rid = pending.request.id
    assert channel.list_pending() == [] and [r.id for r in channel.list_pending("sess-1", held=True)] == [rid]
    with pytest.raises(NotFoundError, match="not asked yet"):
        channel.answer(rid, "allow")
    assert pending.owner_says() is None and not marker.exists()
    time.sleep(0.05)
    channel.tell_waiter(rid, "go")
    assert pending.owner_says() == "go"
    pending.release()
    [listed] = channel.list_pending()
    assert listed.id == rid and listed.deadline == pytest.approx(time.time() + 30, abs=1)  # counted from the release
    assert channel.list_pending(held=True) == []
    assert until(marker.exists)  # approvers are told at the release, not before
    waiter = waiting(pending)
    channel.answer(rid, "allow")
    assert waiter.result().decision == "allow"
    assert files(chan) == []


def test_a_held_request_refuses_an_answer_sent_to_its_socket_by_hand(chan):
    pending = post(timeout=30, held=True)
    rid = pending.request.id
    answerer = threading.Thread(target=lambda: result.append(raw_answer(chan, rid, {"decision": "allow"})))
    result: list = []
    answerer.start()
    assert until(lambda: (pending.check(), result)[1], 10)  # the owner's loop hears it: refused
    assert result == ["no such pending request (not asked yet)"]
    assert not pending.done
    pending.withdraw()


def test_a_dropped_request_is_withdrawn_with_its_owners_word(chan):
    pending = post(held=True)
    rid = pending.request.id
    channel.tell_waiter(rid, "drop")
    assert pending.owner_says() == "drop"
    assert pending.withdraw() is None
    assert files(chan) == []
    channel.tell_waiter(rid, "drop")  # told again after it ended: nothing is left behind
    assert files(chan) == []
    with pytest.raises(UsageError):
        channel.tell_waiter("../x", "go")
