"""The approval channel when processes die or files vanish: a requester killed while waiting,
an approver killed (or stopped) mid-answer, the socket or the whole runtime dir removed under a
waiting request, and stale files left by crashed sessions. Each ends in a stated outcome within
the deadline, with no process or file left behind."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudeguard import channel
from claudeguard.channel import answers, requests, wire
from claudeguard.errors import NotFoundError
from claudeguard.procs import process_start
from tests.shim_helpers import wait_until
from tests.shim_helpers import remove_at_once
from tests.test_channel_requests import answer_soon, raw_answer, waiting

REQUESTER = """
import json, os, sys, time
from claudeguard import channel
p = channel.post(session_id='killed', agent_type='Explore', agent_id='a9', tool='Bash', input={'command': 'make'},
                 summary='Bash(make)', cwd='/', timeout=float(sys.argv[1]))
if sys.argv[2] == 'close-sock':
    p._listener.close()  # alive, but no longer listening: as if its socket were lost
    print(p.request.id, flush=True)
    time.sleep(60)
print(p.request.id, flush=True)
a = p.wait()
print(json.dumps(a.__dict__), flush=True)
"""

APPROVER = """
import os, socket, sys, time
from claudeguard.channel import wire
chan, rid, stage = sys.argv[1:4]
sock = socket.socket(socket.AF_UNIX)
sock.connect(os.path.join(chan, rid + '.sock'))
if stage == 'sent':
    sock.sendall(wire.encode_answer(rid, 'deny', message='from the approver'))
