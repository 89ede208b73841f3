"""Ask once: an ``ask`` rule makes exactly one request per tool call, whatever mix of PreToolUse
hook, permission-prompt tool and PermissionRequest the CLI uses (issue 10), on both CLIs."""

from __future__ import annotations

import json

from tests.shim_helpers import Approver, ctl, guarded_env, pending, run_guarded, write_user_config


def echo(word: str) -> dict:
    return {"name": "Bash", "input": {"command": f"echo {word} > {word}.txt", "description": f"echo {word}"}}


def agent(prompt: str, background: bool) -> dict:
    return {"name": "Agent", "input": {"description": "helper", "prompt": prompt, "subagent_type": "general-purpose", "run_in_background": background}}


def _audit(env: dict) -> list[dict]:
    return [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]


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
    approver = Approver(env, [("approve", [])] * 4, timeout=25)
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "ASKONCE go")
    approver.join(timeout=40)
    assert proc.returncode == 0, proc.stderr
    assert len(approver.seen) == 3, [(r["agent_type"], r["summary"], r.get("via")) for r in approver.seen]
    assert sorted(r["input"]["command"].split()[1] for r in approver.seen) == ["bg", "fg", "main"]
    for word in ("main", "fg", "bg"):
        assert (offline_env.cwd / f"{word}.txt").read_text() == f"{word}\n"
    humans = [e for e in _audit(env) if e.get("decided_by") == "human"]
    assert len(humans) == 3, humans
    assert pending(env) == []
