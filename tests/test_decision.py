"""The decision vocabulary and its adapters: each consumer's exact JSON, built in one place."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard import decision
from claudeguard.decision import (
    Decision,
    audit_row,
    dialog_role,
    failure,
    hook_output,
    permission_request_output,
    pre_tool_use_output,
    prompt_tool_answer,
    prompt_tool_result,
)

ALLOW = Decision("allow", "claudeguard: Bash allowed by Bash(ls *) (a.toml:3).", rule="Bash(ls *)", source="a.toml:3")
DENY = Decision("deny", "claudeguard: denied by a human (once)", decided_by="human", scope="once", request_id="r1")
CALL = {"command": "ls -la"}


def _literals() -> dict[str, tuple[str, ...]]:
    """The ``Literal`` aliases as written (they exist for type checkers only, not at run time)."""
    tree = ast.parse(Path(decision.__file__).read_text())
    return {node.targets[0].id: tuple(elt.value for elt in node.value.slice.elts)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "Literal"}


def test_the_runtime_tuples_are_the_literals():
    lit = _literals()
    assert decision.PERMISSIONS == lit["Permission"] and decision.SCOPES == lit["Scope"]
    outcomes = set(lit["Outcome"])
    assert outcomes == set(lit["PolicyOutcome"]) | set(lit["GateOutcome"])
    assert set(decision.SILENT) == set(lit["GateOutcome"]) - set(decision.PERMISSIONS) - {"prompt"}
    assert set(lit["Undecided"]) <= outcomes and set(lit["RuleKind"]) <= set(lit["PolicyOutcome"])


def test_import_costs_no_typing_dataclasses_or_json():
    """The hook's own-process path imports this module (bench/importtime.py)."""
    code = ("import sys\nbefore = set(sys.modules)\nimport claudeguard.decision\n"
            "new = set(sys.modules) - before\n"
            "print(sorted(m for m in ('typing', 'dataclasses', 'inspect', 'enum', 'json') if m in new))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr


def test_pre_tool_use_output_is_exact():
    assert json.dumps(pre_tool_use_output(ALLOW)) == (
        '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", '
        '"permissionDecisionReason": "claudeguard: Bash allowed by Bash(ls *) (a.toml:3)."}}')
    assert pre_tool_use_output(DENY) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": DENY.reason}}


def test_permission_request_output_is_exact():
    assert json.dumps(permission_request_output(ALLOW, CALL)) == (
        '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", '
        '"decision": {"behavior": "allow", "updatedInput": {"command": "ls -la"}}}}')
    assert permission_request_output(ALLOW) == {
        "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    assert json.dumps(permission_request_output(DENY, CALL)) == (
        '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", '
        '"decision": {"behavior": "deny", "message": "claudeguard: denied by a human (once)"}}}')


def test_prompt_is_a_pre_tool_use_ask_and_no_answer_anywhere_else():
    """The CLI's own asker asks (its dialog, its prompt tool); the reason is what its dialog shows.
    A PermissionRequest hook or the prompt tool must answer: a ``prompt`` there is a bug (deny)."""
    d = Decision("prompt", "claudeguard: Bash asks a human: Bash(git push *) (a.toml:3).", decided_by="default")
    assert json.dumps(pre_tool_use_output(d)) == (
        '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", '
        '"permissionDecisionReason": "claudeguard: Bash asks a human: Bash(git push *) (a.toml:3)."}}')
    assert hook_output("PreToolUse", d) == pre_tool_use_output(d)
    with pytest.raises(ValueError, match="no answer for Claude Code"):
        permission_request_output(d, CALL)
    assert prompt_tool_answer(d, CALL) == {"behavior": "deny", "message": d.reason}


@pytest.mark.parametrize("silent", ["leave", "keyboard"])
def test_the_gate_says_nothing_for_leave_and_keyboard(silent):
    d = Decision(silent, "whatever", decided_by="default")
    assert pre_tool_use_output(d) is None and permission_request_output(d, CALL) is None
    assert hook_output("PreToolUse", d) is None and hook_output("PermissionRequest", d) is None


@pytest.mark.parametrize("policy_only", ["ask", "none"])
def test_a_policy_outcome_that_skipped_the_gate_is_no_answer(policy_only):
    """A bug, not a silent allow or a silence: it raises and the hook's callers deny."""
    d = Decision(policy_only, "claudeguard: no rule matches this Bash call.")
    with pytest.raises(ValueError, match="no answer for Claude Code"):
        pre_tool_use_output(d)
    with pytest.raises(ValueError, match="no answer for Claude Code"):
        permission_request_output(d, CALL)
    assert prompt_tool_answer(d, CALL) == {"behavior": "deny", "message": d.reason}  # the prompt tool must answer


def test_hook_output_answers_in_the_event_s_shape():
    denied = failure("claudeguard: malformed hook input (x); denied")
    assert denied.decided_by == "default"
    assert hook_output("PermissionRequest", denied) == permission_request_output(denied)
    assert hook_output("PreToolUse", denied) == pre_tool_use_output(denied)
    assert hook_output(None, denied) == pre_tool_use_output(denied)  # unreadable input: PreToolUse's shape
    assert hook_output("PostToolUse", denied) is None


def test_prompt_tool_answer_and_result_are_exact():
    assert prompt_tool_answer(ALLOW, CALL) == {"behavior": "allow", "updatedInput": CALL}
    assert prompt_tool_answer(DENY, CALL) == {"behavior": "deny", "message": DENY.reason}
    assert prompt_tool_result(prompt_tool_answer(ALLOW, CALL)) == {
        "content": [{"type": "text", "text": '{"behavior": "allow", "updatedInput": {"command": "ls -la"}}'}]}


def test_dialog_role():
    assert (dialog_role("allow"), dialog_role("deny")) == ("yes", "no")


def test_audit_row_has_the_same_keys_for_every_writer_then_the_writer_s_own():
    row = audit_row(DENY, session_id="s", tool="Bash", summary="Bash: ls -la", via="hook", agent_type="Explore",
                    agent_id="a1", input_digest="0" * 16, ask_rule="Bash(ls *)", ask_source="a.toml:4")
    assert list(row) == ["session_id", "agent_type", "agent_id", "tool", "summary", "input_digest", "decision",
                         "decided_by", "scope", "waited_s", "rule", "source", "request_id", "via", "ask_rule",
                         "ask_source"]
    assert (row["decision"], row["decided_by"], row["scope"], row["request_id"]) == ("deny", "human", "once", "r1")
    dialog = audit_row(Decision("allow", "", decided_by="timeout", scope="once", waited_s=1.5), session_id="s",
                       tool="dialog:trust", summary="Trust?", via="screen", choice="Yes")
    assert (dialog["agent_type"], dialog["input_digest"], dialog["rule"], dialog["choice"]) == (None, None, None, "Yes")
    assert dialog["waited_s"] == 1.5 and dialog["decided_by"] == "timeout"
    # A human's answer says who gave it, after the common keys (the contract's answered_by).
    who = {"uid": 1000, "pid": 4242, "tty": None, "command": "claudeguardctl approve abcdefgh"}
    human = audit_row(Decision("allow", "", decided_by="human", scope="once", answered_by=who), session_id="s",
                      tool="Bash", summary="Bash: make", via="hook")
    assert list(human)[-1] == "answered_by" and human["answered_by"] == who


def test_decision_fields_after_the_reason_are_keywords():
    with pytest.raises(TypeError):
        Decision("allow", "r", "Bash(ls *)")  # rule is keyword-only
    assert Decision("allow", "r") == Decision("allow", "r", decided_by="rule", parts=[])
