"""Process-tree samples and tree stopping, on real (small Python) processes."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

import psutil
import pytest

from claudeguard.watchdog import sampler
from tests.shim_helpers import wait_until as shared_wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the /proc details are Linux's")

PY = sys.executable


def wait_until(pred, timeout: float = 60, step: float = 0.02):  # type: ignore[no-untyped-def]
    return shared_wait_until(pred, timeout, interval=step)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# A child that starts a grandchild which starts a great-grandchild; pids are printed as they start.
TREE = r"""
import os, subprocess, sys, time
depth = int(sys.argv[1]); busy = sys.argv[2] == "busy"; ignore_term = sys.argv[3] == "ignore"
if depth > 0:
    kid = subprocess.Popen([sys.executable, __file__, str(depth - 1), sys.argv[2], sys.argv[3]])
if depth == 0 and ignore_term:
    import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(depth, os.getpid(), flush=True)
if depth == 0 and busy:
    while True: pass
time.sleep(120)
"""


def start_tree(tmp_path, procs, depth=2, busy=False, ignore_term=False):
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    p = subprocess.Popen([PY, str(script), str(depth), "busy" if busy else "idle", "ignore" if ignore_term else "-"],
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    by_depth = dict(tuple(map(int, p.stdout.readline().split())) for _ in range(depth + 1))
    pids = [by_depth[d] for d in range(depth + 1)]  # the leaf first
    procs.extend((pid, psutil.Process(pid).create_time()) for pid in pids)
    return p, pids


def test_tree_and_sample(tmp_path, procs):
    p, pids = start_tree(tmp_path, procs, depth=2, busy=True)
    assert wait_until(lambda: set(sampler.tree_pids(p.pid)) >= set(pids))
    ts = sampler.TreeSampler(p.pid)
    first = ts.sample()
    assert first.root_pid == p.pid and set(first.procs) >= set(pids)
    assert first.procs[pids[0]].ppid == pids[1] and first.procs[pids[1]].ppid == p.pid
    leaf = pids[0]
    assert wait_until(lambda: ts.sample().procs[leaf].cpu - first.procs[leaf].cpu > 0.1)
    second = ts.sample()
    assert second.procs[p.pid].io is not None


def test_blocked_reading_stdin_pipe(procs):
    p = subprocess.Popen([PY, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    procs.append(p)
    ts = sampler.TreeSampler(p.pid)
    assert wait_until(lambda: ts.sample().procs[p.pid].reading == "stdin (pipe)")


def test_blocked_reading_a_terminal(procs):
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([PY, "-c", "input()"], stdin=slave, stdout=slave, stderr=slave)
        procs.append(p)
        tty = os.ttyname(slave)
        ts = sampler.TreeSampler(p.pid)
        assert wait_until(lambda: ts.sample().procs[p.pid].reading == tty)
    finally:
        os.close(master)
        os.close(slave)


def test_kill_tree_kills_even_a_term_ignoring_grandchild(tmp_path, procs):
    p, pids = start_tree(tmp_path, procs, depth=2, ignore_term=True)
    leaf = pids[0]
    assert wait_until(lambda: set(sampler.tree_pids(p.pid)) >= set(pids))
    t0 = time.monotonic()
    signalled = []
    killed = sampler.kill_tree(p.pid, 0.5, on_signalled=lambda: signalled.append(time.monotonic()))
    assert signalled and signalled[0] - t0 < 0.5
    assert leaf in killed
    assert all(wait_until(lambda pid=pid: gone(pid)) for pid in pids + [p.pid])
    p.wait(timeout=60)


def test_interrupt_is_sigint_to_the_cli_only(procs):
    code = ("import time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
            "except KeyboardInterrupt:\n    raise SystemExit(42)\n")
    p = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    procs.append(p)
    assert p.stdout.readline() == "ready\n"  # the interpreter's SIGINT handler is in place
    sampler.interrupt(p.pid)
    assert p.wait(timeout=60) == 42
