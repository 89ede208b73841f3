"""The hooks the shim registers, as the CLI receives them (`--guard-dry-run` shows the exact argv)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from claudeguard.plan.discovery import version_at_least
from claudeguard.plan.hooks import PERMISSION_REQUEST_IN_PRINT

GUARD = [sys.executable, "-m", "claudeguard"]


def _settings(tmp_path, *argv: str, service: bool = True, cwd=None) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "CLAUDEGUARD_CLAUDE": "/bin/true", "CLAUDEGUARD_SERVICE": "1" if service else "0"}
    proc = subprocess.run(GUARD + ["--guard-dry-run", *argv], env=env, cwd=cwd or tmp_path, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["argv"]
    values = [a.split("=", 1)[1] for a in out if a.startswith("--settings=")]
    values += [out[i + 1] for i, a in enumerate(out) if a == "--settings"]
    [value] = values  # one --settings, so the CLI cannot drop either (the last one wins)
    return json.loads(value)


EVERY_EVENT = ["PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "Notification", "SubagentStart",
               "SubagentStop", "UserPromptSubmit", "Stop"]
# -p leaves out what nothing consumes there: PermissionRequest (the prompt tool owns that decision;
# the hook answers nothing in print mode) and Notification (dialogs and idle prompts of a TUI).
PRINT_EVENTS = [e for e in EVERY_EVENT if e not in ("PermissionRequest", "Notification")]
# A -p run of one prompt leaves out UserPromptSubmit too (it would only say that the one turn began).
ONE_PROMPT_EVENTS = [e for e in PRINT_EVENTS if e != "UserPromptSubmit"]
# A -p run whose transcript the CLI keeps leaves out the call-end events: the watchdog reads the
# ends from the transcript (watchdog/transcript.py).
CALL_ENDS = ("PostToolUse", "PostToolUseFailure")
# ... and a -p run of one prompt whose transcript is kept leaves out Stop too: the transcript shows
# the main agent's calls over, and the CLI would wait for its answer before it exits.
PRINT_KEPT_EVENTS = [e for e in ONE_PROMPT_EVENTS if e not in (*CALL_ENDS, "Stop")]
SESSION_KINDS = {
    "print": (["-p", "x"], PRINT_KEPT_EVENTS),
    "print-no-persistence": (["-p", "--no-session-persistence", "x"], ONE_PROMPT_EVENTS),
    "print-stream-json": (["-p", "--input-format", "stream-json", "--output-format", "stream-json"],
                          [e for e in PRINT_EVENTS if e not in CALL_ENDS]),
    "interactive": (["fix the tests"], EVERY_EVENT),
    "headless-stream-json": (["--input-format", "stream-json", "--output-format", "stream-json"], EVERY_EVENT),
}


@pytest.mark.parametrize("kind", SESSION_KINDS)
@pytest.mark.parametrize("service", [True, False], ids=["http", "command"])
def test_the_exact_hook_events_of_each_session_kind(tmp_path, service, kind):
    argv, events = SESSION_KINDS[kind]
    assert list(_settings(tmp_path, *argv, service=service)["hooks"]) == events


@pytest.mark.parametrize("service", [True, False], ids=["http", "command"])
def test_every_hook_is_registered_and_blocks_but_the_call_ends_over_http(tmp_path, service):
    hooks = _settings(tmp_path, "-p", "--no-session-persistence", "x", service=service)["hooks"]
    entries = {event: groups[0]["hooks"][0] for event, groups in hooks.items()}
    assert list(entries) == ONE_PROMPT_EVENTS
    for event, entry in entries.items():
        if service:
            # The dry run starts no service: the port and the secret are placeholders. A launch
            # writes the header with the secret into a 0600 settings file (test_hook_secret.py);
            # nothing is taken from the environment, which a settings env block could replace.
            assert re.fullmatch(rf"http://127\.0\.0\.1:PORT/hook/[0-9a-f]{{16}}/{event}", entry["url"]), entry
            assert entry["headers"] == {"Authorization": "Bearer <secret made at start>"}
            assert "allowedEnvVars" not in entry and entry["type"] == "http"
        else:
            assert entry["command"].endswith("claudeguard/gate/fast_entry.py hook") and " -E -S " in entry["command"]
        # Only the HTTP form's call-end events are async (nothing to answer; see command.py's
        # ASYNC_HTTP_EVENTS); command hooks all block (a slow async hook delays a 2.1.330 run's end).
        assert entry.get("async", False) is (service and event in ("PostToolUse", "PostToolUseFailure")), event
    tool_events = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure")
    assert {e: g[0].get("matcher") for e, g in hooks.items()} == {e: "*" if e in tool_events else None for e in hooks}


@pytest.mark.parametrize("where", ["project", "local", "--settings"])
def test_a_settings_source_that_keeps_no_transcript_keeps_the_call_end_hooks(tmp_path, where):
    # cleanupPeriodDays 0 makes the CLI write no transcript: the call ends must come from hooks.
    work = tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    argv = ["-p", "x"]
    if where == "--settings":
        argv = ["--settings", json.dumps({"cleanupPeriodDays": 0}), *argv]
    else:
        name = "settings.json" if where == "project" else "settings.local.json"
        (work / ".claude" / name).write_text(json.dumps({"cleanupPeriodDays": 0}))
    assert list(_settings(tmp_path, *argv, cwd=work)["hooks"]) == ONE_PROMPT_EVENTS
    argv = ["--settings", json.dumps({"cleanupPeriodDays": 7}), "-p", "x"]
    left_out = [e for e in ONE_PROMPT_EVENTS if e not in _settings(tmp_path, *argv)["hooks"]]
    assert left_out == [*CALL_ENDS, "Stop"]


def test_callers_settings_keep_their_hooks_ahead_of_ours(tmp_path):
    mine = {"hooks": {"SubagentStop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}, "model": "x"}
    settings = _settings(tmp_path, "--settings", json.dumps(mine), "-p", "x", service=False)
    assert settings["model"] == "x"
    assert settings["hooks"]["SubagentStop"][0] == mine["hooks"]["SubagentStop"][0]  # theirs first, untouched
    assert settings["hooks"]["SubagentStop"][1]["hooks"][0]["command"].endswith("fast_entry.py hook")


def _argv(tmp_path, config: str, *argv: str) -> list[str]:
    (tmp_path / "xdg" / "claudeguard").mkdir(parents=True, exist_ok=True)
    (tmp_path / "xdg" / "claudeguard" / "config.toml").write_text(config)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "CLAUDEGUARD_CLAUDE": "/bin/true"}
    proc = subprocess.run(GUARD + ["--guard-dry-run", *argv], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["argv"]


def test_ask_rules_stay_out_of_the_cli_and_allow_rules_of_their_tools_too(tmp_path):
    # The CLI's own copy of an ask rule would ask a second time after the hook's human answer;
    # an allow rule of the same tool would let an ask call run unanswered if the hook failed.
    argv = _argv(tmp_path, '[permissions]\nallow = ["Bash(git *)", "Read", "Write", "mcp__gh__list", "mcp__db"]\n'
                           'ask = ["Bash(git push *)", "Edit(./src/**)", "mcp__gh"]\ndeny = ["Bash(rm *)"]\n',
                 "-p", "x")
    settings = json.loads(next(a for a in argv if a.startswith("--settings=")).split("=", 1)[1])
    assert "permissions" not in settings
    assert [a for a in argv if a.startswith("--allowedTools=")] == ["--allowedTools=Read,mcp__db"]
    home = tmp_path.resolve()  # the built-in protected paths follow (the settings files among them)
    denied = next(a for a in argv if a.startswith("--disallowedTools=")).split("=", 1)[1].split(",")
    assert denied[0] == "Bash(rm *)"
    assert f"Edit(/{home}/.claude/settings.json)" in denied and f"Edit(/{home}/.claude/settings.local.json)" in denied
    from claudeguard.home import default_root

    runtime = default_root("/tmp", {"HOME": str(tmp_path)})  # its HOME's runtime dir (not made by a dry run)
    # the config's dir (which holds the config) and the runtime dir, each one rule: no //dir/** twin
    assert f"Edit(/{home}/xdg/claudeguard)" in denied and f"Read(/{runtime})" in denied
    assert not any(rule.endswith("/**)") for rule in denied), denied


# --- who asks in -p, per real CLI version (plan/hooks.print_asker) -----------------------------


def _plan(tmp_path, cli: str, *argv: str, service: bool = True) -> tuple[list[str], dict]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "CLAUDEGUARD_CLAUDE": cli, "CLAUDEGUARD_SERVICE": "1" if service else "0"}
    proc = subprocess.run(GUARD + ["--guard-dry-run", *argv], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["argv"]
    [settings] = [json.loads(a.split("=", 1)[1]) for a in out if a.startswith("--settings=")]
    return out, settings


def _ours(argv: list[str]) -> list[str]:
    """The guard's prompt-tool flags in an argv (the MCP config and the tool's name)."""
    return [a.split("=", 1)[0] for a in argv if a.startswith(("--mcp-config=", "--permission-prompt-tool="))]


@pytest.mark.newest_cli
@pytest.mark.parametrize("service", [True, False], ids=["http", "command"])
def test_the_plan_of_a_print_run_on_each_real_cli(tmp_path, real_claude, cli_version, service):
    # The version is read from the real CLI's package.json (the dry run starts no CLI).
    argv, settings = _plan(tmp_path, str(real_claude), "-p", "x", service=service)
    if version_at_least(cli_version, PERMISSION_REQUEST_IN_PRINT):
        # its -p asks the PermissionRequest hook: registered, and no MCP server for the CLI to wait for
        assert list(settings["hooks"]) == [e for e in EVERY_EVENT
                                           if e not in ("Notification", "UserPromptSubmit", *CALL_ENDS, "Stop")]
        assert _ours(argv) == []
        entry = settings["hooks"]["PermissionRequest"][0]["hooks"][0]
        assert entry["type"] == ("http" if service else "command"), entry
    else:
        assert list(settings["hooks"]) == PRINT_KEPT_EVENTS
        assert _ours(argv) == ["--mcp-config", "--permission-prompt-tool"]
        assert "--permission-prompt-tool=mcp__claudeguard__approve" in argv
    # a caller's prompt tool (the Agent SDK's stdio): neither the hook nor our prompt tool
    argv, settings = _plan(tmp_path, str(real_claude), "-p", "x", "--permission-prompt-tool", "stdio",
                           service=service)
    assert list(settings["hooks"]) == PRINT_KEPT_EVENTS and _ours(argv) == []
    assert argv.count("--permission-prompt-tool") == 1 and argv[argv.index("--permission-prompt-tool") + 1] == "stdio"
    # nobody asks: the CLI denies what it would ask about (2.1.330 on; 2.1.197 has no such option:
    # its table reads it as unknown, and the guard still asks)
    argv, settings = _plan(tmp_path, str(real_claude), "-p", "x", "--permission-prompts", "none", service=service)
    if cli_version == "2.1.197":
        assert _ours(argv) == ["--mcp-config", "--permission-prompt-tool"]
    else:
        assert list(settings["hooks"]) == PRINT_KEPT_EVENTS and _ours(argv) == []


def _npm_cli(tmp_path, version: str) -> str:
    """A stand-in CLI in an npm layout whose package.json says ``version``."""
    package = tmp_path / f"v{version}" / "node_modules" / "@anthropic-ai" / "claude-code"
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code", "version": version}))
    (package / "cli.js").write_text("#!/bin/sh\n")
    (package / "cli.js").chmod(0o755)
    link = tmp_path / f"v{version}" / "node_modules" / ".bin"
    link.mkdir()
    (link / "claude").symlink_to(package / "cli.js")
    return str(link / "claude")


@pytest.mark.parametrize(("version", "asks"), [("2.1.329", "prompt tool"), ("2.1.330", "hook"),
                                               ("2.2.0-beta.1", "hook"), ("10.0.0", "hook"), (None, "prompt tool")])
def test_the_asker_follows_the_version_and_an_unknown_version_keeps_the_prompt_tool(tmp_path, version, asks):
    cli = _npm_cli(tmp_path, version) if version else "/bin/true"
    argv, settings = _plan(tmp_path, cli, "-p", "x")
    assert ("PermissionRequest" in settings["hooks"]) == (asks == "hook")
    assert _ours(argv) == ([] if asks == "hook" else ["--mcp-config", "--permission-prompt-tool"])
    # interactive sessions are not concerned: every event, no prompt tool, whatever the version
    argv, settings = _plan(tmp_path, cli, "fix the tests")
    assert list(settings["hooks"]) == EVERY_EVENT and _ours(argv) == []


def test_the_session_snapshot_names_the_asker(tmp_path, monkeypatch):
    from claudeguard.config.load import load_config
    from claudeguard.plan.claude_args import parse_claude_args
    from claudeguard.plan.session import session_snapshot

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    cfg = load_config(tmp_path)
    cases = {(("-p", "x"), "2.1.330"): "permission-request", (("-p", "x"), "2.1.197"): "prompt-tool",
             (("-p", "x"), None): "prompt-tool",
             (("-p", "x", "--permission-prompt-tool", "stdio"), "2.1.330"): "caller",
             (("-p", "x", "--permission-prompts", "none"), "2.1.330"): "none", (("x",), "2.1.330"): None}
    for (argv, version), asker in cases.items():
        snapshot = session_snapshot(cfg, parse_claude_args(list(argv)), session_id="s", cwd=str(tmp_path),
                                    interactive=False, cli_version=version)
        assert snapshot["asker"] == asker, (argv, version)
