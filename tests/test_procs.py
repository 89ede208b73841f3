"""claudeguard.procs: a detached command gets a clean signal state and /dev/null stdio; a CLI's
version is read or refused with one line."""

from __future__ import annotations

import os
import signal
import time
import threading

import pytest

from claudeguard.errors import GuardError
from claudeguard.procs import ask_version, spawn_detached


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "claude"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_detached_command_has_no_signal_blocked_or_ignored_and_its_own_session(tmp_path):
    out = tmp_path / "out"
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        pid = spawn_detached(["sh", "-c",
                              f"grep -E 'SigBlk|SigIgn' /proc/self/status > {out}; ps -o sid= -p $$ >> {out}"])
    finally:
        signal.signal(signal.SIGHUP, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    lines = out.read_text().split()
    assert lines[lines.index("SigBlk:") + 1] == "0" * 16
    ignored = int(lines[lines.index("SigIgn:") + 1], 16)
    assert not ignored & (1 << (signal.SIGHUP - 1)) and not ignored & (1 << (signal.SIGPIPE - 1))
    assert int(lines[-1]) == pid  # a session leader: its own session


@pytest.mark.parametrize(("body", "expected"), [
    ('echo "2.1.197 (Claude Code)"', "2.1.197"),
    ('echo "claude 2.1.330-beta.1"', "2.1.330-beta.1"),
    ('[ -z "$CLAUDEGUARD_DISABLE" ] && echo 9.9.9 || echo 1.2.3', "1.2.3"),  # the guard is off in it
    ("read x && echo 4.5.6 || echo 7.8.9", "7.8.9"),  # stdin is /dev/null, not ours
])
def test_cli_version_reads_the_version(tmp_path, body, expected):
    assert ask_version(_script(tmp_path, body)) == expected


@pytest.mark.parametrize(("body", "said"), [
    ("echo boom >&2; exit 3", "exited 3: boom"),
    ("echo no version here", "exited 0: no version here"),
    ("exec sleep 30", "did not answer within 0.5 s"),
])
def test_cli_version_refuses_with_one_line(tmp_path, body, said):
    with pytest.raises(GuardError, match=said) as info:
        ask_version(_script(tmp_path, body), timeout=0.5)
    assert "\n" not in str(info.value)


def test_cli_version_of_a_missing_binary(tmp_path):
    with pytest.raises(GuardError, match="cannot start"):
        ask_version(str(tmp_path / "nowhere"))


def test_spawn_detached_from_a_thread_is_reaped_by_the_caller():
    pids: list[int] = []
    t = threading.Thread(target=lambda: pids.append(spawn_detached(["true"])))
    t.start()
    t.join()
    _, status = os.waitpid(pids[0], 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize(("arg", "expected"), [
    ("{summary}", "Bash: echo {id}"),  # one pass: a placeholder inside a value stays
    ("id={id} tool={tool}", "id=r1 tool=Bash"),
    ("{unknown} {id", "{unknown} {id"),  # other braces stay as they are
    ("{{id}}", "{r1}"),
    ("plain", "plain"),
])
def test_fill_replaces_placeholders_in_one_pass(arg, expected):
    from claudeguard.procs import fill

    values = {"{summary}": "Bash: echo {id}", "{id}": "r1", "{tool}": "Bash"}
    assert fill([arg, "x"], values) == [expected, "x"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run two processes as another user")
@pytest.mark.parametrize("dumpable", [True, False])
def test_a_process_that_is_not_dumpable_keeps_its_descriptors_from_its_own_user(dumpable):
    # The launcher and the service hold the hooks' listening socket: another process of the
    # same (non-root) user must not take it with pidfd_getfd, nor read the holder's environment.
    import ctypes
    import socket
    import sys

    from claudeguard.procs import not_dumpable

    ready_r, ready_w = os.pipe()
    holder = os.fork()
    if holder == 0:  # the holder, as nobody: a listening socket, then (maybe) not dumpable
        try:
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(1)
            if dumpable:  # a change of uid made it not dumpable: as an ordinary process is
                ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0)
            else:
                assert not_dumpable()
            os.write(ready_w, str(sock.fileno()).encode())
            time.sleep(30)
        finally:
            os._exit(0)
    try:
        os.close(ready_w)
        fd = int(os.read(ready_r, 16))
        taker = os.fork()
        if taker == 0:  # another process of that user: 0 = took nothing, 1 = took the socket
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                pidfd = os.pidfd_open(holder)
                got = ctypes.CDLL(None, use_errno=True).syscall(438, pidfd, fd, 0)
                code = 1 if got >= 0 else 0
            except OSError:
                code = 0
            finally:
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(taker, 0)
        assert os.waitstatus_to_exitcode(status) == (1 if dumpable else 0)
    finally:
        os.kill(holder, 9)
        os.waitpid(holder, 0)
