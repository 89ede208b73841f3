"""claudeguard as the IDE's and CI actions' process wrapper (issue 35).

VS Code's ``claudeCode.claudeProcessWrapper`` starts ``<wrapper> <absolute path of the bundled
claude> <args...>``, and its chat panel answers the CLI's permission prompts itself over stdio
(``--permission-prompt-tool stdio``), as the Agent SDKs' ``can_use_tool`` does. A first argument
that is a Claude Code CLI is the real CLI of that run (plan/discovery.take_cli); the host's
prompt is the keyboard: an ask rule and a call no rule decides go to it first, then after
``idle_before_channel`` to the channel (shim/host_prompt.py).

The acceptance test drives that argv shape through the official Python Agent SDK
(``claude-agent-sdk``, tests/data/sdk_host.py) with a one-line wrapper script, no
CLAUDEGUARD_CLAUDE and no CLI on PATH, on both pinned CLIs."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from claudeguard.testing.wait import wait_until
from tests.shim_helpers import CTL, GUARD, pending, write_user_config

HOST = Path(__file__).resolve().parent / "data" / "sdk_host.py"
BIN = Path(sys.executable).parent
PLAIN_PATH = "/usr/bin:/bin"


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _ide_env(offline_env, server) -> dict:
    """The offline env as an IDE would hand it over: no CLAUDEGUARD_CLAUDE, no CLI on PATH."""
    env = dict(offline_env.use(server))
    env.pop("CLAUDEGUARD_CLAUDE", None)
    env["PATH"] = PLAIN_PATH
    assert not any(os.access(os.path.join(d, "claude"), os.X_OK) for d in PLAIN_PATH.split(":"))
    return env


# --- the first argument ------------------------------------------------------------------------


def test_the_clis_path_as_first_argument_is_the_real_cli_ahead_of_everything(real_claude, cli_version, offline_env,
                                                                              tmp_path):
    env = _ide_env(offline_env, "http://127.0.0.1:9")
    # CLAUDEGUARD_CLAUDE and claude.path name a program that is not the CLI: the argument wins
    stand_in = _exe(tmp_path / "other-claude", "#!/bin/sh\necho other\n")
    env["CLAUDEGUARD_CLAUDE"] = str(stand_in)
    write_user_config(env, f'[claude]\npath = "{stand_in}"\n')
    real = str(real_claude)
    version = subprocess.run([real, "--version"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    through = subprocess.run(GUARD + [real, "--version"], env=env, cwd=offline_env.cwd, capture_output=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    assert (through.returncode, through.stdout, through.stderr) == (0, version.stdout, b"")
    assert through.stdout.decode().startswith(cli_version)
    plan = subprocess.run(GUARD + ["--guard-dry-run", real, "-p", "hello"], env=env, cwd=offline_env.cwd,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert plan.returncode == 0, plan.stderr
    argv = json.loads(plan.stdout)["argv"]
    assert argv[0] == real and "hello" in argv and real not in argv[1:]


def test_a_path_to_anything_else_is_a_prompt_as_before(offline_env, tmp_path):
    env = _ide_env(offline_env, "http://127.0.0.1:9")
    cli = _exe(tmp_path / "claude", "#!/bin/sh\necho real\n")  # a stand-in CLI, named as CLAUDEGUARD_CLAUDE
    env["CLAUDEGUARD_CLAUDE"] = str(cli)
    ran = tmp_path / "ran"
    (tmp_path / "bin").mkdir()
    named_claude = _exe(tmp_path / "bin" / "claude", f"#!/bin/sh\ntouch {ran}\necho '2.1.330 (Claude Code)'\n")
    for first in ("/bin/ls", str(named_claude), "/no/such/file", "/dev/stdin"):
        plan = subprocess.run(GUARD + ["--guard-dry-run", first, "-p"], env=env, cwd=offline_env.cwd,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert plan.returncode == 0, plan.stderr
        argv = json.loads(plan.stdout)["argv"]
        assert argv[0] == str(cli) and first in argv[1:]  # the CLI of CLAUDEGUARD_CLAUDE; the path its prompt
    assert not ran.exists()  # a program named claude that is no Claude Code CLI was never run to find out


# --- the acceptance test: the Agent SDK through a one-line wrapper ---------------------------------------

CONFIG = """\
[permissions]
deny = ["Bash(touch denied-*)"]
ask = ["Bash(touch asked-*)"]

