"""The shim on the real CLI (both pinned versions): version, stream-json both ways, argument
fidelity, exit codes and signals, the TUI under a pty, and the recursion guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from claudeguard.testing.tui import READY_TEXT, expect_text, exit_tui
from tests.shim_helpers import GUARD, REPO, guarded_env, wait_until, write_user_config


def test_version_matches_real_cli(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    real = run_claude([real_claude, "--version"], env, offline_env.cwd, timeout=30)
    guarded = run_claude(GUARD + ["--version"], env, offline_env.cwd, timeout=30)
    assert guarded.returncode == real.returncode == 0
    assert guarded.stdout == real.stdout
    assert guarded.stdout.strip().endswith("(Claude Code)")


def test_prompt_bytes_reach_the_model_unchanged(real_claude, offline_env, model_server, run_claude):
    prompt = "FIDELITY \"double\" 'single' $HOME `tick` \\back\nsecond line\tünïcödé 😀 --not-a-flag -p ''"
    server = model_server([{"match": "FIDELITY", "turns": [{"text": "seen"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    proc = run_claude(GUARD + ["-p", prompt, "--append-system-prompt", ""], env, offline_env.cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "seen"
    firsts = [r["first_user_text"] for r in server.requests() if r.get("script") == "FIDELITY"]
    assert firsts and firsts[0].endswith(prompt)


def test_stream_json_line_by_line_both_ways(real_claude, offline_env, model_server):
    server = model_server([
        {"match": "FIRST-TURN", "turns": [{"text": "one"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude)
    argv = GUARD + ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    proc = subprocess.Popen(argv, env=env, cwd=offline_env.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        def send(text: str) -> None:
            line = json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n"
            proc.stdin.write(line.encode())
            proc.stdin.flush()

        def read_until_result() -> list[dict]:
            seen = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                raw = proc.stdout.readline()
                assert raw, f"stdout closed early: {proc.stderr.read().decode()[-2000:]}"
                msg = json.loads(raw)
                seen.append(msg)
                if msg.get("type") == "result":
                    return seen
            raise AssertionError("no result line")

        send("FIRST-TURN please")
        first = read_until_result()
        assert first[0]["type"] == "system" and first[0]["subtype"] == "init"
        assert first[-1]["result"] == "one"
        def scripted() -> list[dict]:
            return [r for r in server.requests() if r.get("script") == "FIRST-TURN"]
        assert len(scripted()) == 1
        # The child is still running and asks the model again only after we send a second line:
        # the relay does not buffer until EOF in either direction.
        assert proc.poll() is None
        send("SECOND-TURN please")
        second = read_until_result()
        assert second[-1]["type"] == "result" and second[-1]["is_error"] is False
        assert len(scripted()) == 2
        proc.stdin.close()  # EOF reaches the child, which ends the conversation
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_exit_code_passes_through(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    real = run_claude([real_claude, "--no-such-option-x"], env, offline_env.cwd, timeout=30)
    guarded = run_claude(GUARD + ["--no-such-option-x"], env, offline_env.cwd, timeout=30)
    assert real.returncode != 0
    assert guarded.returncode == real.returncode


def _descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after ``timeout`` (at once, [] when all are gone)."""

    def alive() -> list[int]:
        return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

    try:
        wait_until(lambda: not alive(), timeout)
    except AssertionError:
        return alive()
    return []


