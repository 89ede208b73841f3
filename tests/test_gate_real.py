"""The guard's policy and approval channel on the real CLI (both pinned versions): what the
model received, which files the tools created, and what a second process saw in the channel."""

from __future__ import annotations

import json

import pytest

from tests.shim_helpers import (
    Approver, ctl, guarded_env, pending, print_asker_of, results_of, run_guarded, wait_pending, write_user_config,
)


def py_write(name: str) -> dict:
    """A Bash call that creates `name`; Claude Code asks before it in default mode."""
    return {"name": "Bash",
            "input": {"command": f"python3 -c \"open('{name}','w').write('x')\"", "description": f"create {name}"}}


def agent(prompt: str, background: bool, subagent_type: str = "general-purpose") -> dict:
    return {"name": "Agent",
            "input": {"description": "helper", "prompt": prompt, "subagent_type": subagent_type,
                      "run_in_background": background}}


def denied_with(cli_version: str, message: str) -> str:
    """What the model reads of a human's deny of a main-agent call in -p: the message itself, or,
    from 2.1.330 on, where the PreToolUse hook asks the channel for a call no rule decides (a hook's
    "ask" there would deny it unasked), the CLI's prefix for a PreToolUse deny before it."""
    return f"PreToolUse:Bash hook error: {message}" if print_asker_of(cli_version) == "hook" else message


def _result_for(server, script: str) -> list[dict]:
    return [r for r in server.tool_results() if r["script"] == script]


# --- policy (issue 3) ----------------------------------------------------------------------------


