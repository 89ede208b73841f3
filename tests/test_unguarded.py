"""``ps --all``: unguarded Claude CLIs judged from recent evidence (issue 10): the quiet time since
the last transcript or output write (or the start), ``stall_after`` (``tool_stall_after`` while
the transcript shows a tool call in flight), a CPU/io window, and the terminal. Stand-in CLIs
here (a script named ``claude``); tests/test_unguarded_real.py runs the real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from claudeguard.watchdog import unguarded as ug
from claudeguard.watchdog.signals import ProcInfo, Sample
from claudeguard.watchdog.status import list_sessions, process_start, write_status

from test_watchdog_sampler import wait_until

PY = sys.executable
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process names and /proc as on Linux")
SID = "0b1e6a52-3c1d-4e0f-9a56-2f3e4d5c6b7a"


@pytest.fixture
def fake(tmp_path):
    """A script named ``claude``: burns ``BURN`` seconds of CPU (or forever with ``BUSY``),
    says "up", then sleeps."""
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    path.write_text(f"#!{PY}\nimport os, time\nend = time.process_time() + float(os.environ.get('BURN', '0'))\n"
                    "while os.environ.get('BUSY') or time.process_time() < end: pass\n"
                    "print('up', flush=True)\ntime.sleep(120)\n")
    path.chmod(0o755)
    return path


def start(fake, tmp_path, procs, *args: str, stdout=subprocess.PIPE, **env: str) -> subprocess.Popen:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.Popen([str(fake), *args], stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True,
                            cwd=work, env=dict(os.environ, HOME=str(tmp_path / "home"), **env))
    procs.append(proc)
    if stdout is subprocess.PIPE:
        assert proc.stdout.readline() == "up\n"
    assert wait_until(lambda: psutil.Process(proc.pid).name() == "claude")
    return proc


def row_of(pid: int, **limits: float) -> dict:
    limits.setdefault("window_s", 0.3)
    rows = [r for r in list_sessions(include_unguarded=True, **limits) if r["pid"] == pid]
    assert len(rows) == 1, rows
    return rows[0]


def age(pid: int) -> float:
    return time.time() - psutil.Process(pid).create_time()


def transcript(tmp_path, records: list[dict], session: str = SID) -> str:
    folder = tmp_path / "home" / ".claude" / "projects" / ug.project_dir("", str(tmp_path / "work")).rsplit("/", 1)[-1]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def tool_use(name: str) -> dict:
    return {"type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": name, "input": {}}]}}


USER = {"type": "user", "message": {"role": "user", "content": "go"}}
BOOKKEEPING = {"type": "last-prompt", "lastPrompt": "go"}  # 2.1.330 writes such records after the messages


# -- pure pieces ---------------------------------------------------------------------------------
def test_project_dir_is_the_cwd_with_every_other_character_a_dash():
    assert ug.project_dir("/h/.claude", "/tmp/cg-report.x/a_b/work") == "/h/.claude/projects/-tmp-cg-report-x-a-b-work"


@pytest.mark.parametrize("argv,expected", [
    (["claude", "-p", "hi"], True), (["claude", "--print"], True), (["claude", "-cp"], True),
    (["claude"], False), (["claude", "--permission-mode", "plan"], False), (["claude", "hi"], False),
])
def test_print_mode(argv, expected):
    assert ug.print_mode(argv) is expected


@pytest.mark.parametrize("records,expected", [
    ([USER, tool_use("Bash")], "Bash"),
    ([USER, tool_use("Bash"), BOOKKEEPING], "Bash"),
    ([USER, tool_use("Bash"),
      {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1"}]}}], None),
    ([USER, tool_use("Agent")], None),  # a subagent: its own transcript says what it does
    ([USER], None),
    ([], None),
])
def test_last_tool_in_flight(tmp_path, records, expected):
    path = tmp_path / "t.jsonl"
    being_written = '{"type": "assistant", "mess'
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + being_written)
    assert ug.last_tool_in_flight(str(path)) == expected


def test_a_session_id_on_the_command_line_picks_its_transcript(tmp_path):
    other = "ffffffff-3c1d-4e0f-9a56-2f3e4d5c6b7a"
    mine = transcript(tmp_path, [USER, tool_use("Bash")])
    transcript(tmp_path, [USER], session=other)  # written later: the newest
    env = {"HOME": str(tmp_path / "home")}
    cwd = str(tmp_path / "work")
    assert ug.gather(1, ["claude", "--session-id", SID], cwd, env, time.time() - 5).transcript == mine
    newest = ug.gather(1, ["claude"], cwd, env, time.time() - 5)
    assert newest.transcript.endswith(other + ".jsonl") and newest.tool is None
    assert ug.gather(1, ["claude"], cwd, env, time.time() + 5).transcript is None  # written before it started
    config = ug.gather(1, ["claude"], cwd, {"CLAUDE_CONFIG_DIR": str(tmp_path / "nowhere"), **env}, time.time() - 5)
    assert config.transcript is None and config.notes == ["no transcript written since it started"]


def test_window_floors():
    def sample(t: float, root_cpu: float, tool_cpu: float, io: int) -> Sample:
        return Sample(t, 10, {10: ProcInfo(10, 1, "claude", cpu=root_cpu, start=1, io=io),
                              11: ProcInfo(11, 10, "bash", cpu=tool_cpu, start=2, io=0)})

    base = sample(0.0, 5.0, 1.0, 1000)
    assert ug.window_moved(base, sample(1.0, 5.05, 1.0, 1100)) == (False, 0.05, 100)  # an idle CLI's timers
    assert ug.window_moved(base, sample(1.0, 5.5, 1.0, 1000))[0]  # the CLI works
    assert ug.window_moved(base, sample(1.0, 5.0, 1.2, 1000))[0]  # a tool works
    assert ug.window_moved(base, sample(1.0, 5.0, 1.0, 9000))[0]  # a stream flows


def test_a_cli_that_wants_the_cpu_moved_in_the_window():
    def sample(t: float, run: float, wait: float) -> Sample:
        return Sample(t, 10, {10: ProcInfo(10, 1, "claude", cpu=run, start=1, io=0, sched_run=run, sched_wait=wait)})

    base = sample(0.0, 5.0, 2.0)
    # A busy CLI given 4 % of a CPU on a loaded machine: under the CPU floor, runnable throughout.
    assert ug.window_moved(base, sample(1.0, 5.04, 2.96)) == (True, 0.04, 0)
    # An idle CLI's wake-ups on the same machine: runnable 10 % of the window.
    assert ug.window_moved(base, sample(1.0, 5.01, 2.09)) == (False, 0.01, 0)


# -- stand-in CLIs -------------------------------------------------------------------------------
@linux_only
def test_unguarded_claude_is_listed_and_a_guarded_one_is_not(rt, tmp_path, fake, procs):
    loose = start(fake, tmp_path, procs, "-p", "summarize the logs from yesterday")
    guarded = start(fake, tmp_path, procs)
    supervisor = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    procs.append(supervisor)
    assert wait_until(lambda: process_start(supervisor.pid))
    d = rt / "g"
    d.mkdir(mode=0o700)
    write_status(d, {"session_id": "g", "pid": supervisor.pid, "pid_start": process_start(supervisor.pid),
                     "child_pid": guarded.pid, "state": "thinking", "started": time.time(), "updated": time.time()})
    rows = [r for r in list_sessions(include_unguarded=True, window_s=0.3) if r["pid"] in (loose.pid, guarded.pid)]
    assert [r["pid"] for r in rows] == [loose.pid]
    row = rows[0]
    assert row["guarded"] is False and row["child_pid"] is None and row["cwd"] == str(tmp_path / "work")
    assert row["prompt"] == "summarize the logs from yesterday"
    assert row["suspect_hung"] is False and row["state"] == "unguarded"  # quiet for seconds, not 300
    assert row["evidence"]["threshold_s"] == 300 and row["evidence"]["notes"] == ["no transcript written "
                                                                                  "since it started"]
    assert 0 <= row["last_activity_s"] < 60


@linux_only
def test_a_cli_that_worked_then_went_quiet_is_flagged(rt, tmp_path, fake, procs):
    # Its whole-life CPU share is high (it burned CPU at first): only recent evidence counts.
    proc = start(fake, tmp_path, procs, "-p", "work then hang", BURN="0.6")
    assert wait_until(lambda: age(proc.pid) > 1.2, timeout=60)
    row = row_of(proc.pid, stall_after=1.0)
    assert row["cpu_s"] >= 0.5 and row["cpu_s"] / row["age_s"] > 0.05
    assert row["suspect_hung"] is True and row["state"] == "suspect-hung", (row["evidence"],
                                                                            row["last_activity_s"], row["age_s"])
    assert row["diagnosis"].startswith("no progress for ")
    assert "it started, with no transcript write since" in row["diagnosis"]
    assert row["evidence"]["window_s"] == 0.3 and row["evidence"]["window_cpu_s"] < 0.1
    assert row_of(proc.pid, stall_after=60)["suspect_hung"] is False  # the configured threshold decides


@linux_only
def test_a_busy_cli_is_not_flagged(rt, tmp_path, fake, procs):
    proc = start(fake, tmp_path, procs, "-p", "x", stdout=subprocess.DEVNULL, BUSY="1")
    assert wait_until(lambda: age(proc.pid) > 0.5)
    # The product's own 1 s window, not the tests' 0.3 s: on a loaded machine (CI at load 7 on two
    # cores) a busy loop got less than the CPU floor of a 0.3 s look, and was taken for a hung one.
    row = row_of(proc.pid, stall_after=0.1, window_s=1.0)
    assert row["suspect_hung"] is False and row["evidence"]["window_cpu_s"] > 0.1


@linux_only
def test_a_transcript_write_is_progress(rt, tmp_path, fake, procs):
    proc = start(fake, tmp_path, procs, "-p", "x")
    path = transcript(tmp_path, [USER])
    assert wait_until(lambda: age(proc.pid) > 1.5, timeout=60)
    os.utime(path)
    row = row_of(proc.pid, stall_after=1.0)
    assert row["suspect_hung"] is False and row["evidence"]["transcript"] == path
    assert row["evidence"]["transcript_write_s"] < 1.0 and row["last_activity_s"] < 1.0
    started = psutil.Process(proc.pid).create_time()
    os.utime(path, (started + 0.2, started + 0.2))
    row = row_of(proc.pid, stall_after=1.0)
    assert row["suspect_hung"] is True and "its transcript was last written" in row["diagnosis"]


@linux_only
def test_a_tool_in_flight_waits_for_tool_stall_after(rt, tmp_path, fake, procs):
    proc = start(fake, tmp_path, procs, "-p", "x")
    path = transcript(tmp_path, [USER, tool_use("Bash"), BOOKKEEPING])
    started = psutil.Process(proc.pid).create_time()
    os.utime(path, (started, started))
    assert wait_until(lambda: age(proc.pid) > 1.0, timeout=60)
    row = row_of(proc.pid, stall_after=0.5, tool_stall_after=60)
    assert row["suspect_hung"] is False
    assert row["evidence"]["tool_in_flight"] == "Bash" and row["evidence"]["threshold_s"] == 60
    transcript(tmp_path, [USER, tool_use("Agent")])  # a subagent: judged by stall_after
    os.utime(path, (started, started))
    row = row_of(proc.pid, stall_after=0.5, tool_stall_after=60)
    assert row["suspect_hung"] is True and row["evidence"]["threshold_s"] == 0.5


@linux_only
def test_an_output_file_write_is_progress(rt, tmp_path, fake, procs):
    out = tmp_path / "out.log"
    with open(out, "w") as fh:
        proc = start(fake, tmp_path, procs, "-p", "x", stdout=fh)
    assert wait_until(lambda: out.read_text() == "up\n")
    assert wait_until(lambda: age(proc.pid) > 1.5, timeout=60)
    os.utime(out)
    row = row_of(proc.pid, stall_after=1.0)
    assert row["suspect_hung"] is False and row["evidence"]["output_write_s"] < 1.0
    started = psutil.Process(proc.pid).create_time()
    os.utime(out, (started, started))
    assert row_of(proc.pid, stall_after=1.0)["suspect_hung"] is True


@linux_only
def test_a_terminal_without_p_may_wait_for_its_user(rt, tmp_path, fake):
    import pexpect

    children = []
    try:
        for args, flagged in (([], False), (["-p", "x"], True)):
            child = pexpect.spawn(str(fake), args, cwd=str(tmp_path), env=dict(os.environ, HOME=str(tmp_path / "home")))
            children.append(child)
            child.expect("up", timeout=10)
            assert wait_until(lambda child=child: age(child.pid) > 1.0, timeout=60)
            row = row_of(child.pid, stall_after=0.5)
            assert row["tty"] and row["interactive"] is (not flagged) and row["suspect_hung"] is flagged, row
    finally:
        for child in children:
            child.terminate(force=True)
