"""The cheap tree walk (the root's /proc files kept open), the service's one sampling thread
(``Schedule``), and what an idle sample no longer does (rewrite status.json, list the channel):
on real process trees that each test starts and stops by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from claudeguard.watchdog import acts as acts_mod
from claudeguard.watchdog import monitor as monitor_mod
from claudeguard.watchdog import sampler
from claudeguard.watchdog.monitor import Monitor, Schedule
from claudeguard.watchdog.signals import WatchConfig
from claudeguard.watchdog.status import read_status

from test_watchdog_sampler import gone, start_tree, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the /proc details are Linux's")

PY = sys.executable

# A process that forks a child from a second thread: the kernel lists that child in the
# thread's own ``task/<tid>/children``, not in the main thread's.
THREAD_FORK = r"""
import os, subprocess, sys, threading, time
kids = []
def spawn():
    kids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
t = threading.Thread(target=spawn); t.start(); t.join()
main_kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
threading.Thread(target=time.sleep, args=(120,), daemon=True).start()  # keeps the spawning thread's peers alive
print(kids[0].pid, main_kid.pid, flush=True)
time.sleep(120)
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path


def session_dir(name: str):
    from claudeguard.paths import runtime_dir

    return runtime_dir("sessions", name)


def sleeper(procs, seconds: int = 60) -> subprocess.Popen:
    p = subprocess.Popen([PY, "-c", f"import time; print('up', flush=True); time.sleep({seconds})"],
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    assert p.stdout.readline() == "up\n"
    return p


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        os.kill(pid, sig)


# -- the tree walk ---------------------------------------------------------------------------
def test_kept_files_read_afresh_and_match_a_fresh_open(procs):
    busy = subprocess.Popen([PY, "-c", "while True: pass"])
    procs.append(busy)
    kept = sampler.ProcFiles(busy.pid)
    try:
        first = sampler.read_stat(busy.pid, kept.text("stat"))
        assert wait_until(lambda: sampler.read_stat(busy.pid, kept.text("stat")).cpu >= first.cpu + 0.1)
        os.kill(busy.pid, signal.SIGSTOP)  # frozen CPU times: both ways must read the same numbers
        assert wait_until(lambda: sampler.read_stat(busy.pid).status == "T")
        assert sampler.read_stat(busy.pid, kept.text("stat")) == sampler.read_stat(busy.pid)
        assert kept.read("io") == sampler._read_bytes(f"/proc/{busy.pid}/io")
        assert len(kept.fds) == 2
    finally:
        kept.close()
    assert kept.fds == {}


def test_kept_files_of_a_reaped_process_fail_instead_of_reading_another(procs):
    p = sleeper(procs)
    kept = sampler.ProcFiles(p.pid)
    try:
        assert sampler.read_stat(p.pid, kept.text("stat")).pid == p.pid
        p.kill()
        p.wait()
        with pytest.raises(OSError):
            kept.read("stat")  # ESRCH: the fd belongs to the dead process, not to the pid
        assert kept.text("stat") is None
    finally:
        kept.close()


def test_sample_has_exactly_the_tree_and_its_cpu(tmp_path, procs):
    root, pids = start_tree(tmp_path, procs, depth=2)
    forker = subprocess.Popen([PY, "-c", THREAD_FORK], stdout=subprocess.PIPE, text=True)
    procs.append(forker)
    thread_kid, main_kid = map(int, forker.stdout.readline().split())
    procs.extend((pid, psutil.Process(pid).create_time()) for pid in (thread_kid, main_kid))
    assert root.pid in pids
    for tree_root, members in ((root.pid, pids), (forker.pid, [forker.pid, thread_kid, main_kid])):
        ts = sampler.TreeSampler(tree_root)
        try:
            assert wait_until(lambda ts=ts, members=members: set(ts.sample().procs) == set(members))
            signal_all(members, signal.SIGSTOP)
            try:
                assert wait_until(lambda members=members: all(sampler.read_stat(pid).status == "T" for pid in members))
                s = ts.sample()
                assert sorted(s.procs) == sorted(members)
                for pid in members:
                    t = psutil.Process(pid).cpu_times()
                    assert s.procs[pid].cpu == pytest.approx(t.user + t.system, abs=1e-9)
                    assert s.procs[pid].start == sampler.read_stat(pid).start
                total = sum(p.cpu for p in s.procs.values())
                expected = sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in members)
                assert total == pytest.approx(expected, abs=1e-9)
            finally:
                signal_all(members, signal.SIGCONT)
        finally:
            ts.close()


