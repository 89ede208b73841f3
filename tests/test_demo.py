"""`claudeguardctl demo`, the README's main job: offline, real CLI, a background subagent's Bash
call waiting in the channel and approved; answered from another shell, it stops counting and
says who answered (issue 36); its decisions stay in a log of its own, out of the user's audit
log and `audit --suggest`, and its guard service goes with it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from claudeguard.testing.services import live_services
from tests.shim_helpers import CTL, ctl, guarded_env, wait_pending


def _demo_log(env: dict) -> list[dict]:
    path = Path(env["XDG_STATE_HOME"]) / "claudeguard" / "demo" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _nothing_left(env: dict) -> None:
    """The user's log and suggestions hold nothing of the demo, nothing waits, and no service or
    service slot of the demo's home is left in the user's runtime dir."""
    assert ctl(env, "audit", "--json").stdout == ""
    suggest = ctl(env, "audit", "--suggest", "--json")
    found = json.loads(suggest.stdout)
    assert suggest.returncode == 0 and (found["calls"], found["allow"], found["deny"]) == (0, [], []), suggest.stdout
    assert json.loads(ctl(env, "pending", "--json").stdout) == []
    runtime = Path(env["CLAUDEGUARD_RUNTIME_DIR"])
    assert live_services(runtime) == []
    assert [p.name for p in runtime.iterdir() if p.name.startswith("service-")] == []


def test_demo_runs_the_whole_flow_offline(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    env.pop("ANTHROPIC_BASE_URL", None)
    env.pop("ANTHROPIC_API_KEY", None)
    proc = run_claude(CTL + ["demo", "--auto-after", "0.5"], env, offline_env.cwd, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "A background subagent is waiting for approval in the channel" in proc.stdout
    assert "agent    general-purpose" in proc.stdout
    assert "the subagent's command ran: demo-report.txt" in proc.stdout
    log = Path(env["XDG_STATE_HOME"]) / "claudeguard" / "demo" / "audit.jsonl"
    assert f"    audit log: {log}, the demo's own (" in proc.stdout
    events = _demo_log(env)
    assert [(e["decided_by"], e["decision"]) for e in events
            if e.get("agent_type") == "general-purpose" and e.get("tool") == "Bash"] == [("human", "allow")]
    _nothing_left(env)


def test_demo_deny_leaves_no_report(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    proc = run_claude(CTL + ["demo", "--auto-after", "0.2", "--deny"], env, offline_env.cwd, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "did not run (demo-report.txt was not written)" in proc.stdout
    _nothing_left(env)


def test_demo_answered_from_another_shell_stops_counting_and_says_who(real_claude, offline_env):
    env = guarded_env(offline_env, real_claude)
    demo = subprocess.Popen(CTL + ["demo", "--auto-after", "600"], env=env, cwd=offline_env.cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        req = wait_pending(env, lambda r: r["tool"] == "Bash", timeout=120)
        answered = ctl(env, "deny", req["id"], "--message", "not today")
        assert answered.returncode == 0, answered.stderr
        out, err = demo.communicate(timeout=120)  # well before its 600 s countdown
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(30)
    assert demo.returncode == 0, out + err
    said = [line for line in out.splitlines() if line.startswith("    answered")]
    assert len(said) == 1 and said[0].startswith("    answered elsewhere: denied from pid "), said
    assert said[0].endswith(f" (no tty): {' '.join(CTL)} deny {req['id']} --message not today"), said
    assert "no such pending request" not in out + err
    assert "did not run (demo-report.txt was not written)" in out
    rows = [e for e in _demo_log(env) if e.get("request_id") == req["id"] and e.get("decision")]
    assert [(r["decision"], r["decided_by"]) for r in rows] == [("deny", "human")]
    _nothing_left(env)


def test_a_request_answered_before_the_demo_saw_it_wait_is_found_in_its_audit_log(monkeypatch):
    """A script that answers the instant the request appears can take it out of the channel
    between two of the demo's looks: the demo then finds the decision row, not "never reached"."""
    from claudeguard.commands import demo

    class Running:
        def poll(self) -> None:
            return None

    row = {"tool": "Bash", "request_id": "r1", "session_id": "s1", "decision": "deny",
           "summary": "Bash: echo 'written by a background subagent' > demo-report.txt"}
    monkeypatch.setattr(demo.audit, "read_events", lambda: [{"tool": "Bash", "summary": "other"}, row])
    assert demo._wait_for_request(lambda: [], Running(), timeout=5) == row  # type: ignore[arg-type]

    class Exited:
        def poll(self) -> int:
            return 0

    monkeypatch.setattr(demo.audit, "read_events", lambda: [])
    assert demo._wait_for_request(lambda: [], Exited(), timeout=5) is None  # type: ignore[arg-type]
