"""`claudeguardctl hook` as the CLI runs it (a new process, JSON on stdin): decisions, and fail
closed on anything it cannot decide: always exit 0 with a deny and a reason, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from claudeguard.plan.hooks import ctl_command


@pytest.fixture
def env(tmp_path):
    cfg = tmp_path / "guard.toml"
    cfg.write_text('[permissions]\ndeny = ["Bash(rm *)"]\nallow = ["Bash(git status)"]\nask = ["Bash(git push *)"]\n'
                   '[approval]\ntimeout = 1\n[agents.Explore]\ndeny = ["WebFetch"]\n')
    return {"CLAUDEGUARD_CONFIG": str(cfg), "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"),
            "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}


def hook(env: dict, payload: str | bytes, *args: str) -> tuple[int, dict | None, str]:
    data = payload.encode() if isinstance(payload, str) else payload
    proc = subprocess.run([*ctl_command(), "hook", *args], input=data, env=env, capture_output=True, timeout=60)
    out = proc.stdout.decode()
    return proc.returncode, (json.loads(out) if out.strip() else None), proc.stderr.decode()


def pre(tool: str, tool_input: dict, **extra: object) -> str:
    return json.dumps({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/tmp", "tool_name": tool,
                       "tool_input": tool_input, "tool_use_id": "toolu_1", **extra})


def decision(out: dict | None) -> tuple[str, str]:
    assert out is not None
    spec = out["hookSpecificOutput"]
    return spec["permissionDecision"], spec["permissionDecisionReason"]


def test_policy_deny_and_allow(env):
    code, out, err = hook(env, pre("Bash", {"command": "git status; rm -rf ~"}))
    assert code == 0 and err == ""
    verdict, reason = decision(out)
    assert verdict == "deny" and "denied by Bash(rm *)" in reason and "guard.toml:2" in reason
    assert decision(hook(env, pre("Bash", {"command": "git status"}))[1])[0] == "allow"


def test_undecided_main_agent_call_is_asked_by_the_cli_and_never_left_to_another_hook(env):
    # "ask": the CLI's own asker asks (its dialog, its prompt tool); silence would let another
    # hook's allow skip that question (docs/notes/cli-surfaces.md, section 6).
    code, out, _ = hook(env, pre("Bash", {"command": "make"}))
    assert code == 0 and decision(out) == ("ask", "claudeguard: no rule decides this Bash call.")
    for outside in (pre("Read", {"file_path": "/etc/hostname"}), pre("Grep", {"pattern": "x", "path": "/etc"}),
                    pre("Write", {"file_path": "/tmp/x", "content": "x"}),
                    pre("Bash", {"command": "make"}, permission_mode="dontAsk"),
                    pre("Bash", {"command": "make"}, permission_mode="plan")):
        assert decision(hook(env, outside)[1])[0] == "ask", outside


def test_only_what_the_cli_decides_without_asking_is_left_to_it(env):
    # A read inside the working folder, a tool the CLI never asks about: answering "ask" would
    # make the CLI ask (or, in dontAsk, deny) what it runs unasked; another hook's allow changes
    # nothing there. (What acceptEdits and bypassPermissions allow, the hook allows itself:
    # gate/modes.py.)
    for inside in (pre("Read", {"file_path": "/tmp/notes.txt"}), pre("Glob", {"pattern": "*.py"}),
                   pre("Grep", {"pattern": "x", "path": "sub"}), pre("TodoWrite", {"todos": []}),
                   pre("Agent", {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}),
                   pre("Read", {"file_path": "notes.txt"}, permission_mode="dontAsk")):
        code, out, _ = hook(env, inside)
        assert code == 0 and out is None, inside
    for by_mode in (pre("Edit", {"file_path": "/tmp/a.txt", "old_string": "a", "new_string": "b"},
                        permission_mode="acceptEdits"),
                    pre("Bash", {"command": "make"}, permission_mode="bypassPermissions")):
        assert decision(hook(env, by_mode)[1])[0] == "allow", by_mode


def test_undecided_subagent_call_goes_to_the_channel_and_times_out(env):
    code, out, _ = hook(env, pre("Bash", {"command": "make"}, agent_type="general-purpose", agent_id="a1"))
    verdict, reason = decision(out)
    assert code == 0 and verdict == "deny" and "no answer within 1 s" in reason


def test_ask_rule_always_goes_to_the_channel(env):
    verdict, reason = decision(hook(env, pre("Bash", {"command": "git push origin main"}))[1])
    assert verdict == "deny" and "no answer within 1 s" in reason


def test_agent_overlay_and_blocked_tools(env):
    verdict, reason = decision(hook(env,
                                    pre("WebFetch", {"url": "https://example.com", "prompt": "x"},
                                        agent_type="Explore"))[1])
    assert verdict == "deny" and "WebFetch" in reason
    verdict, reason = decision(hook(env,
                                    pre("Agent", {"prompt": "x", "subagent_type": "general-purpose"},
                                        agent_type="general-purpose"))[1])
    assert verdict == "deny" and "subagents.blocked_tools" in reason


@pytest.mark.parametrize("payload", ["", "{not json", "[1, 2]", b"\xff\xfe\x00garbage"])
def test_malformed_input_is_denied_with_a_reason(env, payload):
    code, out, err = hook(env, payload)
    assert code == 0 and err == ""
    verdict, reason = decision(out)
    assert verdict == "deny" and reason.startswith("claudeguard:")


def test_missing_tool_fields_are_denied(env):
    verdict, reason = decision(hook(env, json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash"}))[1])
    assert verdict == "deny" and "without tool_name/tool_input" in reason


def test_broken_config_denies_with_the_config_error(env, tmp_path):
    (tmp_path / "guard.toml").write_text("[permissions\n")
    code, out, err = hook(env, pre("Bash", {"command": "git status"}))
    verdict, reason = decision(out)
    assert code == 0 and err == "" and verdict == "deny"
    assert "guard.toml:1: invalid TOML" in reason


def test_unreadable_session_snapshot_denies(env, tmp_path):
    verdict, reason = decision(hook(env, pre("Bash", {"command": "git status"}),
                                    "--session-dir", str(tmp_path / "no-such-session"))[1])
    assert verdict == "deny" and "could not decide" in reason


def test_permission_request_fails_closed_in_its_own_format(env, tmp_path):
    payload = json.dumps({"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "x"}})
    _, out, _ = hook(env, payload, "--session-dir", str(tmp_path / "no-such-session"))
    assert out["hookSpecificOutput"]["hookEventName"] == "PermissionRequest"
    assert out["hookSpecificOutput"]["decision"]["behavior"] == "deny"


def test_events_that_decide_nothing_print_nothing(env):
    for name in ("PostToolUse", "SubagentStart", "SubagentStop", "Notification", "SessionStart"):
        code, out, err = hook(env, json.dumps({"hook_event_name": name, "tool_name": "Bash", "tool_input": {}}))
        assert (code, out, err) == (0, None, "")


def test_audit_line_per_decision(env, tmp_path):
    hook(env, pre("Bash", {"command": "rm -rf /"}))
    lines = (tmp_path / "log" / "audit.jsonl").read_text().splitlines()
    event = json.loads(lines[-1])
    assert event["decision"] == "deny" and event["decided_by"] == "rule" and event["rule"] == "Bash(rm *)"
    assert event["tool"] == "Bash" and event["summary"].startswith("Bash: rm -rf /")
    assert len(event["input_digest"]) == 16


def test_an_answer_is_reused_once_by_the_second_asker_of_the_same_call(tmp_path):
    from claudeguard.decision import Decision
    from claudeguard.gate.decide import answer_record, reuse_answer
    from claudeguard.gate.session import Session, record_answer

    session = Session("s", str(tmp_path), {})
    call = {"command": "git push"}
    verdict = Decision("allow", "approved by a human (once)", decided_by="human", scope="once", request_id="r1")
    record_answer(session, "toolu_1", {"agent_id": "a1", "agent_type": "x", "tool": "Bash"},
                  answer_record(verdict, call))
    assert reuse_answer(session, "Bash", {"command": "git push --force"}, "a1", "toolu_1") is None  # other input
    again = reuse_answer(session, "Bash", call, "a1", "toolu_1")
    assert (again.decision, again.request_id, again.decided_by) == ("allow", "r1", "human")
    assert reuse_answer(session, "Bash", call, "a1", "toolu_1") is None  # taken once
    record_answer(session, "toolu_2", {"agent_id": "a2", "tool": "Bash"}, answer_record(verdict, call))
    assert reuse_answer(session, "Bash", call, "a1", None) is None  # by digest: the same agent only
    assert reuse_answer(session, "Bash", call, "a2", None).request_id == "r1"
    assert not [n for n in os.listdir(tmp_path / "calls") if n.endswith(".tmp")]


def test_the_gate_names_what_the_cli_decides_leave_and_what_the_keyboard_decided_keyboard(tmp_path, monkeypatch):
    """The gate's two silences have their own words, are not audited and post nothing; a policy
    "none" under undecided="deny" is an audited deny by default."""
    from claudeguard.gate.call import Asking, Call
    from claudeguard.gate.decide import decide_call
    from claudeguard.gate.session import Session

    monkeypatch.setenv("CLAUDEGUARD_LOG_DIR", str(tmp_path / "log"))
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp_path / "rt"))
    session = Session("s", str(tmp_path), {"policy": {"permissions": {"deny": ["Bash(rm *)"]}}})
    call = Call("Bash", {"command": "ls"}, None, None, str(tmp_path))
    left = decide_call(session, call, Asking("hook", "leave"))
    assert (left.decision, left.decided_by, left.request_id) == ("leave", "default", None)
    keyboard = decide_call(session, call, Asking("hook", "ask", delay_s=5.0, still_wanted=lambda: False))
    assert (keyboard.decision, keyboard.decided_by, keyboard.request_id) == ("keyboard", "keyboard", None)
    assert not (tmp_path / "log").exists() and not (tmp_path / "rt").exists()  # nothing logged, nothing posted
    denied = decide_call(session, call, Asking("hook", "deny"))
    assert (denied.decision, denied.decided_by) == ("deny", "default")
    [line] = (tmp_path / "log" / "audit.jsonl").read_text().splitlines()
    assert (json.loads(line)["decision"], json.loads(line)["decided_by"]) == ("deny", "default")
