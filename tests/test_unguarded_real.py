"""``ps --all`` on the real CLI started without claudeguard (both pinned versions): a CLI whose
model stream went silent is flagged once its transcript has been quiet for ``--stall-after``
seconds (minutes before the old 300 s age rule), and a CLI running a long tool is judged by
``tool_stall_after`` from what its transcript says."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from tests.shim_helpers import ctl, wait_until, write_user_config


def start_cli(real_claude, env: dict, cwd, prompt: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([str(real_claude), "-p", prompt, *extra], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # its own group: the CLI and the tools it started
    proc.communicate(timeout=60)


def row_of(env: dict, pid: int, *args: str) -> dict:
    out = ctl(env, "ps", "--all", "--json", "--window", "0.5", *args)
    assert out.returncode == 0, out.stderr
    rows = [r for r in json.loads(out.stdout) if r["pid"] == pid]
    assert len(rows) == 1, out.stdout
    return rows[0]


def wait_row(env: dict, pid: int, predicate, *args: str, timeout: float = 45) -> dict:  # type: ignore[no-untyped-def]
    """The row once ``predicate`` holds; the row then, if never (the caller's assert shows it)."""
    try:
        return wait_until(lambda: row if predicate(row := row_of(env, pid, *args)) else None, timeout, interval=0.5)
    except AssertionError:
        return row_of(env, pid, *args)


def test_a_silent_stream_is_flagged_after_stall_after(real_claude, offline_env, model_server):
    server = model_server([{"match": "UNGSTALL", "turns": [{"stall_after_text": "Let me th"}]}])
    env = offline_env.use(server)
    proc = start_cli(real_claude, env, offline_env.cwd, "UNGSTALL go")
    try:
        server.wait_for(lambda: any(r.get("script") == "UNGSTALL" for r in server.requests()), timeout=60)
        # Its transcript may be made a moment after its request (2.1.197 under load: CI run 59).
        young = wait_row(env, proc.pid, lambda r: r["evidence"]["transcript"], "--stall-after", "30")
        assert young["guarded"] is False and young["suspect_hung"] is False and young["tty"] is None
        transcript = young["evidence"]["transcript"]
        assert transcript and transcript.startswith(str(offline_env.home / ".claude" / "projects"))
        assert transcript.endswith(".jsonl")
        assert young["evidence"]["threshold_s"] == 30 and young["evidence"]["tool_in_flight"] is None
        row = wait_row(env, proc.pid, lambda r: r["suspect_hung"], "--stall-after", "3")
        assert row["suspect_hung"] is True and row["state"] == "suspect-hung", row
        assert row["evidence"]["transcript_write_s"] >= 3 and row["last_activity_s"] >= 3
        assert row["age_s"] < 120  # the old rule waited for 300 s of life
        assert row["diagnosis"].startswith("no progress for ") and "its transcript was last written" in row["diagnosis"]
        # The configured watchdog.stall_after is the default threshold.
        write_user_config(env, "[watchdog]\nstall_after = 3600\n")
        assert row_of(env, proc.pid)["suspect_hung"] is False
    finally:
        stop(proc)


def test_a_long_tool_is_judged_by_tool_stall_after(real_claude, offline_env, model_server):
    server = model_server([{"match": "UNGTOOL", "turns": [
        # Not `sleep 60`: 2.1.330 refuses a bare long sleep without running it.
        {"tool_use": {"name": "Bash",
                      "input": {"command": "python3 -c 'import time; time.sleep(60)'", "description": "wait"}}},
        {"text": "slept"}]}])
    env = offline_env.use(server)
    proc = start_cli(real_claude, env, offline_env.cwd, "UNGTOOL go", "--allowedTools", "Bash(python3 *)")
    try:
        row = wait_row(env, proc.pid, lambda r: r["evidence"]["tool_in_flight"] == "Bash" and r["last_activity_s"] >= 3,
                       "--stall-after", "2")
        assert row["evidence"]["tool_in_flight"] == "Bash", row
        assert row["evidence"]["threshold_s"] == 1800 and row["suspect_hung"] is False
    finally:
        stop(proc)
