"""Who may answer a request: the waiter asks the kernel who is at the other end of its socket and
refuses a process inside a guarded session (claudeguard/ancestry.py), however that process hid
its descent (a fork, ``setsid``, ``nohup``, a double fork under the CLI made a child subreaper).
The Claude Code CLI here is a stand-in: a copy of bash named ``claude`` (the check reads a
process's executable, as it reads the real CLI's ``claude.exe``); tests/test_self_approval_real.py
does the same against the real CLIs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from claudeguard import ancestry, channel
from claudeguard.channel import requests
from claudeguard.channel.model import Answer
from tests.shim_helpers import CTL, wait_until

# Makes the stand-in CLI a child subreaper, as the launcher does (shim/child.py), then runs it.
SUBREAPER = ("import ctypes, os, sys; ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0); "
             "os.execv(sys.argv[1], sys.argv[1:])")


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return dict(os.environ)


@pytest.fixture
def fake_cli(tmp_path) -> Path:
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    shutil.copy("/bin/bash", path)
    return path


@pytest.fixture
def procs():
    """Processes a test starts: each one's process group is killed at the end, by its pid."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def post(timeout: float = 30) -> channel.Pending:
    return channel.post(session_id="victim", agent_type=None, agent_id=None, tool="Bash",
                        input={"command": "touch pwned"}, summary="Bash(touch pwned)", cwd="/", timeout=timeout)


class Waiter(threading.Thread):
    def __init__(self, pending: channel.Pending) -> None:
        super().__init__(daemon=True)
        self.pending = pending
        self.answer: Answer | None = None
        self.start()

    def run(self) -> None:
        self.answer = self.pending.wait()


def audit_rows(tmp_path: Path) -> list[dict]:
    log = tmp_path / "log" / "audit.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# -- inside_guarded_session --------------------------------------------------------------------


def test_this_process_is_outside_every_session(env):
    assert ancestry.inside_guarded_session(os.getpid()) is None
    assert ancestry.inside_guarded_session(2 ** 22 + 7) == f"unknown process {2 ** 22 + 7}"  # no such pid


def test_a_caller_that_is_gone_or_replaced_counts_as_inside(env, monkeypatch):
    assert ancestry.caller_inside_session(os.getpid()) is None
    assert ancestry.caller_inside_session(2 ** 22 + 7) == f"unknown process {2 ** 22 + 7}"
    # another process under the same pid by the end of the walk: named as gone
    real, seen = ancestry._stat, []

    def replaced(pid):  # this pid's first look shows one process, every later look another
        if pid != os.getpid():
            return real(pid)
        seen.append(pid)
        return {**real(pid), "start": "100" if len(seen) == 1 else "200"}

    monkeypatch.setattr(ancestry, "_stat", replaced)
    assert ancestry.caller_inside_session(os.getpid()) == f"process {os.getpid()} went away before it could be checked"


def test_a_descendant_of_a_claude_process_is_inside_and_the_cli_itself_too(env, fake_cli, procs, tmp_path):
    out = tmp_path / "pid"
    cli = procs([str(fake_cli), "-c", f"sleep 30 & echo $! > {out}; wait; exit 0"])
    wait_until(lambda: out.exists() and out.read_text().strip(), 60, "the child's pid")
    child = int(out.read_text())
    wait_until(lambda: os.readlink(f"/proc/{child}/exe").endswith("sleep"), 60, "the child's exec")
    assert ancestry.is_claude_cli(cli.pid) and not ancestry.is_claude_cli(child)
    assert ancestry.inside_guarded_session(child) == f"claude pid {cli.pid}"
    assert ancestry.inside_guarded_session(cli.pid) == f"claude pid {cli.pid}"
    # A session the runtime dir knows is named by its id: by its CLI, or by its launcher.
    session = tmp_path / "run" / "sessions" / "s-known"
    session.mkdir(parents=True)
    (session / "status.json").write_text(json.dumps({"child_pid": cli.pid,
                                                     "child_start": ancestry.ancestry(cli.pid)[0]["start"]}))
    assert ancestry.inside_guarded_session(child) == "s-known"
    (session / "status.json").write_text(json.dumps({"child_pid": cli.pid, "child_start": "1"}))  # a reused pid
    assert ancestry.inside_guarded_session(child) == f"claude pid {cli.pid}"


def test_a_launchers_descendants_are_inside_but_not_the_launcher(env, procs, tmp_path):
    out = tmp_path / "pid"
    launcher = procs([sys.executable, "-c", "import os, subprocess, sys, time  # claudeguard\n"
                      f"p = subprocess.Popen(['sleep', '30']); open({str(out)!r}, 'w').write(str(p.pid)); p.wait()"])
    wait_until(lambda: out.exists() and out.read_text().strip(), 60, "the child's pid")
    child = int(out.read_text())
    session = tmp_path / "run" / "sessions" / "s-launched"
    session.mkdir(parents=True)
    (session / "session.json").write_text(json.dumps({"session_id": "s-launched", "pid": launcher.pid}))
    assert ancestry.inside_guarded_session(child) == "s-launched"
    assert ancestry.inside_guarded_session(launcher.pid) is None  # it registers its own session
    # A --bg launch's launcher pid names nobody once it exited: not trusted for that.
    (session / "session.json").write_text(json.dumps({"pid": launcher.pid, "kind": "background"}))
    assert ancestry.inside_guarded_session(child) is None