def _start_stalled(real_claude, offline_env, model_server, marker: str) -> tuple[subprocess.Popen, int]:
    server = model_server([{"match": marker, "turns": [{"stall_after_text": "thinking..."}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    proc = subprocess.Popen(GUARD + ["-p", f"{marker} go"], env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    server.wait_for(lambda: any(r.get("script") == marker for r in server.requests()), timeout=60)
    kids = [p for p in _descendants(proc.pid) if "claude" in " ".join(psutil.Process(p).cmdline())]
    assert kids, "the real CLI is not a child of claudeguard"
    return proc, kids[0]


# What the real CLI itself exits with after each signal (measured on both pinned versions without
# the guard): SIGINT ends a -p run cleanly, SIGQUIT kills it (so 128 + 3).
@pytest.mark.parametrize("sig, code",
                         [(signal.SIGTERM, 143), (signal.SIGINT, 0), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)])
def test_signal_to_guard_reaches_the_child(real_claude, offline_env, model_server, sig, code):
    proc, child = _start_stalled(real_claude, offline_env, model_server, f"SIGNAL-{sig.name}")
    try:
        os.kill(proc.pid, sig)  # to claudeguard alone, as `kill PID` would
        rc = proc.wait(timeout=60)
        assert not _wait_gone([child], 10)
        assert rc == code
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_ends_the_tools_the_cli_leaves_running(real_claude, offline_env, model_server, sig):
    # 2.1.197 leaves a running Bash tool behind on SIGTERM and SIGHUP; the guard stops it.
    marker = f"LEFTOVER-{sig.name}-{os.getpid()}"
    command = f"python3 -c 'import time; time.sleep(300)' {marker}"
    server = model_server([{"match": marker,
                            "turns": [{"tool_use": {"name": "Bash", "input": {"command": command}}},
                                      {"text": "done"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Bash(python3 *)"]\n')
    proc = subprocess.Popen(GUARD + ["-p", f"{marker} go"], env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def tool() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]

    started: list[psutil.Process] = []
    try:
        started = wait_until(tool, 60, "the Bash tool to start")
        os.kill(proc.pid, sig)
        proc.communicate(timeout=60)
        assert _wait_gone([p.pid for p in started], 1) == []  # already gone when claudeguard exits
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for p in started + tool():
            try:
                p.kill()
            except psutil.Error:
                pass


def test_killed_guard_leaves_no_orphan(real_claude, offline_env, model_server):
    proc, child = _start_stalled(real_claude, offline_env, model_server, "ORPHAN-CHECK")
    family = [child] + _descendants(child)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert not _wait_gone([child], 15), "the CLI outlived claudeguard"
    finally:
        for pid in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_child_killed_by_signal_gives_128_plus_n(real_claude, offline_env, model_server):
    proc, child = _start_stalled(real_claude, offline_env, model_server, "SIGKILL-CHILD")
    try:
        os.kill(child, signal.SIGKILL)
        assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_tui_starts_under_a_pty_through_the_shim(real_claude, offline_env, model_server, spawn_tui):
    server = model_server([{"match": "TUI-HELLO", "turns": [{"text": "hello from the model"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    child = spawn_tui(GUARD, env, offline_env.cwd)
    expect_text(child, READY_TEXT, timeout=30)
    child.send("TUI-HELLO there")
    time.sleep(0.3)  # the TUI debounces typed text before Enter; not a wait for the result
    child.send("\r")
    expect_text(child, "hello from the model", timeout=30)
    exit_tui(child)


def _path_with(*dirs: Path) -> str:
    return os.pathsep.join(str(d) for d in dirs) + os.pathsep + "/usr/bin:/bin"


def test_recursion_guard_path_with_only_the_shim(real_claude, offline_env, run_claude, tmp_path):
    env = dict(offline_env)
    env["PATH"] = _path_with(REPO / "bin", Path(os.sys.executable).parent)
    proc = run_claude([REPO / "bin" / "claude", "--version"], env, offline_env.cwd, timeout=30)
    assert proc.returncode == 2
    assert "real Claude CLI was not found" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_shim_first_on_path_finds_the_real_cli(real_claude, offline_env, run_claude, tmp_path):
    linkdir = tmp_path / "links"
    linkdir.mkdir()
    (linkdir / "claude").symlink_to(REPO / "bin" / "claude")  # a `claude` symlink to the shim
    env = dict(offline_env)
    env["PATH"] = _path_with(linkdir, REPO / "bin", real_claude.parent, Path(os.sys.executable).parent)
    proc = run_claude(["claude", "--version"], env, offline_env.cwd, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("(Claude Code)")


def test_claudeguard_claude_pointing_at_the_shim_is_refused(real_claude, offline_env, run_claude):
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(REPO / "bin" / "claude"))
    proc = run_claude(GUARD + ["--version"], env, offline_env.cwd, timeout=30)
    assert proc.returncode == 2
    assert "is claudeguard itself" in proc.stderr


def test_recursion_token_stops_a_guard_started_by_a_guard(offline_env, run_claude, tmp_path):
    # A "real CLI" that is in fact claudeguard under another name (copied, so no path or content
    # check can tell): the recursion token in the environment still stops the loop.
    fake = tmp_path / "claude"
    fake.write_text(f"#!/bin/sh\nm=claude\nexec {os.sys.executable} -m ${{m}}guard \"$@\"\n")
    fake.chmod(0o755)
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(fake), PYTHONPATH=str(REPO))
    proc = run_claude(GUARD + ["--version"], env, offline_env.cwd, timeout=30)
    assert proc.returncode == 2
    assert "started as its own child" in proc.stderr


def _argv_printer(tmp_path: Path) -> Path:
    fake = tmp_path / "print-argv"
    fake.write_text(f"#!{os.sys.executable}\nimport json, os, sys\n"
                    "settings = [a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--settings=')]\n"
                    "print(json.dumps({'argv': sys.argv[1:], 'guarded': bool(settings),\n"
                    "                  'settings': json.load(open(settings[-1])) if settings\n"
                    "                  and not settings[-1].startswith('{') else None}))\n")
    fake.chmod(0o755)
    return fake


def test_disable_execs_the_real_cli_untouched(offline_env, run_claude, tmp_path):
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(_argv_printer(tmp_path)), CLAUDEGUARD_DISABLE="1")
    argv = ["--guard-not-an-option", "-p", "x y", "", "--settings", "{}"]
    proc = run_claude(GUARD + argv, env, offline_env.cwd, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"argv": argv, "guarded": False, "settings": None}


def test_guarded_argv_keeps_callers_words_in_order(offline_env, run_claude, tmp_path):
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(_argv_printer(tmp_path)))
    argv = ["-p", "a \"b\"\nc", "", "--model", "x", "--", "-not-an-option"]
    proc = run_claude(GUARD + argv, env, offline_env.cwd, timeout=30)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    # the caller's words in order; the guard's --settings last among the options, before `--`
    # (a 0600 file in the session dir: it holds the hooks' secret)
    settings = seen["argv"][-3]
    assert settings.startswith("--settings=")
    assert settings.endswith("/settings.json") and "hooks" in seen["settings"]
    assert seen["argv"][-len(argv) - 1:-3] + seen["argv"][-2:] == argv
    assert seen["guarded"]


def test_unknown_guard_option_is_a_usage_error_before_anything_starts(offline_env, run_claude, tmp_path):
    marker = tmp_path / "started"
    fake = tmp_path / "fake-claude"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(fake))
    proc = run_claude(GUARD + ["--guard-bogus", "-p", "x"], env, offline_env.cwd, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("claudeguard: unknown option --guard-bogus")
    assert not marker.exists()
