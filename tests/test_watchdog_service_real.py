"""The watchdog of a foreground session runs in the resident service (issue 11), on the real CLIs:
a hung session is found and killed by the service (exit 124, one report), a long legitimate tool
is not a stall, and when the service dies the launcher's own monitor takes over: the stall is
still reported exactly once, and one already reported is not reported again."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.shim_helpers import ctl, guarded_env, wait_until, write_user_config
from tests.test_watchdog_real import INTERVAL, STALL, alive, finish, start, tree


def runtime(env: dict) -> Path:
    return Path(env["CLAUDEGUARD_RUNTIME_DIR"])


def status(env: dict) -> dict | None:
    """The status file of the one guarded session running."""
    for path in (runtime(env) / "sessions").glob("*/status.json"):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None
    return None


def service_pid(env: dict) -> int | None:
    try:
        return json.loads((runtime(env) / "service" / "service.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def service_reports(env: dict) -> list[str]:
    """The service log's lines for the stalls it found."""
    try:
        text = (runtime(env) / "service" / "service.log").read_text()
    except OSError:
        return []
    return [line for line in text.splitlines() if "by the service]" in line]


def stall_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("claudeguard: ") and "stalled" in line]


def stall_rows(env: dict) -> list[dict]:
    rows = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    return [r for r in rows if r.get("event") == "stall"]


def stalling_session(offline_env, model_server, real_claude, on_stall: str):  # type: ignore[no-untyped-def]
    server = model_server([{"match": "HANG", "turns": [{"stall_after_text": "Let me think about th"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, f"[watchdog]\nsample_interval = {INTERVAL}\nkill_grace = 2\n")
    proc = start(env, offline_env.cwd, "HANG go", "--guard-stall-after", str(STALL), "--guard-on-stall", on_stall)
    return server, env, proc


def hold_start_lock(env: dict) -> int:
    """Keep any launcher from starting a service (client.connect waits on this lock)."""
    fd = os.open(runtime(env) / "service" / "start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_hung_session_is_found_and_killed_by_the_service(real_claude, offline_env, model_server):
    server, env, proc = stalling_session(offline_env, model_server, real_claude, "kill")
    try:
        watched = wait_until(lambda: (st := status(env)) and st.get("watcher") == "service" and st, 60,
                             "the service to watch")
        assert watched["pid"] == proc.pid and watched["watcher_pid"] == service_pid(env) != proc.pid
        server.wait_for(lambda: any(r.get("script") == "HANG" for r in server.requests()), timeout=60)
        family = tree(proc.pid)
    finally:
        code, _, err = finish(proc, timeout=STALL + 2 * INTERVAL + 30)
    assert code == 124, err
    assert len(stall_lines(err)) == 1, err
    assert "(stopping it)" in stall_lines(err)[0]
    assert not alive(family), "a process of the tree outlived the kill"
    (row,) = stall_rows(env)
    assert row["action"] == "kill" and row["decided_by"] == "watchdog"
    (logged,) = service_reports(env)
    assert "[kill, by the service]" in logged


def test_long_tool_within_tool_stall_after_is_not_reported_by_the_service(real_claude, offline_env, model_server):
    server = model_server([{"match": "SLEEPER", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": f"sleep {int(3 * STALL)}", "description": "wait"}}},
        {"text": "slept"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, f'[permissions]\nallow = ["Bash(sleep *)"]\n[watchdog]\nsample_interval = {INTERVAL}\n')
    proc = start(env, offline_env.cwd, "SLEEPER go", "--guard-stall-after", str(STALL), "--guard-on-stall", "kill")
    try:
        # The sleep is in flight and the service watches it as a tool.
        wait_until(lambda: (st := status(env)) and st.get("watcher") == "service"
                   and st.get("base_state") == "tool", 60,
                   "the service to see the tool")
    finally:
        code, out, err = finish(proc, timeout=60)
    assert code == 0, err
    assert stall_lines(err) == [] and stall_rows(env) == [] and service_reports(env) == []
    assert [json.loads(line) for line in out.splitlines() if '"type":"result"' in line][-1]["result"] == "slept"


@pytest.mark.one_cli
def test_service_killed_mid_session_the_launcher_reports_the_stall_once(real_claude, offline_env, model_server):
    server, env, proc = stalling_session(offline_env, model_server, real_claude, "kill")
    lock = None
    try:
        wait_until(lambda: (st := status(env)) and st.get("watcher") == "service", 60, "the service to watch")
        lock = hold_start_lock(env)  # no new service: the launcher's own monitor must do it
        old = service_pid(env)
        os.kill(old, signal.SIGKILL)
        server.wait_for(lambda: any(r.get("script") == "HANG" for r in server.requests()), timeout=60)
        wait_until(lambda: (st := status(env)) and st.get("watcher") == "launcher", 60, "the launcher's monitor")
    finally:
        code, _, err = finish(proc, timeout=STALL + 2 * INTERVAL + 30)
        if lock is not None:
            os.close(lock)
    assert code == 124, err
    assert len(stall_lines(err)) == 1, err
    (row,) = stall_rows(env)
    assert row["action"] == "kill"
    assert service_reports(env) == []


def test_each_stall_is_reported_once_across_the_service_s_death(real_claude, offline_env, model_server):
    """The service reports the stall; killed, its session goes to the launcher's monitor, which
    carries the episode on (tests/test_watchdog_activity.py proves that it is not news). The CLI
    itself does io when its service connection drops (its MCP client), which ends the episode:
    a later stall is a new one. Each episode: one stderr line, one audit row, whoever found it."""
    server, env, proc = stalling_session(offline_env, model_server, real_claude, "warn")
    lock = None
    try:
        wait_until(lambda: len(stall_rows(env)) == 1, STALL + 30, "the service's report")
        assert len(service_reports(env)) == 1
        lock = hold_start_lock(env)
        os.kill(service_pid(env), signal.SIGKILL)
        wait_until(lambda: (st := status(env)) and st.get("watcher") == "launcher", 60, "the launcher's monitor")
        since = time.time()
        wait_until(lambda: (s := status(env)) and s.get("updated", 0) >= since + 2 * STALL, 60, "two stall periods")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code, _, err = finish(proc, timeout=30)
        if lock is not None:
            os.close(lock)
    rows = stall_rows(env)
    assert len(rows) >= 1 and len(stall_lines(err)) == len(rows), err  # one line and one row per episode
    assert [r["summary"] for r in rows] == [line[len("claudeguard: "):] for line in stall_lines(err)]
    assert len(service_reports(env)) == 1
