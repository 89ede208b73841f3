"""`claudeguardctl demo`, the README's main job: offline, real CLI, a background subagent's Bash
call waiting in the channel and approved."""

from __future__ import annotations

import json

from tests.shim_helpers import CTL, guarded_env


def test_demo_runs_the_whole_flow_offline(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    env.pop("ANTHROPIC_BASE_URL", None)
    env.pop("ANTHROPIC_API_KEY", None)
    proc = run_claude(CTL + ["demo", "--auto-after", "0.5"], env, offline_env.cwd, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "A background subagent is waiting for approval in the channel" in proc.stdout
    assert "agent    general-purpose" in proc.stdout
    assert "the subagent's command ran: demo-report.txt" in proc.stdout
    audit = run_claude(CTL + ["audit", "--json"], env, offline_env.cwd, timeout=30)
    events = [json.loads(line) for line in audit.stdout.splitlines()]
    assert any(e["decided_by"] == "human" and e["agent_type"] == "general-purpose" and e["decision"] == "allow"
               for e in events)
    assert json.loads(run_claude(CTL + ["pending", "--json"], env, offline_env.cwd, timeout=30).stdout) == []


def test_demo_deny_leaves_no_report(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    proc = run_claude(CTL + ["demo", "--auto-after", "0.2", "--deny"], env, offline_env.cwd, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "did not run (demo-report.txt was not written)" in proc.stdout
