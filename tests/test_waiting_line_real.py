"""A run that waits says so (issue 36): a headless `claude -p` whose call waits for a human prints
one stderr line per request (what waits, which agent, `claudeguardctl approve <id>`, the desk's
port when the service serves a desk), never on stdout (stream-json stays clean), and nothing for
a call a rule decided; on both pinned CLIs, text and stream-json, through the service and
without it."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import IO

import pytest

from claudeguard.testing.services import stop_services
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, wait_pending, wait_until, write_user_config

CONFIG = """
[permissions]
allow = ["Bash(echo ruled *)"]
ask = ["Bash(echo asked *)"]
"""


def _bash(command: str) -> dict:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": "run it"}}}


class Lines(threading.Thread):
    """Reads a pipe line by line as it comes (the test waits on what stderr said so far)."""

    def __init__(self, pipe: IO[str]) -> None:
        super().__init__(daemon=True)
        self.pipe, self.lines = pipe, []
        self.start()

    def run(self) -> None:
        for line in self.pipe:
            self.lines.append(line)


# The service-less path (the launcher's own monitor) is the same code for both formats.
@pytest.mark.parametrize(("service", "output_format"), [("on", "text"), ("on", "stream-json"), ("off", "stream-json")])
def test_a_waiting_call_is_said_once_on_stderr(real_claude, offline_env, model_server, tmp_path, output_format,
                                               service):
    server = model_server([{"match": "WAITLINE", "turns": [
        _bash("echo ruled one"), _bash("echo asked two > two.txt"), _bash("echo asked three > three.txt"),
        {"text": "all done"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="120")
    if service == "off":
        env["CLAUDEGUARD_SERVICE"] = "0"
    write_user_config(env, CONFIG)
    extra = ["--output-format", output_format] + (["--verbose"] if output_format == "stream-json" else [])
    proc = subprocess.Popen(GUARD + ["-p", "WAITLINE go", *extra], env=env, cwd=offline_env.cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = Lines(proc.stderr)
    out = Lines(proc.stdout)
    try:
        for n, command in enumerate(("echo asked two > two.txt", "echo asked three > three.txt"), 1):
            req = wait_pending(env, lambda r, c=command: r["input"].get("command") == c, timeout=90)
            said = wait_until(lambda r=req: [line for line in err.lines if r["id"] in line], 60,
                              f"the waiting line of {req['id']}", interval=0.1)
            assert said == [
                f"claudeguard: waiting for approval (main agent, up to {_deadline(said[0])} s): Bash: {command}; "
                f"answer: claudeguardctl approve {req['id']} (or deny {req['id']})\n"]
            assert 100 <= _deadline(said[0]) <= 120
            assert ctl(env, "approve", req["id"]).returncode == 0
            assert len([line for line in err.lines if line.startswith("claudeguard: waiting")]) == n
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        stop_services(tmp_path)
    err.join(30)
    out.join(30)
    waiting = [line for line in err.lines if "waiting for approval" in line]
    assert len(waiting) == 2, err.lines  # one per asked call; none for the call the allow rule decided
    assert not any("claudeguard: waiting" in line for line in out.lines)  # stdout is the CLI's alone
    if output_format == "stream-json":
        assert all(json.loads(line) for line in out.lines if line.strip())
    assert (offline_env.cwd / "two.txt").exists() and (offline_env.cwd / "three.txt").exists()
    assert pending(env) == []


def _deadline(line: str) -> int:
    return int(line.split("up to ", 1)[1].split(" s)", 1)[0])


def test_a_subagent_s_wait_names_it_and_the_desk(real_claude, offline_env, model_server, tmp_path):
    """A foreground subagent's call: the line names the subagent; with the service's desk
    running, the line names the desk's port (never its page's secret path)."""
    server = model_server([
        {"match": "SUBWAIT", "turns": [{"tool_use": {"name": "Agent", "input": {
            "description": "do it", "prompt": "SUBAGENT-WAIT: run the command", "subagent_type": "general-purpose"}}},
            {"text": "done"}]},
        {"match": "SUBAGENT-WAIT", "turns": [_bash("echo asked sub > sub.txt"), {"text": "sub done"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="120")
    write_user_config(env, CONFIG)
    desk = ctl(env, "desk")  # starts the service and its desk
    assert desk.returncode == 0, desk.stderr
    port = int(desk.stdout.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
    proc = subprocess.Popen(GUARD + ["-p", "SUBWAIT go"], env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = Lines(proc.stderr)
    try:
        req = wait_pending(env, lambda r: r["input"].get("command") == "echo asked sub > sub.txt", timeout=90)
        said = wait_until(lambda: [line for line in err.lines if req["id"] in line], 60, "the waiting line",
                          interval=0.1)
        agent = "subagent general-purpose" + (f" {req['agent_id'][:8]}" if req["agent_id"] else "")
        assert len(said) == 1 and said[0].startswith(f"claudeguard: waiting for approval ({agent}, up to ")
        assert said[0].endswith(
            f"s): Bash: echo asked sub > sub.txt; answer: claudeguardctl approve {req['id']} (or deny {req['id']}); "
            f"or on the approval desk (127.0.0.1:{port}; claudeguardctl desk --open)\n")
        assert ctl(env, "deny", req["id"]).returncode == 0
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        stop_services(tmp_path)
    err.join(30)
    assert len([line for line in err.lines if "waiting for approval" in line]) == 1, err.lines
