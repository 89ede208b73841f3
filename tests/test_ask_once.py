"""Ask once: an ``ask`` rule makes exactly one request per tool call, whatever mix of PreToolUse
hook, permission-prompt tool and PermissionRequest the CLI uses (issue 10), on both CLIs: in -p,
2.1.330 asks through the PermissionRequest hook, 2.1.197 through the prompt tool."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest

from tests.shim_helpers import (
    GUARD, Approver, ctl, guarded_env, pending, print_asker_of, run_guarded, write_user_config,
)


def echo(word: str) -> dict:
    return {"name": "Bash", "input": {"command": f"echo {word} > {word}.txt", "description": f"echo {word}"}}


def agent(prompt: str, background: bool) -> dict:
    return {"name": "Agent",
            "input": {"description": "helper", "prompt": prompt, "subagent_type": "general-purpose",
                      "run_in_background": background}}


def _audit(env: dict) -> list[dict]:
    return [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]


@pytest.mark.newest_cli
def test_an_ask_rule_asks_once_per_call_main_fg_and_bg(real_claude, offline_env, model_server):
    server = model_server([
        {"match": "ASKONCE", "turns": [{"tool_use": echo("main")}, {"tool_use": agent("FGONE go", False)},
                                       {"tool_use": agent("BGONE go", True)}, {"text": "fin"}]},
        {"match": "FGONE", "turns": [{"tool_use": echo("fg")}, {"text": "fg done"}]},
        {"match": "BGONE", "turns": [{"tool_use": echo("bg")}, {"text": "bg done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="20")
    write_user_config(env, '[permissions]\nask = ["Bash(echo *)"]\n')
    # Four approvals offered; only three calls exist, so a fourth request would be answered too and
    # show up in approver.seen.
    approver = Approver(env, [("approve", [])] * 4)
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "ASKONCE go")
    approver.finish()
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    assert len(approver.seen) == 3, [(r["agent_type"], r["summary"], r.get("via")) for r in approver.seen]
    assert sorted(r["input"]["command"].split()[1] for r in approver.seen) == ["bg", "fg", "main"]
    for word in ("main", "fg", "bg"):
        assert (offline_env.cwd / f"{word}.txt").read_text() == f"{word}\n"
    humans = [e for e in _audit(env) if e.get("decided_by") == "human"]
    assert len(humans) == 3, humans
    assert pending(env) == []


@pytest.mark.newest_cli
def test_a_callers_own_ask_rule_asks_once_main_and_fg(real_claude, cli_version, offline_env, model_server):
    # The caller's ask rule is the CLI's own: after the guard's hook it asks again, through the
    # -p asker (2.1.330: the PermissionRequest hook, whose event carries the subagent's agent_id
    # but no tool_use_id; 2.1.197: the prompt tool). The main agent's call is asked there; the
    # subagent's was asked by its PreToolUse hook and that answer is reused, not posted again.
    server = model_server([
        {"match": "CALLERASK", "turns": [{"tool_use": echo("main")}, {"tool_use": agent("CFGONE go", False)},
                                         {"text": "fin"}]},
        {"match": "CFGONE", "turns": [{"tool_use": echo("fg")}, {"text": "fg done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="20")
    approver = Approver(env, [("approve", [])] * 3)  # a third would take a second request
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "CALLERASK go", "--settings",
                       json.dumps({"permissions": {"ask": ["Bash(echo *)"]}}))
    approver.finish()
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    assert [(r["agent_type"], r["input"]["command"].split()[1]) for r in approver.seen] == [
        (None, "main"), ("general-purpose", "fg")]
    for word in ("main", "fg"):
        assert (offline_env.cwd / f"{word}.txt").read_text() == f"{word}\n"
    asker = print_asker_of(cli_version)
    humans = [(e["via"], e["agent_type"]) for e in _audit(env) if e.get("decided_by") == "human"]
    assert humans == [(asker, None), ("hook", "general-purpose")]
    assert pending(env) == []


class RacingApprover(threading.Thread):
    """Approves every pending request it sees, as fast as it can, until told to stop; records
    each answer it sent with its exit code (two of these race for the same requests)."""

    def __init__(self, env: dict) -> None:
        super().__init__(daemon=True)
        self.env = env
        self.answers: list[tuple[str, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for req in pending(self.env):
                self.answers.append((req["id"], ctl(self.env, "approve", req["id"]).returncode))
            self.stop.wait(0.05)


def test_torture_sessions_and_two_approvers_never_post_or_answer_twice(real_claude, offline_env, model_server):
    sessions = 3
    scenario = []
    for n in range(sessions):
        scenario += [
            {"match": f"TORTURE{n}X", "turns": [{"tool_use": echo(f"m{n}")}, {"tool_use": agent(f"TFG{n}X go", False)},
                                                {"tool_use": agent(f"TBG{n}X go", True)}, {"text": "fin"}]},
            {"match": f"TFG{n}X", "turns": [{"tool_use": echo(f"f{n}")}, {"text": "fg done"}]},
            {"match": f"TBG{n}X", "turns": [{"tool_use": echo(f"b{n}")}, {"text": "bg done"}]},
        ]
    server = model_server(scenario)
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    write_user_config(env, '[permissions]\nask = ["Bash(echo *)"]\n')
    approvers = [RacingApprover(env), RacingApprover(env)]
    for approver in approvers:
        approver.start()
    procs = [subprocess.Popen(GUARD + ["-p", f"TORTURE{n}X go", "--output-format", "stream-json", "--verbose"], env=env,
                              cwd=offline_env.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for n in range(sessions)]
    try:
        codes = [proc.wait(timeout=120) for proc in procs]
    finally:
        for approver in approvers:
            approver.stop.set()
            approver.join(timeout=60)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert codes == [0] * sessions, [p.stderr.read() for p in procs]
    calls = 3 * sessions
    for n in range(sessions):
        for word in (f"m{n}", f"f{n}", f"b{n}"):
            assert (offline_env.cwd / f"{word}.txt").read_text() == f"{word}\n"
    sent = [a for approver in approvers for a in approver.answers]
    accepted = [rid for rid, code in sent if code == 0]
    assert len(accepted) == calls and len(set(accepted)) == calls, sent  # one accepted answer per request
    assert all(code in (0, 1) for _, code in sent)
    humans = [e for e in _audit(env) if e.get("decided_by") == "human"]
    assert len(humans) == calls, humans  # one decision per call
    assert sorted(e["request_id"] for e in humans) == sorted(accepted)  # one request per call
    assert pending(env) == []
