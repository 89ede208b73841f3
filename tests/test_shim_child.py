"""shim/child.py's ``spawn``: the CLI's start without subprocess — the descriptors it gets, the
signal defaults, the parent-death signal and a new session as asked, an exec failure raised in
the parent (no zombie left)."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from claudeguard.shim.child import _libc_prctl, child_setup, spawn

PROBE = """
import ctypes, json, os, signal
v = ctypes.c_int()
ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0)  # PR_GET_PDEATHSIG
print(json.dumps({"fds": sorted(int(f) for f in os.listdir("/proc/self/fd")), "pdeathsig": v.value,
                  "sid": os.getsid(0), "pid": os.getpid()}))
"""


def run_probe(tmp_path: Path, **kwargs: object) -> dict:
    read_end, write_end = os.pipe()
    stray = os.open(tmp_path, os.O_RDONLY)  # inheritable or not, the child must not get it
    os.set_inheritable(stray, True)
    try:
        pid = spawn([sys.executable, "-c", PROBE], dict(os.environ), child_setup(os.getpid()),
                    fds={1: write_end}, **kwargs)  # type: ignore[arg-type]
    finally:
        os.close(write_end)
        os.close(stray)
    with os.fdopen(read_end) as fh:
        out = json.loads(fh.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    out["child"] = pid
    return out


def test_the_child_gets_its_stdio_and_nothing_else_with_default_signals_and_a_parent_death_signal(tmp_path):
    out = run_probe(tmp_path)
    assert out["fds"] == [0, 1, 2, 3]  # 3: the listing's own descriptor
    assert out["pdeathsig"] == 15 and out["sid"] == os.getsid(0)


def test_signals_python_ignores_are_back_to_default_and_none_blocked(tmp_path):
    # cat shows the dispositions the exec left it (a Python child would ignore SIGPIPE itself)
    read_end, write_end = os.pipe()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGCHLD})  # as ChildProcess._spawn
    try:
        pid = spawn(["/bin/cat", "/proc/self/status"], {}, child_setup(os.getpid()), fds={1: write_end})
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        os.close(write_end)
    with os.fdopen(read_end) as fh:
        status = dict(line.split(":\t", 1) for line in fh.read().splitlines() if ":\t" in line)
    os.waitpid(pid, 0)
    ignored, blocked = int(status["SigIgn"], 16), int(status["SigBlk"], 16)
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # ours, as Python sets it
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))
    assert blocked == 0


def test_keep_and_a_new_session_as_asked(tmp_path):
    keep = os.open(tmp_path, os.O_RDONLY)  # not inheritable: kept all the same
    try:
        out = run_probe(tmp_path, keep=(keep,), new_session=True)
    finally:
        os.close(keep)
    assert keep in out["fds"] and len(out["fds"]) == 5
    assert out["sid"] == out["child"]


def test_an_exec_that_fails_is_raised_here_and_reaped(tmp_path):
    missing = str(tmp_path / "no-such-cli")
    with pytest.raises(OSError) as err:
        spawn([missing], {}, child_setup(os.getpid()), fds={})
    assert err.value.errno == errno.ENOENT
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left, not even a zombie


def test_prctl_without_ctypes_is_libcs():
    prctl = _libc_prctl()
    assert prctl is not None
    assert prctl(12345, 0, 0, 0, 0) == -1  # no such option: -1 from libc (EINVAL), not an exception
