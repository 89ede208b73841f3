"""Lockdown: every way of loosening the guard is refused with one line and exit 2, and the
child is never started."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.shim_helpers import GUARD, plain_env


@pytest.fixture
def locked(tmp_path):
    marker = tmp_path / "child-started"
    fake = tmp_path / "fake-claude"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    env = plain_env(tmp_path, (
        '[security]\ndisable_bypass_permissions = true\n\n[permissions]\ndeny = ["Bash(rm *)"]\n\n'
        '[profiles.loose]\npermissions.replace = true\npermissions.allow = ["Bash"]\n'
    ), CLAUDEGUARD_CLAUDE=str(fake))
    return env, tmp_path / "work", marker, tmp_path


def run(env: dict, work, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(GUARD + argv, env=env, cwd=work, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


BYPASS = {"permissions": {"defaultMode": "bypassPermissions"}}


@pytest.mark.parametrize("argv, words", [
    (["--dangerously-skip-permissions", "-p", "x"], "--dangerously-skip-permissions is refused"),
    (["--allow-dangerously-skip-permissions", "-p", "x"], "--allow-dangerously-skip-permissions is refused"),
    (["--permission-mode", "bypassPermissions", "-p", "x"], "--permission-mode bypassPermissions is refused"),
    (["--permission-mode=bypassPermissions", "-p", "x"], "--permission-mode bypassPermissions is refused"),
    (["--settings", json.dumps(BYPASS), "-p", "x"],
     "--settings (inline JSON): permissions.defaultMode: bypassPermissions"),
    (["--settings", json.dumps({"disableAllHooks": True}), "-p", "x"], "disableAllHooks"),
    (["--bare", "-p", "x"], "--bare"),
    (["--guard-profile", "loose", "-p", "x"], "replace = true in [permissions] loosens the guard: refused by lockdown"),
    (["--dangerously-skip-permissions", "--version"], "--dangerously-skip-permissions is refused"),
])
def test_bypass_paths_are_refused_before_the_child_starts(locked, argv, words):
    env, work, marker, _ = locked
    proc = run(env, work, argv)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr
    # one line, or, for a file that loosens twice, one line for each loosening (file:line each)
    lines = proc.stderr.splitlines()
    if argv[:2] == ["--guard-profile", "loose"]:
        assert [line.split(": ", 2)[1].rsplit(":", 1)[1] for line in lines] == ["8", "9"]
        assert "allow rule 'Bash' in [permissions] loosens the guard: refused by lockdown" in lines[1]
    else:
        assert len(lines) == 1
    assert not marker.exists()


def test_settings_file_that_sets_bypass(locked):
    env, work, marker, tmp = locked
    path = tmp / "loose-settings.json"
    path.write_text(json.dumps(BYPASS))
    proc = run(env, work, ["--settings", str(path), "-p", "x"])
    assert proc.returncode == 2 and "bypassPermissions" in proc.stderr
    assert not marker.exists()


def test_project_file_dropping_deny_rules(locked):
    env, work, marker, _ = locked
    (work / ".claudeguard.toml").write_text('[permissions]\nreplace = true\nallow = ["Read"]\n')
    proc = run(env, work, ["-p", "x"])
    assert proc.returncode == 2 and ".claudeguard.toml:2: replace = true in [permissions] loosens the guard: refused " \
                                    "by lockdown" in proc.stderr
    assert not marker.exists()


def test_disable_is_refused(locked):
    env, work, marker, _ = locked
    proc = run(dict(env, CLAUDEGUARD_DISABLE="1"), work, ["-p", "x"])
    assert proc.returncode == 2 and "CLAUDEGUARD_DISABLE is refused" in proc.stderr
    assert not marker.exists()


def test_without_lockdown_the_same_flags_pass(locked):
    env, work, marker, tmp = locked
    (tmp / "xdg" / "claudeguard" / "config.toml").write_text('[permissions]\ndeny = ["Bash(rm *)"]\n')
    proc = run(env, work, ["--dangerously-skip-permissions", "-p", "x"])
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
