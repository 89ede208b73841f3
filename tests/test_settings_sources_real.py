"""Claude Code settings that would silence the guard, on the real CLI (both pinned versions).

The setup of issue 13: `[permissions] allow = ["Write"]` and `[agents.scribe] deny = ["Write"]`;
the model has the main agent start the scribe subagent, whose Write the overlay denies. Each
placement of `"disableAllHooks": true` is refused before the CLI starts, lockdown on or off; the
opt-out shows why (the real CLI then runs the scribe's Write); sources the CLI does not load, or
that a later source overrides, leave the guard in force.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.shim_helpers import CTL, GUARD, guarded_env, run_guarded, write_user_config

POLICY = '[permissions]\nallow = ["Write"]\n\n[agents.scribe]\ndeny = ["Write"]\n'
LOCKDOWN = "[security]\ndisable_bypass_permissions = true\n\n"
OPT_OUT = "[security]\nallow_settings_override = true\n\n"
OFF = {"disableAllHooks": True}


def scribe_session(offline_env, model_server, real_claude, config: str):  # type: ignore[no-untyped-def]
    """The env, the model server and the file the scribe would write."""
    work = offline_env.cwd
    agents = work / ".claude" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "scribe.md").write_text("---\nname: scribe\ndescription: writes files\ntools: Write, Read\n---\nYou write files.\n")
    server = model_server([
        {"match": "SCRIBE-MAIN", "turns": [
            {"tool_use": {"name": "Write", "input": {"file_path": str(work / "main.txt"), "content": "main"}}},
            {"tool_use": {"name": "Agent", "input": {"description": "helper", "prompt": "SCRIBE-SUB write", "subagent_type": "scribe"}}},
            {"text": "fin"}]},
        {"match": "SCRIBE-SUB", "turns": [
            {"tool_use": {"name": "Write", "input": {"file_path": str(work / "scribe.txt"), "content": "x"}}},
            {"text": "sub done"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, config + POLICY)
    return env, server, work / "scribe.txt"


def place(where: str, env: dict, work: Path, data: dict) -> tuple[Path, list[str]]:
    """Write `data` where a settings source is read; returns the file and the extra argv."""
    home = Path(env["HOME"])
    if where == "configdir":
        env["CLAUDE_CONFIG_DIR"] = str(home / "cfgdir")
        # the CLI keeps its state there then: give it the same dialog-free state as ~/.claude.json
        (home / "cfgdir").mkdir()
        (home / "cfgdir" / ".claude.json").write_text((home / ".claude.json").read_text())
    path = {"user": home / ".claude" / "settings.json", "configdir": home / "cfgdir" / "settings.json",
            "project": work / ".claude" / "settings.json", "local": work / ".claude" / "settings.local.json",
            "settings-file": home / "mine.json"}[where]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path, (["--settings", str(path)] if where == "settings-file" else [])


PLACEMENTS = ["user", "configdir", "project", "local", "settings-file"]


@pytest.mark.parametrize("lockdown", [True, False], ids=["lockdown", "no-lockdown"])
@pytest.mark.parametrize("where", PLACEMENTS)
def test_every_placement_is_refused_before_the_cli_starts(real_claude, offline_env, model_server, run_claude, where, lockdown):
    env, server, scribe = scribe_session(offline_env, model_server, real_claude, LOCKDOWN if lockdown else "")
    path, extra = place(where, env, offline_env.cwd, OFF)
    proc = run_guarded(env, offline_env.cwd, "SCRIBE-MAIN go", *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1
    named = f"--settings {path}" if where == "settings-file" else str(path)
    assert proc.stderr.startswith(f"claudeguard: {named}: disableAllHooks: silences every hook the guard registers")
    assert ("refused by lockdown" in proc.stderr) is lockdown
    assert server.requests() == []  # the CLI never started
    assert not scribe.exists() and not (offline_env.cwd / "main.txt").exists()


@pytest.mark.parametrize("argv", [[], ["--bg", "SCRIBE-MAIN go"], ["agents"]], ids=["interactive", "bg", "agent-view"])
def test_every_kind_of_session_is_refused(real_claude, offline_env, model_server, run_claude, argv):
    env, server, _ = scribe_session(offline_env, model_server, real_claude, LOCKDOWN)
    path, _ = place("local", env, offline_env.cwd, OFF)
    proc = run_claude(GUARD + argv, env, offline_env.cwd, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"claudeguard: {path}: disableAllHooks: silences every hook the guard registers: refused by lockdown ({Path(env['XDG_CONFIG_HOME']) / 'claudeguard' / 'config.toml'}:2)\n"
    assert server.requests() == []


@pytest.mark.parametrize("where", ["user", "project"])
def test_opt_out_runs_and_the_cli_really_silences_the_guard(real_claude, offline_env, model_server, where):
    # Why the refusal: let through, the file switches off the guard's hooks and the overlay-denied
    # Write runs. The user is told on stderr.
    env, _, scribe = scribe_session(offline_env, model_server, real_claude, OPT_OUT)
    path, extra = place(where, env, offline_env.cwd, OFF)
    proc = run_guarded(env, offline_env.cwd, "SCRIBE-MAIN go", *extra)
    assert proc.returncode == 0, proc.stderr
    assert f"claudeguard: warning: {path}: disableAllHooks: silences every hook the guard registers (allowed by security.allow_settings_override)\n" in proc.stderr
    assert scribe.exists()


@pytest.mark.parametrize("case", ["setting-sources", "settings-false", "policy-mode"])
def test_sources_not_loaded_or_overridden_keep_the_guard(real_claude, offline_env, model_server, case):
    env, _, scribe = scribe_session(offline_env, model_server, real_claude, LOCKDOWN)
    work = offline_env.cwd
    if case == "setting-sources":  # the CLI does not read project/local files then (checked)
        place("project", env, work, OFF)
        place("local", env, work, OFF)
        extra = ["--setting-sources", "user"]
    elif case == "settings-false":  # a later source's false beats the project's true (checked)
        place("project", env, work, OFF)
        extra = ["--settings", json.dumps({"disableAllHooks": False})]
    else:  # the mode the policy injects beats a settings file's bypassPermissions (checked)
        write_user_config(env, LOCKDOWN + '[permissions]\nmode = "acceptEdits"\nallow = ["Write"]\n\n[agents.scribe]\ndeny = ["Write"]\n')
        place("project", env, work, {"permissions": {"defaultMode": "bypassPermissions"}})
        extra = []
    proc = run_guarded(env, work, "SCRIBE-MAIN go", *extra)
    assert proc.returncode == 0, proc.stderr
    assert (work / "main.txt").read_text() == "main"
    assert not scribe.exists()


def test_bypass_default_mode_without_a_chosen_mode_is_refused(real_claude, offline_env, model_server):
    env, server, _ = scribe_session(offline_env, model_server, real_claude, "")
    path, _ = place("user", env, offline_env.cwd, {"permissions": {"defaultMode": "bypassPermissions"}})
    proc = run_guarded(env, offline_env.cwd, "SCRIBE-MAIN go")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"claudeguard: {path}: permissions.defaultMode: bypassPermissions")
    assert server.requests() == []


def test_doctor_reports_each_source(real_claude, offline_env, model_server, run_claude):
    env, _, _ = scribe_session(offline_env, model_server, real_claude, "")
    project, _ = place("project", env, offline_env.cwd, OFF)
    user, _ = place("user", env, offline_env.cwd, {"allowedHttpHookUrls": ["https://hooks.example.invalid/*"]})
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"user {user} (loaded); project {project} (loaded)" in proc.stdout
    assert f"FAIL  Claude settings: {project}: disableAllHooks: silences every hook the guard registers: claudeguard refuses to start here\n" in proc.stdout
    assert f"FAIL  Claude settings: {user}: allowedHttpHookUrls: blocks the guard's HTTP hooks" in proc.stdout
    assert "ok    hooks fire" in proc.stdout  # its probe runs in a directory of its own