print(stage, flush=True)
print(wire.decode_reply(sock.recv(4096)), flush=True)  # what it was told, once it reads
time.sleep(60)
"""


@pytest.fixture
def chan(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path / "run" / "channel"


@pytest.fixture
def procs():
    """Start worker processes; every one is killed and reaped by pid at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(code: str, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()


def read_line(proc: subprocess.Popen, timeout: float = 15.0) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "worker said nothing in time"
    return proc.stdout.readline().strip()


def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    os.kill(proc.pid, sig)


def request_files(chan: Path, rid: str) -> list[str]:
    return sorted(n for n in os.listdir(chan) if rid in n) if chan.exists() else []


def leftovers(chan: Path) -> list[str]:
    if not chan.exists():
        return []
    return [n for n in os.listdir(chan) if n != "bells"] + (os.listdir(chan / "bells")
                                                            if (chan / "bells").exists() else [])


def until(cond, timeout: float):  # type: ignore[no-untyped-def]
    return wait_until(cond, timeout, interval=0.01)


def post(timeout: float = 10) -> channel.Pending:
    return channel.post(session_id="s", agent_type=None, agent_id=None, tool="Bash", input={"command": "ls"},
                        summary="Bash(ls)", cwd="/", timeout=timeout)


# -- the requester goes away --------------------------------------------------------------------


def test_killed_requester_is_withdrawn_long_before_its_deadline(chan, procs):
    # (within CHECK_EVERY_S on a quiet machine; here, anywhere well short of its 30 s deadline)
    proc = procs(REQUESTER, "30", "wait")
    rid = read_line(proc)
    [req] = channel.list_pending()
    assert (req.id, req.agent_type, req.agent_id, req.pid) == (rid, "Explore", "a9", proc.pid)
    kill(proc)  # not reaped yet: a zombie does not count as waiting
    started = time.monotonic()
    assert until(lambda: channel.list_pending() == [], 25)
    assert time.monotonic() - started < 25
    assert request_files(chan, rid) == []
    with pytest.raises(NotFoundError):
        channel.answer(rid, "allow")


def test_answer_to_a_killed_requester_is_refused_and_cleans_up(chan, procs):
    proc = procs(REQUESTER, "30", "wait")
    rid = read_line(proc)
    kill(proc)
    proc.wait(10)
    with pytest.raises(NotFoundError, match="caller went away"):
        channel.answer(rid, "allow")
    assert request_files(chan, rid) == []


def test_requester_alive_but_not_listening_is_refused_and_withdrawn(chan, procs):
    proc = procs(REQUESTER, "30", "close-sock")
    rid = read_line(proc)
    with pytest.raises(NotFoundError, match="stopped listening"):
        channel.answer(rid, "allow")
    assert request_files(chan, rid) == [] and channel.list_pending() == []


def test_stopped_requester_past_deadline_is_removed_then_ends_with_timeout(chan, procs, monkeypatch):
    monkeypatch.setattr(answers, "GRACE_S", 0.2)
    proc = procs(REQUESTER, "0.5", "wait")
    rid = read_line(proc)
    kill(proc, signal.SIGSTOP)
    assert until(lambda: channel.list_pending() == [] and request_files(chan, rid) == [], 5.0)
    kill(proc, signal.SIGCONT)
    answer = json.loads(read_line(proc))
    assert (answer["decision"], answer["decided_by"]) == ("deny", "timeout")
    assert proc.wait(10) == 0
    assert leftovers(chan) == []


# -- the approver goes away -------------------------------------------------------------------


def test_an_approver_connected_but_silent_holds_nobody_up(chan, procs):
    pending = post(timeout=20)
    rid = pending.request.id
    waiter = waiting(pending)
    approver = procs(APPROVER, str(chan), rid, "connected")
    assert read_line(approver) == "connected"
    channel.answer(rid, "allow", message="second try")  # no claim to wait for: heard at once
    answer = waiter.result()
    assert (answer.decision, answer.message) == ("allow", "second try")
    assert read_line(approver) == "already answered"  # the silent one is told when the call ends
    assert leftovers(chan) == []


def test_approver_killed_after_sending_its_answer_was_never_told_so_it_is_not_taken(chan, procs):
    pending = post(timeout=20)
    rid = pending.request.id
    approver = procs(APPROVER, str(chan), rid, "sent")
    assert read_line(approver) == "sent"
    kill(approver)
    approver.wait(10)
    # Its line is heard only now: the reply finds nobody (EPIPE), so the answer is not taken and
    # the request goes on waiting (an answer is taken exactly when its answerer is told so).
    assert pending.poll() is None and not pending.done
    assert [r.id for r in channel.list_pending()] == [rid]
    taken = answer_soon(rid, "allow", message="second try")
    answer = pending.wait()
    assert not isinstance(taken.result(), Exception)
    assert (answer.decision, answer.message) == ("allow", "second try")
    assert leftovers(chan) == []


def test_approver_stopped_after_sending_is_taken_and_told_when_it_resumes(chan, procs):
    pending = post(timeout=20)
    approver = procs(APPROVER, str(chan), pending.request.id, "sent")
    assert read_line(approver) == "sent"
    kill(approver, signal.SIGSTOP)
    answer = pending.wait()  # its reply waits in its socket: told, so taken
    assert (answer.decision, answer.message, answer.answered_by["pid"]) == ("deny", "from the approver", approver.pid)
    kill(approver, signal.SIGCONT)
    assert read_line(approver) == "None"  # decode_reply: no refusal
    assert leftovers(chan) == []


def test_approver_stopped_before_sending_request_ends_at_its_deadline(chan, procs):
    pending = post(timeout=0.5)
    approver = procs(APPROVER, str(chan), pending.request.id, "connected")
    assert read_line(approver) == "connected"
    kill(approver, signal.SIGSTOP)
    started = time.monotonic()
    answer = pending.wait()
    assert time.monotonic() - started < 0.5 + 20  # not held by the stopped approver
    assert (answer.decision, answer.decided_by) == ("deny", "timeout")
    assert leftovers(chan) == []


# -- the channel's files go away ----------------------------------------------------------------


def test_socket_removed_under_a_waiter(chan):
    pending = post(timeout=60)
    os.unlink(chan / f"{pending.request.id}.sock")
    started = time.monotonic()
    answer = pending.wait()
    assert time.monotonic() - started < 30 < 60  # seen by the waiter's check, not its deadline
    assert (answer.decision, answer.decided_by) == ("deny", "error")
    assert "approval channel was lost" in answer.message
    assert leftovers(chan) == []


def test_answer_to_a_request_whose_socket_vanished(chan):
    pending = post(timeout=5)
    rid = pending.request.id
    os.unlink(chan / f"{rid}.sock")
    with pytest.raises(NotFoundError, match="channel was lost"):
        channel.answer(rid, "allow")
    assert channel.list_pending() == []
    answer = pending.wait()
    assert answer.decided_by == "error"
    assert leftovers(chan) == []


def test_socket_replaced_under_a_waiter(chan):
    import socket

    pending = post(timeout=5)
    rid = pending.request.id
    os.unlink(chan / f"{rid}.sock")
    impostor = socket.socket(socket.AF_UNIX)
    impostor.bind(str(chan / f"{rid}.sock"))
    impostor.listen(4)
    try:
        with pytest.raises(NotFoundError, match="replaced"):
            channel.answer(rid, "allow")  # a socket that is not the recorded one gets no answer
        # Its record rewritten to name the impostor's socket too: the process at the other end
        # is not the waiter (SO_PEERCRED), and the human's answer is not handed to it.
        record = json.loads((chan / f"{rid}.json").read_text())
        st = os.stat(chan / f"{rid}.sock")
        record["sock"] = [st.st_dev, st.st_ino]
        record["waiter"]["pid"] = os.getppid()  # a live process of this user, not the impostor's
        record["waiter"]["start"] = process_start(os.getppid())
        (chan / f"{rid}.json").write_text(json.dumps(record))
        with pytest.raises(NotFoundError, match="another process listens"):
            channel.answer(rid, "allow")
    finally:
        impostor.close()
    assert pending.wait().decided_by == "error"
    assert leftovers(chan) == []


def test_request_file_removed_under_a_waiter(chan):
    pending = post(timeout=5)
    os.unlink(chan / f"{pending.request.id}.json")
    answer = pending.wait()
    assert answer.decided_by == "error"
    assert leftovers(chan) == []


def test_whole_runtime_dir_removed_under_a_waiter(chan):
    """Removed as a whole (logout, a tmp cleaner): the waiter publishes its request again in a
    new private dir; tests/test_runtime_dir.py answers it. Made impossible to re-create: the
    call ends with deny/error as for a lost FIFO."""
    pending = post(timeout=5)
    remove_at_once(chan.parent)
    chan.parent.parent.joinpath("run").write_text("not a directory")
    started = time.monotonic()
    answer = pending.wait()
    assert time.monotonic() - started < requests.CHECK_EVERY_S + 1.5
    assert (answer.decision, answer.decided_by) == ("deny", "error")
    chan.parent.unlink()
    again = post()  # the next request re-creates a private dir
    again.withdraw()
    assert leftovers(chan) == []


# -- stale channels from crashed sessions ---------------------------------------------------------


def test_stale_files_of_crashed_sessions_are_cleaned(chan, procs):
    crashed = []
    for _ in range(3):
        proc = procs(REQUESTER, "30", "wait")
        crashed.append(read_line(proc))
        kill(proc)
        proc.wait(10)
    assert all(request_files(chan, rid) for rid in crashed)  # json, fifo, lock left behind
    # A request whose pid now belongs to someone else (our pid, another start time).
    live = post()
    live_json = chan / f"{live.request.id}.json"
    record = json.loads(live_json.read_text())
    record["request"]["id"] = "reusedpidreused2"
    record["waiter"]["start"] = "1"
    (chan / "reusedpidreused2.json").write_text(json.dumps(record))
    os.chmod(chan / "reusedpidreused2.json", 0o600)
    # Leftovers of a crash before publishing or while ending, old enough not to be a post in flight.
    old = time.time() - 60
    for name in ("orphanorphanorph.fifo", "orphanorphanorph.lock", ".halfhalfhalfhalf.json.tmp",
                 "junkjunkjunkjunk.json"):
        path = chan / name
        os.mkfifo(path, 0o600) if name.endswith(".fifo") else path.write_text("{not json")
        os.utime(path, (old, old), follow_symlinks=False)
    young = chan / "youngyoungyoungy.fifo"
    os.mkfifo(young, 0o600)  # could be a post() between mkfifo and publishing: kept
    assert [r.id for r in channel.list_pending()] == [live.request.id]
    assert sorted(leftovers(chan)) == sorted([f"{live.request.id}{s}"
                                              for s in (".json", ".sock")] + [young.name])
    live.withdraw()
    young.unlink()
    assert leftovers(chan) == []


def test_a_crashed_waiter_that_had_marked_its_request_is_cleaned(chan, procs):
    proc = procs(REQUESTER, "30", "wait")
    rid = read_line(proc)
    kill(proc)
    proc.wait(10)
    (chan / f"{rid}.done").write_text("answered 1 1\n")  # died between reading and removing
    assert channel.list_pending() == []
    assert request_files(chan, rid) == []


def test_answer_is_not_misrouted_between_requests(chan):
    a, b = post(), post()
    wa, wb = waiting(a), waiting(b)
    channel.answer(b.request.id, "deny", message="for b")
    channel.answer(a.request.id, "allow", message="for a")
    assert (wa.result().message, wb.result().message) == ("for a", "for b")
    # A line meant for another request that lands on this socket is refused, not obeyed, and
    # the request waits on.
    c = post(timeout=1)
    wc = waiting(c)
    assert "another request" in raw_answer(chan, c.request.id, {},
                                           line=wire.encode_answer(a.request.id, "allow"))
    answer = wc.result()
    assert (answer.decision, answer.decided_by) == ("deny", "timeout")
    assert leftovers(chan) == []
