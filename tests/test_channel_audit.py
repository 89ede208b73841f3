"""The audit log: one JSON line per event, private modes, concurrent writers, `--follow` across
rotation, and a broken log that is reported once and never blocks a decision."""

from __future__ import annotations

import errno
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudeguard import files
from claudeguard.channel import audit

EVENT = {"session_id": "s1", "agent_type": None, "agent_id": None, "tool": "Bash", "summary": "Bash(ls)",
         "decision": "allow", "decided_by": "rule", "scope": None, "waited_s": 0.0}


@pytest.fixture
def log(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    monkeypatch.setattr(audit, "_reported", False)
    return tmp_path / "log" / "audit.jsonl"


def test_record_appends_one_line_with_time(log):
    assert audit.audit_path() == log
    audit.record(EVENT)
    audit.record({**EVENT, "decision": "deny", "time": "2024-01-01T00:00:00.000Z", "extra": Path("/x")})
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert {k: first[k] for k in EVENT} == EVENT
    assert second["time"] == "2024-01-01T00:00:00.000Z" and second["extra"] == "/x"  # not JSON: str()
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(log.parent).st_mode) == 0o700
    assert list(audit.read_events()) == [first, second]


def test_record_does_not_change_the_callers_dict(log):
    event = dict(EVENT)
    audit.record(event)
    assert "time" not in event


def test_loose_file_mode_is_tightened(log):
    audit.record(EVENT)
    os.chmod(log, 0o644)
    audit.record(EVENT)
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600


def test_input_digest_is_canonical():
    a = audit.input_digest({"command": "ls", "description": "list"})
    assert a == audit.input_digest({"description": "list", "command": "ls"})
    assert a != audit.input_digest({"command": "ls -a", "description": "list"})
    assert re.fullmatch(r"[0-9a-f]{16}", a)
    assert re.fullmatch(r"[0-9a-f]{16}", audit.input_digest({"x": {1, 2}, "é": b"bytes"}))


def test_unwritable_log_is_reported_once_and_never_raises(log, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(blocker / "log"))  # below a regular file
    for _ in range(3):
        audit.record(EVENT)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"claudeguard: audit log {blocker / 'log' / 'audit.jsonl'}: ")
    assert err[0].endswith("; decision not logged")


def test_full_disk_is_reported_and_the_torn_line_skipped(log, monkeypatch, capsys):
    audit.record({**EVENT, "n": 1})

    def enospc(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "_write", enospc)
    audit.record({**EVENT, "n": 2})
    assert "No space left on device; decision not logged" in capsys.readouterr().err

    def short(fd: int, data: bytes) -> int:
        return os.write(fd, data[:10])  # the disk filled mid-line

    monkeypatch.setattr(files, "_write", short)
    audit.record({**EVENT, "n": 3})
    assert capsys.readouterr().err == ""  # reported once per process
    monkeypatch.undo()
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(log.parent))
    audit.record({**EVENT, "n": 4})
    assert [e["n"] for e in audit.read_events()] == [1, 4]


def test_symlinked_log_is_refused(log, tmp_path, capsys):
    log.parent.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.jsonl"
    os.symlink(target, log)
    audit.record(EVENT)
    assert not target.exists()
    assert "decision not logged" in capsys.readouterr().err


def test_concurrent_writers_never_interleave(log):
    writer = ("from claudeguard.channel import audit\nimport sys\n"
              "for n in range(200): audit.record({'w': int(sys.argv[1]), 'n': n, 'summary': 'x' * 3000})")
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(w)]) for w in range(4)]
    try:
        for proc in procs:
            assert proc.wait(30) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    events = list(audit.read_events())
    assert len(events) == 800 and len(log.read_text().splitlines()) == 800
    for w in range(4):
        assert [e["n"] for e in events if e["w"] == w] == list(range(200))


def test_read_events_without_log(log):
    assert list(audit.read_events()) == []


def test_follow_sees_new_lines_and_rotation(log):
    follower = ("from claudeguard.channel import audit\n"
                "for e in audit.read_events(follow=True): print(e['n'], flush=True)")
    proc = subprocess.Popen([sys.executable, "-c", follower], stdout=subprocess.PIPE, text=True)
    try:
        def next_line() -> str:
            assert select.select([proc.stdout], [], [], 10)[0], "follow printed nothing"
            return proc.stdout.readline().strip()

        audit.record({"n": 1})  # the log did not exist when the follower started
        assert next_line() == "1"
        audit.record({"n": 2})
        assert next_line() == "2"
        log.rename(log.with_suffix(".1"))  # rotated
        audit.record({"n": 3})
        assert next_line() == "3"
        with open(log, "ab") as f:  # a line written in two pieces is printed once, whole
            f.write(b'{"n": ')
            f.flush()
            time.sleep(0.3)
            f.write(b"4}\n")
        assert next_line() == "4"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
