"""Status files and the session listing behind ``claudeguardctl ps``."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time

from claudeguard.watchdog import status as status_mod
from claudeguard.watchdog.status import list_sessions, process_start, read_status, write_status

PY = sys.executable


def fake_session(root, name, *, pid=None, pid_start="auto", state="thinking", child_pid=None, started=None):
    d = root / name
    d.mkdir(mode=0o700)
    pid = os.getpid() if pid is None else pid
    write_status(d, {
        "session_id": name, "pid": pid, "pid_start": process_start(pid) if pid_start == "auto" else pid_start,
        "child_pid": child_pid, "guarded": True, "cwd": f"/proj/{name}", "state": state, "cpu_s": 1.25,
        "tokens": 4242, "last_activity": time.time() - 12, "pending": 1, "prompt": "refactor the parser",
        "started": started or time.time(), "updated": time.time(), "argv": ["claude"], "evidence": {},
    })
    return d


def test_write_status_is_private_and_atomic(tmp_path):
    write_status(tmp_path, {"state": "thinking"})
    write_status(tmp_path, {"state": "tool"})
    path = tmp_path / "status.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_status(tmp_path) == {"state": "tool"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


def test_write_status_does_not_follow_a_symlink(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    d = tmp_path / "s"
    d.mkdir()
    (d / (".status.json.%d.tmp" % os.getpid())).symlink_to(target)  # the temp name of old
    (d / "status.json").symlink_to(target)
    write_status(d, {"state": "x"})
    assert target.read_text() == "keep"
    assert not (d / "status.json").is_symlink() and read_status(d) == {"state": "x"}
    assert (d / "status.json").stat().st_mode & 0o777 == 0o600


def test_list_sessions_fields(rt):
    fake_session(rt, "a", started=1.0)
    fake_session(rt, "b", started=2.0, state="tool")
    rows = list_sessions()
    assert [r["session_id"] for r in rows] == ["a", "b"]
    row = rows[0]
    for key in status_mod.FIELDS:
        assert key in row
    assert row["pid"] == os.getpid() and row["guarded"] is True and row["tokens"] == 4242
    assert 11 <= row["last_activity_s"] <= 20 and row["pending"] == 1 and row["prompt"] == "refactor the parser"


def test_dead_supervisor_is_shown_once_and_cleaned_up(rt):
    p = subprocess.Popen([PY, "-c", "pass"])
    p.wait()
    fake_session(rt, "dead", pid=p.pid, pid_start=12345.0)
    fake_session(rt, "reused", pid=os.getpid(), pid_start=1.0)  # our pid, another process's start time
    fake_session(rt, "done", pid=p.pid, pid_start=12345.0, state="exited")
    fake_session(rt, "live")
    rows = list_sessions()
    by_id = {r["session_id"]: r for r in rows}
    assert by_id["dead"]["state"] == "supervisor-dead" and by_id["reused"]["state"] == "supervisor-dead"
    assert by_id["live"]["state"] == "thinking" and "done" not in by_id
    assert sorted(p.name for p in rt.iterdir()) == ["live"]
    assert [r["session_id"] for r in list_sessions()] == ["live"]


def test_exited_sessions_are_not_listed(rt):
    fake_session(rt, "finished", state="exited")
    assert list_sessions() == []


def test_no_runtime_dir_means_no_sessions(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "nothing"))
    assert list_sessions() == []
    assert not (tmp_path / "nothing").exists()


def test_fifty_sessions_list_fast(rt):
    for i in range(50):
        fake_session(rt, f"s{i:02d}", started=float(i))
    t0 = time.perf_counter()
    rows = list_sessions()
    assert len(rows) == 50 and time.perf_counter() - t0 < 0.3


def test_ps_never_cuts_a_state(rt, capsys):
    from claudeguard.commands.ps import main as ps_main

    fake_session(rt, "a", started=1.0, state="blocked-on-terminal")
    fake_session(rt, "b", started=2.0, state="tool")
    assert ps_main(["ps"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0] == ("    PID   CHILD STATE                   CPU   TOKENS   IDLE PEND  CWD / PROMPT")
    pid = os.getpid()
    idle = r"   1\ds"  # 12 s ago when written, a moment more when listed
    rest = r"    1  /proj/(a|b)  refactor the parser"
    assert re.fullmatch(rf"{pid:>7}       - blocked-on-terminal    1\.2s     4242 {idle}{rest}", lines[1]), lines[1]
    assert re.fullmatch(rf"{pid:>7}       - tool                   1\.2s     4242 {idle}{rest}", lines[2]), lines[2]