def test_identity_is_what_the_kernel_and_proc_say():
    me = ancestry.identity(os.getpid(), os.getuid())
    assert me["pid"] == os.getpid() and me["uid"] == os.getuid()
    assert me["command"].startswith(sys.executable) or "python" in me["command"].split()[0]
    assert ancestry.tty_name(0) is None and ancestry.tty_name((136 << 8) | 3) == "/dev/pts/3"
    assert ancestry.tty_name((4 << 8) | 1) == "/dev/tty1"


# -- the waiter refuses an answer from inside ---------------------------------------------------

# How an agent's script might hide where it runs before answering: each runs `claudeguardctl
# approve ID` under the stand-in CLI (a child subreaper, as the launcher makes the real one).
# Each ends in `exit`: a bash -c of one command would exec it, and the stand-in CLI be gone.
HIDDEN = {
    "plain": "{ctl} approve {rid}; exit $?",
    "fork": "( {ctl} approve {rid} ); exit $?",
    "setsid": "setsid -w {ctl} approve {rid}; exit $?",
    "nohup": "nohup {ctl} approve {rid} < /dev/null; exit $?",
    "double-fork": "( setsid sh -c '{ctl} approve {rid} > {out}.o 2> {out}.e; echo $? > {out}' & ) ; sleep 30; exit 0",
}


@pytest.mark.parametrize("how", sorted(HIDDEN))
def test_an_answer_from_inside_a_claude_process_is_refused_and_audited(env, fake_cli, procs, tmp_path, how):
    pending = post()
    rid = pending.request.id
    waiter = Waiter(pending)
    ctl = " ".join(CTL)
    out = tmp_path / "rc"
    script = HIDDEN[how].format(ctl=ctl, rid=rid, out=out)
    cli = procs([sys.executable, "-c", SUBREAPER, str(fake_cli), "-c", script], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=env)
    if how == "double-fork":
        wait_until(lambda: out.exists() and out.read_text().strip(), 60, "the orphan's answer")
        code, err = int(out.read_text()), Path(f"{out}.e").read_text()
    else:
        _, err = cli.communicate(timeout=60)
        code = cli.returncode
    assert code == 1
    [line] = [line for line in err.splitlines() if not line.startswith("nohup:")]
    assert line == f"claudeguardctl: {rid}: answer refused: from inside session claude pid {cli.pid}"
    assert [r.id for r in channel.list_pending()] == [rid]  # it waits on, unanswered
    [row] = audit_rows(tmp_path)
    assert row["event"] == "answer-refused" and row["request_id"] == rid and row["session_id"] == "victim"
    assert row["summary"] == f"answer refused: from inside session claude pid {cli.pid}"
    assert row["answered_by"]["uid"] == os.getuid() and "approve" in row["answered_by"]["command"]
    assert "decision" not in row  # no row claims a human decided anything
    # A person outside answers: taken, and the row of that answer names this process.
    channel.answer(rid, "deny", message="no")
    waiter.join(60)
    assert waiter.answer is not None and waiter.answer.decision == "deny"
    assert waiter.answer.answered_by["pid"] == os.getpid() and pending.refused == 1


def test_a_loop_of_refused_answers_writes_a_few_rows_and_counts_them_all(env, fake_cli, procs, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setattr(requests, "REFUSAL_ROWS", 2)
    pending = post()
    rid = pending.request.id
    waiter = Waiter(pending)
    code = ("import sys\nfrom claudeguard import channel\nfrom claudeguard.errors import NotFoundError\n"
            "for _ in range(5):\n"
            f"    try: channel.answer({rid!r}, 'allow')\n"
            "    except NotFoundError as exc: print(exc, flush=True)\n")
    (tmp_path / "loop.py").write_text(code)
    cli = procs([str(fake_cli), "-c", f"{sys.executable} {tmp_path / 'loop.py'}; exit $?"], stdout=subprocess.PIPE,
                text=True, env=env)
    out, _ = cli.communicate(timeout=60)
    assert out.splitlines() == [f"{rid}: answer refused: from inside session claude pid {cli.pid}"] * 5
    assert [r["event"] for r in audit_rows(tmp_path)] == ["answer-refused"] * 2
    pending.withdraw()
    waiter.join(60)
    assert pending.refused == 5


def test_a_relayed_answer_records_who_vouched_and_who_relayed(env):
    pending = post()
    waiter = Waiter(pending)
    vouched = {"via": "desk", "uid": os.getuid(), "browser_session": "bs-0123456789ab"}
    channel.answer(pending.request.id, "allow", by="desk", vouched=vouched)
    waiter.join(60)
    assert waiter.answer is not None
    by = waiter.answer.answered_by
    assert {k: by[k] for k in vouched} == vouched
    assert by["relayed_by"]["pid"] == os.getpid()
