"""The approval channel in one process: post, list, answer, refusals, deadlines, withdrawal,
the pipe line format, doorbells, notify, file modes and the checks on the runtime dir."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claudeguard import channel
from claudeguard.channel import fifo, requests
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
    answered = channel.answer(req.id[:6], "allow", scope="session", message="go", by="test")
    assert answered.id == req.id
    answer = pending.wait()
    assert answer == Answer("allow", "session", "go", "human", None, "test")
    assert channel.list_pending() == []
    assert files(chan) == []


def test_deny_message_reaches_waiter_and_second_answer_refused(chan):
    pending = post()
    channel.answer(pending.request.id, "deny", message="not on main")
    with pytest.raises(NotFoundError, match="already answered"):
        channel.answer(pending.request.id, "allow")  # the answer is still in the pipe
    answer = pending.wait()
    assert (answer.decision, answer.message, answer.decided_by) == ("deny", "not on main", "human")
    with pytest.raises(NotFoundError, match="no such pending request") as exc:
        channel.answer(pending.request.id, "allow")
    assert exc.value.exit_code == 1 and "\n" not in str(exc.value)


def test_answer_after_waiter_took_it_is_refused(chan):
    pending = post()
    channel.answer(pending.request.id, "allow")
    assert pending.poll() is not None
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
        channel.answer(pending.request.id.upper(), "allow")  # pasted in capitals: still found
        assert pending.wait().decision == "allow"
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
        channel.answer("aaaaaaab", "deny")
        assert two.wait().decision == "deny"
    finally:
        one.withdraw()
        two.withdraw()


# -- deadlines -------------------------------------------------------------------------------


def test_deadline_denies_and_says_why(chan):
    pending = post(timeout=0.3)
    started = time.monotonic()
    answer = pending.wait()
    assert time.monotonic() - started < 1.5
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
        wait_until(lambda: time.time() > pending.request.deadline, 5, "the deadline to pass")
        assert channel.list_pending() == []
        with pytest.raises(NotFoundError, match="expired"):
            channel.answer(pending.request.id, "allow")
        assert pending.wait().decided_by == "timeout"
    finally:
        pending.withdraw()
    assert files(chan) == []


def test_answer_that_arrived_just_before_deadline_wins(chan):
    pending = post(timeout=0.2)
    channel.answer(pending.request.id, "allow")
    # the waiter was not looking; at its deadline the answer is in the pipe
    wait_until(lambda: time.time() > pending.request.deadline, 5, "the deadline to pass")
    answer = pending.wait()
    assert (answer.decision, answer.decided_by) == ("allow", "human")


# -- the caller's side: poll, fileno, withdraw -------------------------------------------------


def test_poll_and_fileno_for_callers_that_select(chan):
    import select

    pending = post()
    assert pending.poll() is None
    assert select.select([pending], [], [], 0)[0] == []
    channel.answer(pending.request.id, "allow", by="ctl")
    assert select.select([pending], [], [], 2)[0] == [pending]
    answer = pending.poll()
    assert answer is not None and answer.by == "ctl" and pending.done
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
    channel.answer(pending.request.id, "deny", message="channel was first")
    raced = pending.withdraw()
    assert raced is not None and raced.message == "channel was first"
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
    wait_until(lambda: thread.native_id and _task_state(thread.native_id) == "S", 5, "the waiter to block")
    sent = time.perf_counter()
    channel.answer(pending.request.id, "allow")
    thread.join(5)
    assert held and held[0] - sent < 0.5  # woken by the pipe, not by a timer


# -- dialogs ----------------------------------------------------------------------------------


def test_dialog_choice(chan):
    with pytest.raises(UsageError):
        post(kind="dialog")
    with pytest.raises(UsageError):
        post(kind="menu")
    pending = post(kind="dialog", choices=["1. Yes", "2. Yes, and always", "3. No"])
    with pytest.raises(UsageError, match="not one of"):
        channel.answer(pending.request.id, "allow", choice="4. Maybe")
    assert channel.list_pending()[0].choices == ["1. Yes", "2. Yes, and always", "3. No"]
    channel.answer(pending.request.id, "allow", choice="2. Yes, and always")
    assert pending.wait().choice == "2. Yes, and always"


# -- the one-line answer ------------------------------------------------------------------------


def test_long_message_is_cut_to_one_atomic_write(chan):
    pending = post()
    channel.answer(pending.request.id, "deny", message="é" * 10000, by="b" * 1000)
    answer = pending.wait()
    assert answer.message.endswith("…") and answer.message.startswith("éé")
    assert len(answer.by) == fifo.BY_MAX


@settings(max_examples=200, deadline=None, database=None)
@given(message=st.one_of(st.none(), st.text(max_size=6000)), by=st.one_of(st.none(), st.text(max_size=300)),
       decision=st.sampled_from(["allow", "deny"]), scope=st.sampled_from(["once", "agent", "session", "forever"]))
def test_answer_line_fits_pipe_buf_and_round_trips(message, by, decision, scope):
    rid = new_id()
    line = fifo.encode_answer(rid, Answer(decision, scope, message, by=by))
    assert len(line) < fifo.PIPE_BUF and line.endswith(b"\n") and line.count(b"\n") == 1
    back = fifo.decode_answer(rid, line[:-1])
    assert (back.decision, back.scope, back.decided_by) == (decision, scope, "human")
    if message is not None and len(line) < fifo.LINE_MAX - 100 and not back.message.endswith("…"):
        assert back.message == message


def test_misrouted_or_garbage_line_is_an_error_not_an_allow():
    rid = new_id()
    other = fifo.encode_answer(new_id(), Answer("allow"))
    assert fifo.decode_answer(rid, other[:-1]).decided_by == "error"
    assert fifo.decode_answer(rid, b"{nope").decision == "deny"
    assert fifo.decode_answer(rid, b'{"id": "%s", "decision": "yes"}' % rid.encode()).decision == "deny"


# -- files, modes and the runtime dir checks ---------------------------------------------------


def test_modes_are_private(chan):
    pending = post()
    try:
        assert stat.S_IMODE(os.stat(chan).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(chan.parent).st_mode) == 0o700
        rid = pending.request.id
        for suffix in (".json", ".fifo", ".lock"):
            st_ = os.lstat(chan / f"{rid}{suffix}")
            assert stat.S_IMODE(st_.st_mode) == 0o600 and st_.st_uid == os.getuid(), suffix
        assert stat.S_ISFIFO(os.lstat(chan / f"{rid}.fifo").st_mode)
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
                ops = (lambda: os.listdir(chan), lambda: os.open(chan / f"{rid}.json", os.O_RDONLY),
                       lambda: os.open(chan / f"{rid}.fifo", os.O_WRONLY | os.O_NONBLOCK))
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
    thread.join(6)
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
        "import os, signal\n"
        "from claudeguard.channel.requests import _write_no_sigpipe\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
        "r, w = os.pipe(); os.close(r)\n"
        "try: _write_no_sigpipe(w, b'x')\n"
        "except BrokenPipeError: print('refused, alive')\n"
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
    channel.answer(rid, "allow")
    assert pending.wait().decision == "allow"
    assert files(chan) == []


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
