"""The Monitor on real child processes: detection time, no false stall on a busy child, the
kill and interrupt actions, guard events, stream-json, notify, audit and the final status."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import psutil
import pytest

from claudeguard.testing.load import BUSY, cpu_hog
from claudeguard.watchdog.monitor import Monitor
from claudeguard.watchdog.signals import WatchConfig
from claudeguard.watchdog.status import list_sessions, read_status

from test_watchdog_sampler import gone, start_tree, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="real process trees on Linux")

PY = sys.executable


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    return tmp_path


@pytest.fixture
def monitors():
    made: list[Monitor] = []
    yield made
    for m in made:
        m.stop(None)


def session_dir(name: str):
    from claudeguard.paths import runtime_dir

    return runtime_dir("sessions", name)


def make(monitors, child_pid, name="s1", hits=None, output_format=None, **cfg):
    hits = [] if hits is None else hits
    m = Monitor(child_pid=child_pid, session_id=name, session_dir=session_dir(name), config=WatchConfig(**cfg),
                output_format=output_format, prompt="fix the flaky test please", cwd="/proj",
                argv=["claude", "-p", "fix the flaky test please"], on_stall=hits.append)
    monitors.append(m)
    return m, hits


def sleeper(procs, seconds=60):
    p = subprocess.Popen([PY, "-c", f"import time; print('up', flush=True); time.sleep({seconds})"],
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    assert p.stdout.readline() == "up\n"  # start-up CPU is behind us
    return p


def test_sleeping_child_is_stalled_after_the_threshold_and_within_seconds(env, procs, monitors, capfd):
    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=2, sample_interval=0.5)
    t0 = time.monotonic()
    m.start()
    m.feed_stdout(b"first words\n")
    assert wait_until(lambda: hits, timeout=60, step=0.01)
    elapsed = time.monotonic() - t0
    # Never before the threshold; "within seconds" after it. How soon (the goal: two samples) is a
    # timing figure, measured by bench/watchdog_cost.py --only detect, not asserted on a loaded CI.
    assert 2.0 <= elapsed <= 2.0 + 15.0, elapsed  # seconds after, even at load 10 on 2 cores
    # the seconds shown are whole seconds since the last output: 2, or 3 when a loaded machine reports late
    # (and a loaded machine's load is named)
    assert re.match(r"stalled: thinking for [23] s: model stream silent [23] s, tree CPU 0\.\d\d s"
                    r"(; machine load \d+\.\d on \d+ CPUs)?$", hits[0]), hits[0]
    assert m.stalled and not m.killed
    assert f"claudeguard: {hits[0]}" in capfd.readouterr().err
    status = read_status(m.session_dir)
    assert status["state"] == "stalled" and status["base_state"] == "thinking" and status["child_pid"] == child.pid
    assert child.poll() is None  # warn keeps it running


def test_cpu_busy_child_is_never_stalled(env, procs, monitors):
    child = subprocess.Popen([PY, "-c", "while True: pass"])
    procs.append(child)
    # 1 s samples, as shipped: the CPU floor per sample is 0.16 s (16 % of a core), which a busy
    # loop clears even on a loaded machine; with 0.25 s samples it would be 52 % of a core.
    m, hits = make(monitors, child.pid, stall_after=3, sample_interval=1.0)
    m.start()
    deadline = time.monotonic() + 6.0
    states = set()
    while time.monotonic() < deadline:
        st = read_status(m.session_dir)
        states.add(st["state"])
        time.sleep(0.1)
    assert not hits and "stalled" not in states
    # it did run (how much is the machine's: 0.41 s of 6 under a hog of 8 beside the suite)
    assert read_status(m.session_dir)["cpu_s"] > 0


def test_under_a_cpu_hog_a_busy_child_is_never_stalled_and_a_sleeping_one_is(env, procs, monitors):
    # Eight busy processes beside the suite's own workers on two cores, and the busy child at nice
    # 19 (as a CI runner or a user's batch job runs it): it gets a few hundredths of a CPU a
    # second, far under any CPU floor, but wants one all the time; the sleeping child wants none.
    # Only the sleeping one is stalled, within the threshold and a few seconds. The hog runs at
    # nice 10: to the busy child it is the same wall of work (about 1/60 of the CPU is left to
    # it, as at nice 10 against a hog at 0), while the suite's other workers, at 0, are slowed a
    # fifth instead of two thirds for these 15 s (five thresholds: the busy child never stalls).
    busy = subprocess.Popen(["nice", "-n", "19", *BUSY])
    procs.append(busy)
    sleeping = sleeper(procs)
    with cpu_hog(8, nice=10):
        mb, busy_hits = make(monitors, busy.pid, name="busy", stall_after=3, sample_interval=1.0)
        ms, sleep_hits = make(monitors, sleeping.pid, name="sleeping", stall_after=3, sample_interval=1.0)
        t0 = time.monotonic()
        mb.start()
        ms.start()
        flagged_at = None
        busy_states = set()
        while time.monotonic() - t0 < 15.0:
            busy_states.add(read_status(mb.session_dir)["state"] if read_status(mb.session_dir) else None)
            if flagged_at is None and sleep_hits:
                flagged_at = time.monotonic() - t0
            time.sleep(0.1)
        busy_status = read_status(mb.session_dir)
    assert not busy_hits and "stalled" not in busy_states, (busy_hits, busy_states)
    assert busy_status["evidence"]["last_progress"].startswith("waiting for a CPU: "), busy_status
    assert busy_status["evidence"]["waiting_for_cpu"].startswith(f"sh (pid {busy.pid}) waited "), busy_status
    assert flagged_at is not None and 3.0 <= flagged_at <= 3.0 + 5.0, flagged_at
    assert sleep_hits[0].startswith("stalled: starting for "), sleep_hits
    assert len(sleep_hits) == 1  # one report per stall episode


def test_kill_action_leaves_no_process_of_the_tree(env, tmp_path, procs, monitors):
    child, pids = start_tree(tmp_path, procs, depth=2, ignore_term=True)
    m, hits = make(monitors, child.pid, stall_after=1, sample_interval=0.25, on_stall="kill", kill_grace=0.5)
    m.start()
    assert wait_until(lambda: hits, timeout=60)
    assert m.killed
    assert wait_until(lambda: all(gone(pid) for pid in pids + [child.pid]), timeout=60)
    assert child.wait(timeout=60) == -15  # SIGTERM reached the CLI first


def test_interrupt_action_sends_sigint(env, procs, monitors):
    code = ("import time\ntry:\n    print('up', flush=True)\n    time.sleep(60)\n"
            "except KeyboardInterrupt:\n    raise SystemExit(7)\n")
    child = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    procs.append(child)
    assert child.stdout.readline() == "up\n"
    m, hits = make(monitors, child.pid, stall_after=1, sample_interval=0.25, on_stall="interrupt")
    m.start()
    assert child.wait(timeout=60) == 7
    assert hits and not m.killed


def test_hook_events_name_the_tool_and_use_its_threshold(env, procs, monitors):
    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=0.5, tool_stall_after=30, sample_interval=0.25)
    events = m.session_dir / "events.jsonl"
    events.write_text(json.dumps({"time": time.time(), "event": "tool-start", "tool": "Bash",
                                  "tool_use_id": "toolu_1", "agent_id": None, "agent_type": None}) + "\n")
    m.start()
    assert wait_until(lambda: (read_status(m.session_dir) or {}).get("detail") == "Bash")
    # quiet for three times stall_after, as the monitor itself judged it: a tool is judged by
    # tool_stall_after
    # (status.json is rewritten when it changes, not for its clocks: the monitor's own verdict)
    assert wait_until(lambda: m.last_verdict is not None
                      and m.last_verdict.time - m.tracker.progress.last >= 1.5, timeout=60)
    st = read_status(m.session_dir)
    assert st["state"] == "tool" and not hits
    with events.open("a") as fh:
        fh.write(json.dumps({"time": time.time(), "event": "tool-end", "tool": "Bash",
                             "tool_use_id": "toolu_1"}) + "\n")
    assert wait_until(lambda: hits, timeout=60)


def test_a_calls_end_in_the_transcript_ends_it_and_its_note(env, procs, monitors):
    # A -p run registers no PostToolUse: the result line in the CLI's transcript ends the call
    # (watchdog/transcript.py), and the call's note in calls/ goes as PostToolUse took it.
    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=0.5, tool_stall_after=30, sample_interval=0.25)
    transcript = env / "projects" / "s.jsonl"
    transcript.parent.mkdir()
    transcript.write_text("")
    (m.session_dir / "calls").mkdir()
    (m.session_dir / "calls" / "toolu_1").write_text("{}")
    (m.session_dir / "events.jsonl").write_text(json.dumps(
        {"time": time.time(), "event": "tool-start", "tool": "Bash", "tool_use_id": "toolu_1",
         "agent_id": None, "agent_type": None, "transcript": str(transcript)}) + "\n")
    m.start()
    assert wait_until(lambda: m.last_verdict is not None
                      and m.last_verdict.time - m.tracker.progress.last >= 1.5, timeout=60)
    assert read_status(m.session_dir)["state"] == "tool" and not hits
    assert (m.session_dir / "calls" / "toolu_1").exists()
    result = {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_1", "type": "tool_result", "content": "ok"}]}}
    with transcript.open("a") as fh:
        fh.write(json.dumps(result) + "\n")
    assert wait_until(lambda: hits, timeout=60)
    assert not (m.session_dir / "calls" / "toolu_1").exists()


def test_stream_json_through_feed_stdout(env, procs, monitors):
    from test_watchdog_stream import ASSISTANT, INIT, USER

    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=30, sample_interval=0.2, output_format="stream-json")
    m.start()
    data = (INIT + "\n" + ASSISTANT + "\n").encode()
    m.feed_stdout(data[:50])
    m.feed_stdout(data[50:])
    assert wait_until(lambda: (read_status(m.session_dir) or {}).get("detail") == "Bash")
    st = read_status(m.session_dir)
    assert st["state"] == "tool" and st["tokens"] == 4421
    assert st["evidence"]["tools"][0]["id"] == "toolu_01"
    assert st["evidence"]["mcp_not_connected"] == ["db"]
    m.feed_stdout((USER + "\n").encode())
    assert wait_until(lambda: read_status(m.session_dir)["state"] != "tool")


def test_pending_requests_mean_awaiting_approval(env, procs, monitors, monkeypatch):
    import claudeguard.channel as channel

    from types import SimpleNamespace

    waiting = SimpleNamespace(id="r1", summary="Bash: make", agent_type=None, agent_id=None)
    monkeypatch.setattr(channel, "list_pending", lambda session_id=None: [waiting] if session_id == "s1" else [])
    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=0.5, sample_interval=0.2)
    told: list = []
    m.inputs.on_waiting = told.append  # the launcher's waiting line: once per request
    m.start()
    assert wait_until(lambda: (read_status(m.session_dir) or {}).get("state") == "awaiting-approval")
    # quiet for twice stall_after, as the monitor judged it (its verdict: status.json is
    # rewritten when it changes, not for its clocks)
    assert wait_until(lambda: m.last_verdict is not None
                      and m.last_verdict.time - m.tracker.progress.last >= 1.0, timeout=60)
    st = read_status(m.session_dir)
    assert not hits and st["pending"] == 1 and st["state"] == "awaiting-approval"
    assert told == [waiting]  # told once, however many samples saw it


def test_notify_and_audit_on_stall(env, procs, monitors):
    out = env / "notified.txt"
    child = sleeper(procs)
    notify = [PY, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2] + '|' + sys.argv[3])",
              str(out), "{summary}", "{session}"]
    m, hits = make(monitors, child.pid, stall_after=0.5, sample_interval=0.2, notify=notify)
    m.start()
    # the notify program and the report each in their own time: wait for both
    assert wait_until(lambda: out.exists() and out.read_text() and hits, timeout=60)
    summary, session = out.read_text().split("|")
    assert summary == f"claudeguard: {hits[0]}" and session == "s1"
    audit = [json.loads(line) for line in (env / "log" / "audit.jsonl").read_text().splitlines()]
    stall = [e for e in audit if e.get("event") == "stall"]
    assert stall and stall[0]["summary"] == hits[0] and stall[0]["decided_by"] == "watchdog"
    assert stall[0]["session_id"] == "s1" and stall[0]["action"] == "warn"


def test_notify_command_from_the_session_snapshot(env, procs, monitors):
    out = env / "n2.txt"
    d = session_dir("s1")
    (d / "session.json").write_text(json.dumps({"approval": {"notify": [PY,
                                                                        "-c", "import sys; open(sys.argv[1], "
                                                                              "'w').write('x')", str(out)]}}))
    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=0.5, sample_interval=0.2)
    m.start()
    assert wait_until(lambda: out.exists(), timeout=60)


def test_status_while_running_and_after_stop(env, procs, monitors):
    child = sleeper(procs)
    m, hits = make(monitors, child.pid, stall_after=60, sample_interval=0.2)
    m.start()
    rows = wait_until(lambda: list_sessions())
    assert len(rows) == 1
    row = rows[0]
    assert row["pid"] == psutil.Process().pid and row["child_pid"] == child.pid and row["guarded"] is True
    assert row["cwd"] == "/proj" and row["prompt"] == "fix the flaky test please"
    assert row["state"] in ("starting", "thinking") and row["pending"] == 0 and row["tokens"] == 0
    child.kill()
    child.wait()
    m.stop(137)
    st = read_status(m.session_dir)
    assert st["state"] == "exited" and st["exit_code"] == 137
    assert list_sessions() == []


def test_notify_command_runs_with_no_signal_blocked(env, procs, monitors):
    """The supervisor blocks the signals it forwards in every thread; a notify command started
    from the watchdog thread must not inherit that mask (it could not be stopped with SIGTERM)."""
    import signal

    out = env / "mask.txt"
    child = sleeper(procs)
    code = ("import sys\nfor line in open('/proc/self/status'):\n    if line.startswith('SigBlk:'):\n"
            "        open(sys.argv[1], 'w').write(line.split()[1])\n")
    m, hits = make(monitors, child.pid, stall_after=0.5, sample_interval=0.2, notify=[PY, "-c", code, str(out)])
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        m.start()  # the watchdog thread inherits the blocked mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert wait_until(lambda: out.exists() and out.read_text(), timeout=60)
    assert int(out.read_text(), 16) == 0
