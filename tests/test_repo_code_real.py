"""Repository code is code (issues 24 part 3, 25 classes 4 and 5): a project's hooks of every
event, its `.mcp.json` servers, its helpers and plugins never run until the user trusted that
content, with or without lockdown; under lockdown the launch is refused with one line. Attack 5:
the repository's code is the fake-service payload (kill the guard service, serve its port, answer
"allow"), and the call an ask rule guards must never run without a human."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.attack_payloads import Payloads
from tests.shim_helpers import CTL, guarded_env, run_guarded, write_user_config

POLICY = '[permissions]\nask = ["Bash(touch *)"]\n\n[approval]\ntimeout = 4\n'
LOCKDOWN = "[security]\ndisable_bypass_permissions = true\n\n"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop")


def _hooks(command: str) -> dict:
    return {ev: [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}] for ev in EVENTS}


@pytest.fixture
def attack(real_claude, offline_env, model_server, tmp_path):  # type: ignore[no-untyped-def]
    work = offline_env.cwd
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    target = tmp_path / "touched"
    server = model_server([{"match": "ATTACK5", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": f"touch {target}", "description": "t"}}},
        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    pay = Payloads(tmp_path, Path(env["CLAUDEGUARD_RUNTIME_DIR"]))
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(json.dumps({
        "hooks": _hooks(pay.fake_service()), "enableAllProjectMcpServers": True,
        "apiKeyHelper": pay.fake_service()}))
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": pay.fake_service_server()}}))
    yield env, work, server, target, pay
    pay.stop()


def test_untrusted_repository_code_never_runs_and_the_asked_call_does_not_either(attack):
    env, work, server, target, pay = attack
    write_user_config(env, POLICY)
    proc = run_guarded(env, work, "ATTACK5 go")
    assert pay.marks() == [], proc.stderr  # no hook, helper or server of the repository ran
    assert not target.exists()  # the ask rule's call timed out: denied
    lines = [line for line in proc.stderr.splitlines() if "repository code not run until you trust it" in line]
    assert [line.split(": ")[1] for line in lines] == [str(work / ".claude" / "settings.json"),
                                                       str(work / ".mcp.json")]
    assert "hooks (SessionStart, UserPromptSubmit, PreToolUse, Stop)" in lines[0]
    assert f"claudeguardctl config trust {work / '.mcp.json'}" in lines[1]
    results = [r["content"] for r in server.tool_results()]
    assert len(results) == 1 and "no answer within 4 s" in results[0]


def test_once_trusted_the_projects_hooks_run_as_before(attack):
    env, work, server, target, pay = attack
    write_user_config(env, POLICY)
    (work / ".claude" / "settings.json").write_text(json.dumps({"hooks": _hooks(pay.marker("hook"))}))
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo": pay.marker_server("server")}}))
    trusted = subprocess.run(CTL + ["config", "trust"], env=env, cwd=work, capture_output=True, text=True, timeout=60)
    assert trusted.returncode == 0, trusted.stderr
    assert sorted(line.split()[1] for line in trusted.stdout.splitlines()) == sorted(
        [str(work / ".claude" / "settings.json"), str(work / ".mcp.json")])
    proc = run_guarded(env, work, "ATTACK5 go", "--settings", json.dumps({"enableAllProjectMcpServers": True}))
    assert "repository code not run" not in proc.stderr
    assert {"hook", "server"} <= set(pay.marks()), proc.stderr  # SessionStart, PreToolUse, ... and the server
    assert pay.marks().count("hook") >= 3
    assert not target.exists()  # the guard still asks (nobody answered: denied)
    # a changed file is untrusted again
    (work / ".claude" / "settings.json").write_text(json.dumps({"hooks": _hooks(pay.marker("changed"))}))
    proc = run_guarded(env, work, "ATTACK5 go")
    assert "changed" not in pay.marks()
    assert f"{work / '.claude' / 'settings.json'}: hooks" in proc.stderr


def test_lockdown_refuses_untrusted_repository_code_with_one_line(attack):
    env, work, server, target, pay = attack
    write_user_config(env, LOCKDOWN + POLICY)
    proc = run_guarded(env, work, "ATTACK5 go")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"claudeguard: {work / '.claude' / 'settings.json'}: hooks (")
    assert "refused by lockdown" in proc.stderr and "claudeguardctl config trust" in proc.stderr
    assert server.requests() == [] and pay.marks() == []


# --- interactive: a repository's status line (it runs only where the TUI draws) --------------------

def _tui_session(env: dict, work: Path, prompt: str):  # type: ignore[no-untyped-def]
    from tests.test_pty_real import GUARD as GUARD_TUI, Tui

    return Tui(GUARD_TUI + ["--permission-mode", "default", prompt], env, work)


def test_an_untrusted_status_line_never_runs_and_a_trusted_one_does(attack, tmp_path):
    env, work, server, target, pay = attack
    write_user_config(env, POLICY + "idle_before_channel = 0\n")
    (work / ".claude" / "settings.json").write_text(json.dumps({
        "statusLine": {"type": "command", "command": pay.fake_service("--status")}}))
    (work / ".mcp.json").unlink()
    server.scenario.insert(0, {"match": "STATUS", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": f"touch {target}", "description": "t"}}},
        {"text": "made it"}]})
    tui = _tui_session(env, work, "STATUS go")
    try:
        tui.wait("made it", 60)  # the ask rule's call: nobody answered within 4 s, denied
        assert not target.exists()
        assert pay.marks() == []
        assert tui.leave() == 0
    finally:
        tui.close()
    (work / ".claude" / "settings.json").write_text(json.dumps({
        "statusLine": {"type": "command", "command": pay.marker("status", "--status")}}))
    trusted = subprocess.run(CTL + ["config", "trust"], env=env, cwd=work, capture_output=True, text=True, timeout=60)
    assert trusted.returncode == 0, trusted.stderr
    tui = _tui_session(env, work, "STATUS again")
    try:
        tui.until(lambda: "status" in pay.marks(), 30, "the trusted status line")
        assert tui.leave() == 0
    finally:
        tui.close()


@pytest.mark.newest_cli
def test_a_skill_that_runs_a_command_as_it_is_invoked_waits_for_trust(real_claude, offline_env, model_server):
    """A repository's skill whose body runs a command (``!`...```) and whose ``allowed-tools``
    grant it: the CLI runs that command itself when the model calls the Skill tool, with no
    PreToolUse hook, so past the guard's ask rule. Untrusted, the session starts without the
    project source (the skill unknown to the CLI, the command never run, one line saying so);
    trusted, it runs, in the box."""
    work = offline_env.cwd
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    skill = work / ".claude" / "skills" / "tidy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: tidy\ndescription: tidy up\nallowed-tools: Bash(touch:*)\n---\n"
                     "Tidied: !`touch skill-ran`\n")
    server = model_server([{"match": "SKILL", "turns": [{"tool_use": {"name": "Skill", "input": {"skill": "tidy"}}},
                                                        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Skill"]\nask = ["Bash(touch *)"]\n\n[approval]\ntimeout = 3\n')

    proc = run_guarded(env, work, "SKILL one")
    assert proc.returncode == 0, proc.stderr
    assert not (work / "skill-ran").exists()
    assert (f"{skill}: allowed-tools (Bash(touch:*)), shell commands run as it is invoked (!`...`): repository code "
            f"not run until you trust it") in proc.stderr, proc.stderr
    [result] = [r for r in server.tool_results() if r["script"] == "SKILL"]
    assert result["is_error"] is True and "tidy" in result["content"], result

    trusted = subprocess.run(CTL + ["config", "trust", str(skill)], env=env, cwd=work, capture_output=True, text=True,
                             timeout=60)
    assert trusted.returncode == 0, trusted.stderr
    proc = run_guarded(env, work, "SKILL two")
    assert proc.returncode == 0, proc.stderr
    assert (work / "skill-ran").exists()
    assert "repository code" not in proc.stderr, proc.stderr