[approval]
idle_before_channel = 2
timeout = 600
"""

STEPS = [
    {"command": "touch denied-1"},                # a deny rule: the host is never asked
    {"command": "touch free-1"},                  # no rule: the host's prompt allows it
    {"command": "touch asked-1"},                 # an ask rule, left unanswered at the host: the channel
    {"command": "touch free-2"},                  # the host allows it as `touch denied-2`: the deny rule holds
]
PLAN = {"touch free-1": "allow", "touch asked-1": "wait",
        "touch free-2": {"allow_as": {"command": "touch denied-2", "description": "d"}}}


def _exe_of(proc: psutil.Process) -> str | None:
    try:
        return proc.exe()
    except psutil.Error:
        return None


def _rows(env: dict) -> list[dict]:
    log = Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_the_agent_sdk_through_a_wrapper_script_guards_the_ides_session(real_claude, offline_env, model_server,
                                                                        tmp_path, procs):
    server = model_server([{"match": "IDE-RUN", "turns": [
        *({"tool_use": {"name": "Bash", "input": {**step, "description": "d"}}} for step in STEPS),
        {"text": "fin"}]}])
    env = _ide_env(offline_env, server)
    write_user_config(env, CONFIG)
    # What the user puts in VS Code's claudeCode.claudeProcessWrapper: one line.
    wrapper = _exe(tmp_path / "claudeguard-wrapper", f"#!/bin/sh\nexec {BIN / 'claudeguard'} \"$@\"\n")
    # What the extension runs: the wrapper, the absolute path of its bundled CLI, then its args.
    ide = _exe(tmp_path / "ide-launch", f"#!/bin/sh\nexec {wrapper} {real_claude} \"$@\"\n")
    plan_file, out = tmp_path / "plan.json", tmp_path / "out.json"
    plan_file.write_text(json.dumps(PLAN))
    host = subprocess.Popen([sys.executable, str(HOST), str(ide), "IDE-RUN: four commands", str(plan_file), str(out)],
                            env=env, cwd=offline_env.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(host)
    # The ask rule's call, unanswered at the host, reaches the channel after its head start.
    waiting = wait_until(lambda: [r for r in pending(env) if r["input"].get("command") == "touch asked-1"], 120,
                         "the ask rule's call to reach the channel")
    assert len(waiting) == 1 and waiting[0]["tool"] == "Bash"
    # Nothing the agent runs can answer the CLI's prompt for the host: its stdin is a socket, which
    # no process can reopen through /proc for writing (a pipe there could be).
    cli = [p for p in psutil.Process(host.pid).children(recursive=True) if _exe_of(p) == os.path.realpath(real_claude)]
    assert len(cli) == 1
    with pytest.raises(OSError) as refused:
        os.open(f"/proc/{cli[0].pid}/fd/0", os.O_WRONLY)
    assert refused.value.errno == errno.ENXIO
    approve = subprocess.run(CTL + ["approve", waiting[0]["id"]], env=env, capture_output=True, text=True, timeout=60)
    assert approve.returncode == 0, approve.stderr
    stdout, stderr = host.communicate(timeout=180)
    assert host.returncode == 0, stderr
    result = json.loads(out.read_text())
    work = offline_env.cwd
    assert sorted(p.name for p in work.iterdir() if p.name.startswith(("denied-", "free-", "asked-"))) == [
        "asked-1", "free-1"]
    # The host was asked about exactly the three calls no deny rule stopped; the channel's answer
    # ended its prompt of the ask rule's call.
    assert [(a["input"]["command"], a["answer"]) for a in result["asked"]] == [
        ("touch free-1", "allow"), ("touch asked-1", "cancelled"), ("touch free-2", "allow_as")]
    assert result["result"]["subtype"] == "success"
    rows = [r for r in _rows(env) if r.get("tool") == "Bash"]
    by = {r["summary"]: r for r in rows if "decision" in r}
    assert len([r for r in rows if "decision" in r]) == 4, rows
    denied = by["Bash: touch denied-1"]
    assert (denied["decision"], denied["decided_by"], denied["via"]) == ("deny", "rule", "hook")
    free = by["Bash: touch free-1"]
    assert (free["decision"], free["decided_by"], free["via"], free["answered_by"]["command"]) == (
        "allow", "keyboard", "ide", "ide")
    asked = by["Bash: touch asked-1"]
    assert (asked["decision"], asked["decided_by"], asked["via"], asked["request_id"]) == (
        "allow", "human", "ide", waiting[0]["id"])
    assert asked["ask_rule"] == "Bash(touch asked-*)" and asked["answered_by"]["pid"] != host.pid
    held = by["Bash: touch denied-2"]
    assert (held["decision"], held["decided_by"], held["via"], held["rule"], held["host_answer"]) == (
        "deny", "rule", "ide", "Bash(touch denied-*)", "allow")
    assert pending(env) == []


# --- the relay's own rules ---------------------------------------------------------------------------


def test_the_host_gets_whole_lines_and_a_cancel_never_lands_inside_one(tmp_path):
    import socket

    from claudeguard.shim.host_prompt import HostPrompts

    read_end, write_end = os.pipe()
    ours, theirs = socket.socketpair()
    relay = HostPrompts(str(tmp_path), ours, out_fd=write_end, in_fd=-1)
    try:
        assert relay.out(b'{"type":"assistant"}\n{"type":"us')
        assert os.read(read_end, 4096) == b'{"type":"assistant"}\n'
        relay._cancel_at_host("r1")  # while half a line of the CLI's is held: after it
        assert relay.out(b'er"}\n')
        assert os.read(read_end, 4096) == (b'{"type":"user"}\n'
                                           b'{"type": "control_cancel_request", "request_id": "r1"}\n')
        assert relay.out(b'{"tail":1}') and relay.flush()
        assert os.read(read_end, 4096) == b'{"tail":1}'
    finally:
        for fd in (read_end, write_end):
            os.close(fd)
        ours.close()
        theirs.close()
