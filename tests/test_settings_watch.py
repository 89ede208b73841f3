"""The settings watch (issue 25 class 7): every settings file the CLI re-reads is judged when it
changes; what silences or loosens the guard ends the session as compromised (stderr line, audit
row, the CLI stopped), a change that only tightens does not; the gate waits for the watch's word
before deciding a call under changed settings. The real CLIs: test_settings_sources_real.py and
test_attacks_real.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudeguard.gate import settings_check
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.settings_watch import Watch
from claudeguard.testing.wait import wait_until
from tests.test_settings_sources import FakeConfig, _Locked


@pytest.fixture
def world(tmp_path, monkeypatch):
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / ".claude").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    for var in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_SIMPLE", "CLAUDE_CODE_SAFE_MODE"):
        monkeypatch.delenv(var, raising=False)
    project = work / ".claude" / "settings.json"
    project.write_text(json.dumps({"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"]}}))
    session = tmp_path / "session"
    session.mkdir()
    return work, project, session, tmp_path


def watch(work: Path, session: Path, lockdown: bool = False, child: int = 0) -> Watch:
    return Watch(parse_claude_args(["-p", "x"]), FakeConfig(_Locked(lockdown)), str(work), child,
                 managed=str(work.parent / "managed"), session_id="s1", session_dir=str(session))


def write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1000))  # an mtime of its own, whatever the clock's grain


@pytest.mark.parametrize("data", [
    {"permissions": {"deny": ["Bash(rm *)", "Bash(curl *)"], "ask": ["Bash(git push *)"]}},  # a git checkout
    {"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"], "defaultMode": "plan"}},
    {"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)", "Write"]}, "model": "x"},
    # what the CLI itself writes when the person at the keyboard answers its dialogs
    {"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"], "allow": ["Bash(npm test)"]},
     "enabledMcpjsonServers": ["one"]},
])
def test_a_change_that_only_tightens_is_checked_and_kept(world, data):
    work, project, session, _ = world
    w = watch(work, session)
    write(project, data)
    assert w.judge() is None
    # the baseline moved with it: going back drops what the change added, a loosening if it was a rule
    write(project, {"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"]}, "model": "y"})
    added_rule = data["permissions"]["deny"] != ["Bash(rm *)"] or "Write" in data["permissions"]["ask"]
    assert (w.judge() is not None) is added_rule


@pytest.mark.parametrize("data, why", [
    ({"disableAllHooks": True}, "disableAllHooks: silences every hook the guard registers"),
    ({"permissions": {"ask": ["Bash(git push *)"]}}, "permissions.deny: drops 'Bash(rm *)'"),
    ({"permissions": {"deny": ["Bash(rm *)"]}}, "permissions.ask: drops 'Bash(git push *)'"),
    ({"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"], "defaultMode": "acceptEdits"}},
     "permissions.defaultMode: looser than before"),
    ({"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"]},
      "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]}},
     "hooks (SessionStart): repository code not run until you trust it"),
    ({"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"]}, "env": {"CLAUDEGUARD_HOOK_TOKEN": "x"}},
     "env.CLAUDEGUARD_HOOK_TOKEN: sets a variable the guard depends on"),
    ({"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(git push *)"]}, "env": {"CLAUDE_CODE_SIMPLE": "1"}},
     "env.CLAUDE_CODE_SIMPLE: switches off every hook"),
])
def test_a_change_that_silences_or_loosens_is_named(world, data, why):
    work, project, session, _ = world
    w = watch(work, session)
    write(project, data)
    said = w.judge()
    assert said is not None and why in said and str(project) in said


@pytest.mark.parametrize("where", ["local", "root-local-from-subdir", "worktree", "user", "agent"])
def test_every_file_the_cli_rereads_is_watched(world, where):
    work, project, session, tmp = world
    cwd = work
    if where == "root-local-from-subdir":
        cwd = work / "sub"
        cwd.mkdir()
    path = {"local": work / ".claude" / "settings.local.json",
            "root-local-from-subdir": work / ".claude" / "settings.local.json",
            "worktree": work / ".claude" / "worktrees" / "w1" / ".claude" / "settings.json",
            "user": tmp / "home" / ".claude" / "settings.json",
            "agent": work / ".claude" / "agents" / "x.md"}[where]
    w = watch(cwd, session)
    files, dirs = w._paths()
    path.parent.mkdir(parents=True, exist_ok=True)
    if where == "agent":
        path.write_text("---\nname: x\nhooks:\n  PreToolUse: []\n---\nhi\n")
    else:
        write(path, {"disableAllHooks": True})
    files2, _ = w._paths()
    assert str(path) in files2
    said = w.judge()
    assert said is not None and str(path) in said


def test_the_watch_ends_a_compromised_session_with_a_line_an_audit_row_and_a_stopped_cli(world):
    work, project, session, tmp = world
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        w = watch(work, session, child=child.pid)
        w.start()
        write(project, {"disableAllHooks": True})
        wait_until(lambda: child.poll() is not None, 60, "the CLI stopped")
        w.stop()
        assert child.returncode != 0
        assert w.compromised is not None and "disableAllHooks" in w.compromised
        rows = [json.loads(line) for line in (tmp / "log" / "audit.jsonl").read_text().splitlines()]
        assert [(r["event"], r["session_id"], r["decided_by"]) for r in rows] == [
            ("compromised", "s1", "settings-watch")]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


@pytest.mark.parametrize("where", ["worktree", "agent"])
def test_a_running_watch_looks_at_a_file_a_new_name_in_a_dir_brings(world, where):
    """The running watch works out the files to look at again only when something changed: a
    worktree made during the session (harmless, checked), then its settings file written, or an
    agent file added (harmless), then rewritten with hooks: the second write is judged too."""
    work, project, session, tmp = world
    path = {"worktree": work / ".claude" / "worktrees" / "w1" / ".claude" / "settings.json",
            "agent": work / ".claude" / "agents" / "x.md"}[where]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        w = watch(work, session, child=child.pid)
        assert str(path) not in w._paths()[0]  # not a file to look at when the watch starts
        w.start()
        path.parent.mkdir(parents=True, exist_ok=True)
        if where == "agent":
            path.write_text("---\nname: x\n---\nhi\n")
        wait_until(lambda: str(path) in w._seen[0], 60, "the new name checked")
        assert child.poll() is None and w.compromised is None
        if where == "agent":
            path.write_text("---\nname: x\nhooks:\n  PreToolUse: []\n---\nhi, and longer\n")
        else:
            write(path, {"disableAllHooks": True})
        wait_until(lambda: child.poll() is not None, 60, "the CLI stopped")
        w.stop()
        assert w.compromised is not None and str(path) in w.compromised, w.compromised
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_the_gate_waits_for_the_watchs_word_and_denies_without_it(world):
    work, project, session, _ = world
    w = watch(work, session)
    assert settings_check.unchecked(str(session)) is None  # as checked
    assert settings_check.unchecked(None) is None and settings_check.unchecked(str(work)) is None  # no watch there
    write(project, {"permissions": {"deny": ["Bash(rm *)", "Bash(curl *)"], "ask": ["Bash(git push *)"]}})
    started = time.monotonic()
    assert settings_check.unchecked(str(session), wait=0.3) == str(project)  # nobody judged it: denied
    assert time.monotonic() - started >= 0.3
    assert w.judge() is None
    w._record()
    assert settings_check.unchecked(str(session)) is None
    w.start()
    try:
        write(project, {"permissions": {"deny": ["Bash(rm *)", "Bash(curl *)", "Bash(wget *)"],
                                        "ask": ["Bash(git push *)"]}})
        assert settings_check.unchecked(str(session)) is None  # the running watch said so in time
    finally:
        w.stop()