@pytest.mark.newest_cli
def test_deny_rule_blocks_and_the_model_sees_the_reason(real_claude, offline_env, model_server):
    server = model_server([{"match": "DENYRULE", "turns": [{"tool_use": py_write("blocked.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    cfg = write_user_config(env, '[permissions]\ndeny = ["Bash(python3 *)"]\n')
    proc = run_guarded(env, offline_env.cwd, "DENYRULE go")
    assert proc.returncode == 0, proc.stderr
    (result,) = _result_for(server, "DENYRULE")
    assert result["is_error"]
    assert f"denied by Bash(python3 *) ({cfg}:2)" in result["content"]
    assert not (offline_env.cwd / "blocked.txt").exists()
    assert pending(env) == []


def test_allow_rule_runs_without_any_prompt(real_claude, offline_env, model_server):
    server = model_server([{"match": "ALLOWRULE", "turns": [{"tool_use": py_write("allowed.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="2")
    write_user_config(env, '[permissions]\nallow = ["Bash(python3 -c *)"]\n')
    proc = run_guarded(env, offline_env.cwd, "ALLOWRULE go", "--permission-mode", "default")
    assert proc.returncode == 0, proc.stderr
    assert (offline_env.cwd / "allowed.txt").exists()
    (result,) = _result_for(server, "ALLOWRULE")
    assert not result["is_error"]
    assert results_of(proc)[-1]["permission_denials"] == []


@pytest.mark.newest_cli
def test_agent_overlay_denies_a_subagent_what_the_main_agent_may_do(real_claude, offline_env, model_server):
    # A custom agent type that has the Write tool; [agents.scribe] takes Write away from it,
    # while the main agent's Write is allowed by [permissions].
    agents = offline_env.cwd / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "scribe.md").write_text("---\nname: scribe\ndescription: writes files\ntools: Write, Read\n---\nYou "
                                      "write files.\n")
    server = model_server([
        {"match": "OVERLAY", "turns": [
            {"tool_use": {"name": "Write",
                          "input": {"file_path": str(offline_env.cwd / "main.txt"), "content": "main"}}},
            {"tool_use": agent("SCRIBE-TASK write yours", False, "scribe")},
            {"text": "fin"}]},
        {"match": "SCRIBE-TASK", "turns": [
            {"tool_use": {"name": "Write",
                          "input": {"file_path": str(offline_env.cwd / "scribe.txt"), "content": "x"}}},
            {"text": "sub done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude)
    cfg = write_user_config(env, '[permissions]\nallow = ["Write"]\n\n[agents.scribe]\ndeny = ["Write"]\n')
    proc = run_guarded(env, offline_env.cwd, "OVERLAY go")
    assert proc.returncode == 0, proc.stderr
    assert (offline_env.cwd / "main.txt").read_text() == "main"
    assert not (offline_env.cwd / "scribe.txt").exists()
    (sub,) = _result_for(server, "SCRIBE-TASK")
    assert sub["is_error"] and f"denied by Write ({cfg}:5)" in sub["content"]


def test_explore_is_read_only(real_claude, offline_env, model_server):
    server = model_server([
        {"match": "EXPLORE-RO",
         "turns": [{"tool_use": agent("EXPLORE-SUB look around", False, "Explore")}, {"text": "fin"}]},
        {"match": "EXPLORE-SUB", "turns": [
            {"tool_use": {"name": "Bash", "input": {"command": "echo hi > explore.txt", "description": "write"}}},
            {"text": "sub done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Bash(echo *)"]\n')
    proc = run_guarded(env, offline_env.cwd, "EXPLORE-RO go")
    assert proc.returncode == 0, proc.stderr
    assert not (offline_env.cwd / "explore.txt").exists()
    (sub,) = _result_for(server, "EXPLORE-SUB")
    assert sub["is_error"] and "subagents.read_only_types" in sub["content"]


@pytest.mark.newest_cli
def test_foreground_and_background_subagents_follow_the_policy(real_claude, offline_env, model_server):
    # 2.1.197 denies a background subagent's undecided call before any prompt tool is asked;
    # the guard's hook decides it from the policy on both versions.
    server = model_server([
        {"match": "SUBPOLICY", "turns": [
            {"tool_use": agent("FG-SUB do it", False)},
            {"tool_use": agent("BG-SUB do it", True)},
            {"text": "fin"}]},
        {"match": "FG-SUB",
         "turns": [{"tool_use": py_write("fg.txt")},
                   {"tool_use": {"name": "Bash", "input": {"command": "rm -f fg.txt", "description": "rm"}}},
                   {"text": "fg done"}]},
        {"match": "BG-SUB",
         "turns": [{"tool_use": py_write("bg.txt")},
                   {"tool_use": {"name": "Bash", "input": {"command": "rm -f bg.txt", "description": "rm"}}},
                   {"text": "bg done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="5")
    write_user_config(env, '[permissions]\nallow = ["Bash(python3 -c *)"]\ndeny = ["Bash(rm *)"]\n')
    proc = run_guarded(env, offline_env.cwd, "SUBPOLICY go")
    assert proc.returncode == 0, proc.stderr
    for name, script in (("fg.txt", "FG-SUB"), ("bg.txt", "BG-SUB")):
        assert (offline_env.cwd / name).exists(), f"{script}: the allowed call did not run"
        created, removed = _result_for(server, script)
        assert not created["is_error"]
        assert removed["is_error"] and "denied by Bash(rm *)" in removed["content"]


def test_callers_own_settings_hooks_still_fire(real_claude, offline_env, model_server, tmp_path):
    marker = tmp_path / "caller-hook-ran"
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash",
                                          "hooks": [{"type": "command", "command": f"touch {marker}"}]}]},
                "env": {"CALLER_SETTING": "kept"}}
    server = model_server([{"match": "CALLERHOOK", "turns": [{"tool_use": py_write("x.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\ndeny = ["Bash(python3 *)"]\n')
    proc = run_guarded(env, offline_env.cwd, "CALLERHOOK go", "--settings", json.dumps(settings))
    assert proc.returncode == 0, proc.stderr
    assert marker.exists(), "the caller's own PreToolUse hook did not run"
    (result,) = _result_for(server, "CALLERHOOK")
    assert "denied by Bash(python3 *)" in result["content"]  # and the guard's hook ran too


# --- the approval channel (issue 4) ------------------------------------------------------------


@pytest.mark.newest_cli
def test_headless_main_agent_approve_and_deny_with_message(real_claude, cli_version, offline_env, model_server):
    server = model_server([{"match": "MAINASK",
                            "turns": [{"tool_use": py_write("yes.txt")}, {"tool_use": py_write("no.txt")},
                                      {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    approver = Approver(env, [("approve", []), ("deny", ["--message", "not today: use the staging db"])])
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "MAINASK go")
    approver.join(timeout=60)
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    assert [r["agent_type"] for r in approver.seen] == [None, None]
    assert "yes.txt" in approver.seen[0]["summary"] and approver.seen[0]["input"]["command"].startswith("python3")
    assert [r.returncode for r in approver.results] == [0, 0]
    assert (offline_env.cwd / "yes.txt").exists() and not (offline_env.cwd / "no.txt").exists()
    yes, no = _result_for(server, "MAINASK")
    assert not yes["is_error"]
    assert no["is_error"] and no["content"] == denied_with(cli_version, "not today: use the staging db")


@pytest.mark.newest_cli
def test_background_subagent_approve_and_deny(real_claude, offline_env, model_server):
    server = model_server([
        {"match": "BGASK", "turns": [{"tool_use": agent("SUBTASK-BG write both", True)}, {"text": "launched"}]},
        {"match": "SUBTASK-BG",
         "turns": [{"tool_use": py_write("bg-yes.txt")}, {"tool_use": py_write("bg-no.txt")}, {"text": "sub done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    approver = Approver(env, [("approve", []), ("deny", ["--message", "no second file"])])
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "BGASK go")
    approver.join(timeout=60)
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    assert [r["agent_type"] for r in approver.seen] == ["general-purpose", "general-purpose"]
    assert approver.seen[0]["agent_id"]
    assert (offline_env.cwd / "bg-yes.txt").exists() and not (offline_env.cwd / "bg-no.txt").exists()
    yes, no = _result_for(server, "SUBTASK-BG")
    assert not yes["is_error"]
    assert no["is_error"] and "no second file" in no["content"]


def test_session_scope_from_a_subagent_covers_main_agent_and_other_subagents(real_claude, offline_env, model_server):
    same = py_write("same.txt")
    server = model_server([
        {"match": "SCOPE-S",
         "turns": [{"tool_use": agent("SUB-ONE first", False)}, {"tool_use": same},
                   {"tool_use": agent("SUB-TWO second", True)}, {"text": "fin"}]},
        {"match": "SUB-ONE", "turns": [{"tool_use": same}, {"text": "one done"}]},
        {"match": "SUB-TWO", "turns": [{"tool_use": same}, {"text": "two done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="5")
    approver = Approver(env, [("approve", ["--scope", "session"])])
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "SCOPE-S go")
    approver.join(timeout=60)
    assert approver.error is None and approver.results[0].returncode == 0, (approver.error, approver.results)
    assert approver.seen[0]["agent_type"] == "general-purpose"
    assert proc.returncode == 0, proc.stderr
    results = server.tool_results()
    bash = [r for r in results if r["tool"] == "Bash"]
    assert len(bash) == 3 and not any(r["is_error"] for r in bash), bash
    assert pending(env) == []
    audit = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    by = [(e["agent_type"], e["decided_by"]) for e in audit if e["tool"] == "Bash"]
    assert by.count(("general-purpose", "human")) == 1
    assert len([b for b in by if b[1] == "rule"]) >= 2  # the grant decided the later two


def test_agent_scope_covers_only_the_same_agent_type(real_claude, cli_version, offline_env, model_server):
    same = py_write("agent.txt")
    server = model_server([
        {"match": "SCOPE-A",
         "turns": [{"tool_use": agent("ASUB-ONE first", False)}, {"tool_use": agent("ASUB-TWO again", False)},
                   {"tool_use": same}, {"text": "fin"}]},
        {"match": "ASUB-ONE", "turns": [{"tool_use": same}, {"text": "one"}]},
        {"match": "ASUB-TWO", "turns": [{"tool_use": same}, {"text": "two"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    approver = Approver(env, [("approve", ["--scope", "agent"]), ("deny", ["--message", "main agent: no"])])
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "SCOPE-A go")
    approver.join(timeout=60)
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    # Asked twice: once by the first general-purpose subagent, then by the main agent; the second
    # general-purpose subagent was covered by the agent-scoped grant.
    assert [r["agent_type"] for r in approver.seen] == ["general-purpose", None]
    main = [r for r in server.tool_results() if r["script"] == "SCOPE-A" and r["tool"] == "Bash"]
    assert main[0]["is_error"] and main[0]["content"] == denied_with(cli_version, "main agent: no")
    assert all(not r["is_error"]
               for r in server.tool_results() if r["script"] in ("ASUB-ONE", "ASUB-TWO") and r["tool"] == "Bash")


def test_forever_scope_writes_the_rule_and_a_new_session_is_not_asked(real_claude, offline_env, model_server):
    server = model_server([{"match": "FOREVER", "turns": [{"tool_use": py_write("f.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    cfg = write_user_config(env, "# my own notes\n[approval]\ntimeout = 60  # a minute\n")
    approver = Approver(env, [("approve", ["--scope", "forever"])])
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "FOREVER go")
    approver.join(timeout=60)
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    assert str(cfg) in approver.results[0].stdout
    text = cfg.read_text()
    assert "# my own notes" in text and "timeout = 60  # a minute" in text
    import tomllib

    assert tomllib.loads(text)["permissions"]["allow"] == ["Bash(python3 -c \"open('f.txt','w').write('x')\")"]
    (offline_env.cwd / "f.txt").unlink()
    env["CLAUDEGUARD_APPROVAL_TIMEOUT"] = "2"  # a new session: a question would now time out
    proc = run_guarded(env, offline_env.cwd, "FOREVER go")
    assert proc.returncode == 0, proc.stderr
    assert (offline_env.cwd / "f.txt").exists()
    second = _result_for(server, "FOREVER")[-1]
    assert not second["is_error"]


def test_no_answer_denies_at_the_deadline(real_claude, offline_env, model_server):
    server = model_server([{"match": "TIMEOUT", "turns": [{"tool_use": py_write("late.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="3")
    proc = run_guarded(env, offline_env.cwd, "TIMEOUT go")
    assert proc.returncode == 0, proc.stderr
    (result,) = _result_for(server, "TIMEOUT")
    assert result["is_error"] and "no answer within 3 s; denied by approval.on_timeout" in result["content"]
    assert not (offline_env.cwd / "late.txt").exists()
    assert pending(env) == []


def test_answering_twice_is_refused(real_claude, offline_env, model_server):
    server = model_server([{"match": "TWICE", "turns": [{"tool_use": py_write("t.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    import subprocess

    from tests.shim_helpers import GUARD

    proc = subprocess.Popen(GUARD + ["-p", "TWICE go"], env=env, cwd=offline_env.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        req = wait_pending(env)
        first = ctl(env, "approve", req["id"])
        second = ctl(env, "deny", req["id"])
        assert first.returncode == 0
        assert second.returncode == 1 and second.stderr.count("\n") == 1
        assert proc.wait(timeout=60) == 0
        assert (offline_env.cwd / "t.txt").exists()
        unknown = ctl(env, "approve", "zzzzzzzzzzzzzzzz")
        assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- who asks in -p (2.1.330: the PermissionRequest hook; 2.1.197: the prompt tool) -------------

@pytest.mark.newest_cli
@pytest.mark.parametrize("service", ["1", "0"], ids=["http-hooks", "command-hooks"])
def test_a_call_no_rule_decides_reaches_the_channel_once_through_the_print_asker(real_claude, cli_version, offline_env,
                                                                                 model_server, service):
    server = model_server([
        {"match": "PRASK", "turns": [{"tool_use": py_write("yes.txt")}, {"tool_use": py_write("no.txt")},
                                     {"tool_use": agent("PRFG go", False)}, {"text": "fin"}]},
        {"match": "PRFG", "turns": [{"tool_use": py_write("fg.txt")}, {"text": "fg done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60",
                      CLAUDEGUARD_SERVICE=service)
    # A fourth answer is offered for three calls: a second request for any call would take it.
    approver = Approver(env, [("approve", []), ("deny", ["--message", "not that one"]), ("approve", []),
                              ("approve", [])], timeout=20)
    approver.start()
    proc = run_guarded(env, offline_env.cwd, "PRASK go")
    approver.finish()
    assert approver.error is None, approver.error
    assert proc.returncode == 0, proc.stderr
    assert [(r["agent_type"], r["summary"].split("'")[1]) for r in approver.seen] == [
        (None, "yes.txt"), (None, "no.txt"), ("general-purpose", "fg.txt")]
    assert [r.returncode for r in approver.results] == [0, 0, 0]
    assert sorted(p.name for p in offline_env.cwd.glob("*.txt")) == ["fg.txt", "yes.txt"]
    [denial] = results_of(proc)[-1]["permission_denials"]
    assert denial["tool_name"] == "Bash" and "no.txt" in denial["tool_input"]["command"]
    yes, no = _result_for(server, "PRASK")[:2]
    assert not yes["is_error"] and no["is_error"] and no["content"] == denied_with(cli_version, "not that one")
    humans = [(e["via"], e["decision"], e["agent_type"]) for e in
              (json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines())
              if e.get("decided_by") == "human"]
    asker = print_asker_of(cli_version)  # per CLI (docs/design.md, "Who asks in -p")
    # the subagent's call is asked by its PreToolUse hook (a subagent cannot show a prompt)
    assert humans == [(asker, "allow", None), (asker, "deny", None), ("hook", "allow", "general-purpose")]
    assert pending(env) == []


# --- the guard answers every call explicitly (issue 27; docs/notes/cli-surfaces.md section 6) ------

ALLOWING_HOOK = ("import json, sys; json.load(sys.stdin); print(json.dumps({'hookSpecificOutput': "
                 "{'hookEventName': 'PreToolUse', 'permissionDecision': 'allow', "
                 "'permissionDecisionReason': 'the other hook says allow'}}))")


@pytest.mark.parametrize("where", ["project", "user"])
def test_another_hooks_allow_cannot_skip_the_question_of_a_call_no_rule_decides(real_claude, offline_env,
                                                                                  model_server, tmp_path, where):
    # Silence (the gate's old answer to a main-agent call no rule decides) let the other hook's
    # allow run the call unasked. Now the gate answers, and with nobody answering the call is denied
    # at the deadline: one request, one audit row.
    import sys

    server = model_server([{"match": "OTHERHOOK", "turns": [{"tool_use": py_write("ran.txt")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="3")
    (tmp_path / "other_hook.py").write_text(ALLOWING_HOOK)
    hooks = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"{sys.executable} {tmp_path / 'other_hook.py'}"}]}]}}
    settings = (offline_env.cwd if where == "project" else offline_env.home) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(hooks))
    proc = run_guarded(env, offline_env.cwd, "OTHERHOOK go")
    assert proc.returncode == 0, proc.stderr
    assert not (offline_env.cwd / "ran.txt").exists()
    (result,) = _result_for(server, "OTHERHOOK")
    assert result["is_error"] and "no answer within 3 s; denied by approval.on_timeout" in result["content"]
    rows = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    assert [(r["decision"], r["decided_by"]) for r in rows if r.get("tool") == "Bash"] == [("deny", "timeout")]
    assert pending(env) == []
