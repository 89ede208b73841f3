"""The watchdog on the real CLI: a stream that stops mid-answer is found within threshold + 2
samples and killed (exit 124, no process of the tree left); a long sleep in a tool, a CPU-busy
tool and a request waiting in the channel are not stalls."""

from __future__ import annotations

import json
import subprocess
import time

import psutil
import pytest

from tests.shim_helpers import GUARD, ctl, guarded_env, write_user_config

STALL = 3.0
INTERVAL = 0.5


def start(env: dict, cwd, prompt: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(GUARD + ["-p", prompt, "--output-format", "stream-json", "--verbose", *extra],
                            env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def tree(pid: int) -> list[int]:
    try:
        return [pid] + [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            for pid in reversed(tree(proc.pid)):
                try:
                    psutil.Process(pid).kill()
                except psutil.NoSuchProcess:
                    pass
            proc.wait()
    return proc.returncode, out, err


def test_stream_silent_mid_answer_is_killed_with_124(real_claude, offline_env, model_server):
    server = model_server([{"match": "MIDSTALL", "turns": [{"stall_after_text": "Let me think about th"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, f"[watchdog]\nsample_interval = {INTERVAL}\nkill_grace = 2\n")
    proc = start(env, offline_env.cwd, "MIDSTALL go", "--guard-stall-after", str(STALL), "--guard-on-stall", "kill")
    server.wait_for(lambda: any(r.get("script") == "MIDSTALL" for r in server.requests()), timeout=60)
    stalled_at = time.monotonic()  # the stream went silent no later than now
    family = tree(proc.pid)
    code, _, err = finish(proc, timeout=STALL + 60)
    took = time.monotonic() - stalled_at
    assert code == 124, err
    assert "stalled" in err and err.count("claudeguard: ") >= 1
    # reported and killed, not left hanging (the stream stays silent for good); how soon after
    # the threshold is the bench's figure (bench/watchdog_cost.py --only detect), not a test's
    assert took < STALL + 60, took
    assert not alive(family + tree(proc.pid)), "a process of the tree outlived the kill"
    audit = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    assert any(e.get("event") == "stall" and e.get("action") == "kill" for e in audit)


# A tool that runs three times stall_after is not a stall: asleep (its own wait), or busy on
# the CPU even past tool_stall_after.
QUIET_TOOLS = {
    "sleeping": (f"sleep {int(3 * STALL)}", "Bash(sleep *)", ""),
    "cpu-busy": (f"python3 -c \"import time; t=time.time()\nwhile time.time()-t < {3 * STALL}: pass\"",
                 "Bash(python3 -c *)",
                 f"tool_stall_after = {STALL}\n"),
}


@pytest.mark.parametrize("tool", sorted(QUIET_TOOLS))
def test_a_long_tool_is_not_a_stall(real_claude, offline_env, model_server, tool):
    command, rule, extra = QUIET_TOOLS[tool]
    server = model_server([{"match": "QUIETTOOL", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": command, "description": "wait"}}},
        {"text": "done waiting"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, f'[permissions]\nallow = ["{rule}"]\n[watchdog]\nsample_interval = {INTERVAL}\n{extra}')
    proc = start(env, offline_env.cwd, "QUIETTOOL go", "--guard-stall-after", str(STALL), "--guard-on-stall", "kill")
    code, out, err = finish(proc, timeout=60)
    assert code == 0, err
    assert "stalled" not in err
    assert [json.loads(line) for line in out.splitlines() if '"type":"result"' in line][-1]["result"] == "done waiting"


def test_request_waiting_in_the_channel_is_not_a_stall(real_claude, offline_env, model_server):
    server = model_server([{"match": "WAITING", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "python3 -c \"print(1)\"", "description": "ask"}}},
        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT=str(4 * STALL))
    write_user_config(env, f"[watchdog]\nsample_interval = {INTERVAL}\n")
    proc = start(env, offline_env.cwd, "WAITING go", "--guard-stall-after", str(STALL), "--guard-on-stall", "kill")
    code, _, err = finish(proc, timeout=60)
    assert code == 0, err
    assert "stalled" not in err
    (result,) = server.tool_results()
    assert "no answer within" in result["content"]  # it waited the whole approval deadline