def test_sampler_of_a_gone_root_is_empty_and_closes_its_files(procs):
    p = sleeper(procs)
    before = fd_count()
    ts = sampler.TreeSampler(p.pid)
    assert set(ts.sample().procs) == {p.pid}
    assert fd_count() == before + len(ts._root.fds) and ts._root.fds
    p.kill()
    p.wait()
    assert ts.sample().procs == {}
    ts.close()
    assert fd_count() == before


# -- the service's one sampling thread ---------------------------------------------------------
def make(name: str, child_pid: int, hits: list, **cfg) -> Monitor:
    return Monitor(child_pid=child_pid, session_id=name, session_dir=session_dir(name), config=WatchConfig(**cfg),
                   output_format=None, prompt="fix it", cwd="/proj", argv=["claude"], on_stall=hits.append)


def schedule_threads(schedule: Schedule) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == schedule.name]


def test_one_thread_samples_every_monitor_and_reports_each_stall_in_time(env, procs):
    schedule = Schedule("test-schedule")
    children = [sleeper(procs) for _ in range(3)]
    hits: list[list[str]] = [[], [], []]
    monitors = [make(f"s{i}", c.pid, hits[i], stall_after=2, sample_interval=0.5) for i, c in enumerate(children)]
    t0 = time.monotonic()
    try:
        for m in monitors:
            m.start(schedule)
            m.output_seen(1, time.monotonic())  # the first words: "thinking" from now on
        assert len(schedule_threads(schedule)) == 1
        assert wait_until(lambda: all(hits), timeout=60, step=0.01)
        elapsed = time.monotonic() - t0
        assert elapsed <= 2.0 + 15.0, elapsed  # seconds after the threshold (how soon: bench/watchdog_cost.py)
        for h in hits:
            assert len(h) == 1 and h[0].startswith("stalled: thinking for ")
        assert all(read_status(m.session_dir)["state"] == "stalled" for m in monitors)
    finally:
        for m in monitors:
            m.stop(None)
    assert all(read_status(m.session_dir)["state"] == "exited" for m in monitors)
    assert wait_until(lambda: len(schedule) == 0, timeout=60)  # stopped monitors leave the schedule


def test_a_kill_in_progress_delays_no_other_session_and_stop_waits_for_it(env, tmp_path, procs):
    schedule = Schedule("test-schedule-kill")
    victim, pids = start_tree(tmp_path, procs, depth=1, ignore_term=True)  # the kill waits out its grace
    other = sleeper(procs)
    hits_v: list[str] = []
    killer = make("victim", victim.pid, hits_v, stall_after=0.5, sample_interval=0.2, on_stall="kill", kill_grace=1.5)
    watched = make("other", other.pid, [], stall_after=60, sample_interval=0.2)
    samples: list[float] = []
    real = watched.sampler.sample

    def timed():  # type: ignore[no-untyped-def]
        samples.append(time.monotonic())
        return real()

    watched.sampler.sample = timed  # type: ignore[method-assign]
    try:
        killer.start(schedule)
        watched.start(schedule)
        assert wait_until(lambda: hits_v, timeout=60, step=0.01)
        acted = time.monotonic()
        killer.stop(None)  # waits for the kill: SIGTERM ignored, SIGKILL after the grace
        assert time.monotonic() - acted >= 1.0
        assert all(gone(pid) for pid in pids) and killer.killed
        during = [t for t in samples if t >= acted - 0.2]
        gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
        assert len(during) >= 5 and max(gaps) < 0.2 + 0.5, gaps  # sampled on through the 1.5 s kill
    finally:
        killer.stop(None)
        watched.stop(None)


def test_schedule_samples_on_a_common_grid(env, procs):
    # What the schedule plans, not when a loaded machine let its thread run: every sample after
    # the first is due on the grid (multiples of the interval), and two monitors started off each
    # other's phase are due at the same grid points, so one wake-up samples both.
    schedule = Schedule("test-schedule-grid")
    children = [sleeper(procs) for _ in range(2)]
    monitors: list = []
    dues: dict[int, list[float]] = {0: [], 1: []}
    real_add = schedule.add

    def add(monitor, due=None):  # type: ignore[no-untyped-def]
        if due is not None:
            dues[monitors.index(monitor)].append(due)
        real_add(monitor, due)

    schedule.add = add  # type: ignore[method-assign]
    for i, c in enumerate(children):
        monitors.append(make(f"g{i}", c.pid, [], stall_after=60, sample_interval=0.25))
    try:
        monitors[0].start(schedule)
        time.sleep(0.1)  # started off each other's phase
        monitors[1].start(schedule)
        assert wait_until(lambda: len(dues[0]) >= 6 and len(dues[1]) >= 6, timeout=60)
    finally:
        for m in monitors:
            m.stop(None)
    for i in (0, 1):
        assert all(abs(d / 0.25 - round(d / 0.25)) < 1e-9 for d in dues[i]), dues[i]
        assert dues[i] == sorted(set(dues[i]))  # one sample per grid point, none twice
    # due together, one wake-up for both (a thread woken over half an interval late may move one
    # of them a grid point on, once: they meet again at the next); off the grid, none is shared
    assert len(set(dues[0]) & set(dues[1])) >= 3, (dues[0], dues[1])


# -- what an idle sample no longer does ----------------------------------------------------------
def test_status_is_rewritten_on_change_and_every_status_every_s(env, procs, monkeypatch):
    monkeypatch.setattr(acts_mod, "STATUS_EVERY_S", 1.0)
    writes: list[tuple[float, dict]] = []  # (when, status)
    real = acts_mod.write_status
    monkeypatch.setattr(acts_mod, "write_status",
                        lambda d, st: (writes.append((time.monotonic(), st)), real(d, st))[1])
    child = sleeper(procs)
    m = make("w", child.pid, [], stall_after=60, sample_interval=0.1)
    try:
        m.start()
        assert wait_until(lambda: len(writes) >= 2, timeout=60)  # start + the first sample (its state)
        # Six idle samples in a row with nothing new to say write nothing: between the 1 s
        # heartbeats there is a 0.6 s stretch without a write (were every sample written, never).
        # On a loaded machine the child's start may still show as progress in an early sample.
        assert wait_until(lambda: time.monotonic() - writes[-1][0] >= 0.6, timeout=60)
        n = len(writes)
        assert wait_until(lambda: len(writes) > n, timeout=60)  # STATUS_EVERY_S later: `updated` moves on
        assert writes[-1][1]["updated"] > writes[n - 1][1]["updated"]
        n = len(writes)
        m.set_screen_tail(["> waiting"])
        assert wait_until(lambda: len(writes) > n, timeout=0.5)  # a change is written at the next sample
        assert read_status(m.session_dir)["screen_tail"] == ["> waiting"]
    finally:
        m.stop(None)
    assert read_status(m.session_dir)["state"] == "exited"


def test_channel_is_listed_again_only_when_it_changed(env, monkeypatch):
    import claudeguard.channel as channel
    from claudeguard.paths import runtime_dir

    calls: list[str] = []
    open_requests: list[str] = []
    monkeypatch.setattr(channel, "list_pending",
                        lambda session_id=None: (calls.append(session_id), list(open_requests))[1])
    monkeypatch.setattr(monitor_mod.PendingCounts, "QUIET_S", 0.0)
    monkeypatch.setattr(monitor_mod.PendingCounts, "SHARE_S", 0.0)  # a fresh stat at every count
    counts = monitor_mod.PendingCounts()
    chan = runtime_dir("channel")
    past = time.time() - 5
    os.utime(chan, (past, past))
    assert [counts.count("s1") for _ in range(5)] == [0] * 5
    assert calls == ["s1"]  # listed once; then one stat a sample
    open_requests.append("r1")
    (chan / "r1.json").write_text("{}")  # what posting a request does to the directory
    assert counts.count("s1") == 1 and counts.count("s1") == 1
    assert calls == ["s1"] * 3  # a request is open: listed every time (its waiter may die)
    open_requests.clear()
    assert counts.count("s1") == 0
    os.utime(chan, (past, past))
    assert counts.count("s1") == 0 and counts.count("s1") == 0
    assert len(calls) == 5  # quiet again: the second of these was a stat
