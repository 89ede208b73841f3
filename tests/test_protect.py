"""The built-in protected-paths rule (issue 24 part 2): no reading tool of the runtime dir or a
secret; no writing tool, and no Bash command the parser sees, on the guard's own files and the
Claude Code settings a session re-reads. For every agent, in every mode, whatever the config
allows; `explain` shows it with its reason."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from claudeguard.paths import guard_paths
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.settings_sources import protected_spec
from claudeguard.policy.bash.judge import PROTECTED_SOURCE
from claudeguard.policy.decide import decide, policy_from_spec
from claudeguard.policy.protect import SOURCE
from tests.shim_helpers import CTL

LOOSE = {"allow": ["Bash", "Read", "Write", "Edit", "Grep", "Glob", "NotebookEdit", "Monitor"]}


@pytest.fixture
def world(tmp_path):
    home, work, rt = tmp_path / "home", tmp_path / "work", tmp_path / "rt"
    (work / ".git").mkdir(parents=True)
    rt.mkdir()
    (rt / "sessions" / "s1").mkdir(parents=True)
    (rt / "sessions" / "s1" / "mcp.json").write_text("{}")
    env = {"HOME": str(home), "CLAUDEGUARD_RUNTIME_DIR": str(rt), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_STATE_HOME": str(home / ".local" / "state"), "CLAUDEGUARD_CONFIG": str(tmp_path / "extra.toml")}
    spec = {"permissions": {k: [{"rule": r, "source": "t:1", "root": str(work)} for r in v] for k, v in LOOSE.items()},
            "agents": {"scribe": {"replace": True, "allow": [{"rule": "Write", "source": "t:2", "root": str(work)}],
                                  "deny": [], "ask": []}},
            "protected": protected_spec(parse_claude_args(["-p", "x"]), str(work), env)}
    return policy_from_spec(spec), work, home, rt, tmp_path


def verdict(world, tool, tool_input, agent=None, mode=None):  # type: ignore[no-untyped-def]
    policy, work, home, _, _ = world
    return decide(policy, tool, tool_input, agent_type=agent, cwd=str(work), home=str(home), mode=mode)


def test_the_guard_paths_of_an_environment():
    env = {"HOME": "/h", "CLAUDEGUARD_RUNTIME_DIR": "/r", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s",
           "CLAUDEGUARD_CONFIG": "/x.toml", "CLAUDEGUARD_LOG_DIR": "/l"}
    found = guard_paths(env)
    assert (found.runtime, found.config_dir, found.config_file, found.extra_config, found.log_dir, found.state_dir) == (
        "/r", "/c/claudeguard", "/c/claudeguard/config.toml", "/x.toml", "/l", "/s/claudeguard")
    base = f"/tmp/claudeguard-{os.getuid()}"  # this user's other homes' runtime dirs (issue 36)
    assert [p for p, _ in found.reads()] == ["/r", base, base + "-*"]
    assert [p for p, _ in found.writes()] == ["/c/claudeguard/config.toml", "/c/claudeguard", "/x.toml", "/l",
                                               "/s/claudeguard"]
    assert guard_paths({"HOME": "/h"}).log_dir == "/h/.local/state/claudeguard/log"


@pytest.mark.parametrize("agent", [None, "scribe", "Explore"])
@pytest.mark.parametrize("mode", [None, "acceptEdits", "bypassPermissions"])
def test_no_reading_tool_reads_the_runtime_dir_or_another_process_environment(world, agent, mode):
    _, work, home, rt, _ = world
    for tool, tool_input in [
        ("Read", {"file_path": str(rt / "sessions" / "s1" / "mcp.json")}),
        ("Read", {"file_path": "/proc/self/environ"}),
        ("Read", {"file_path": "/proc/1/environ"}),
        ("NotebookRead", {"notebook_path": str(rt / "x.ipynb")}),
        ("Grep", {"pattern": "Bearer", "path": str(rt.parent)}),  # a search above it reads it
        ("Glob", {"pattern": f"{rt}/**/*.json"}),
        ("LS", {"path": str(rt / "sessions")}),
        ("SomeNewReader", {"filePath": str(rt / "x")}),
    ]:
        d = verdict(world, tool, tool_input, agent, mode)
        assert d.decision == "deny", (tool, tool_input, d.reason)
        assert d.source == SOURCE and d.rule.startswith("protected path ")
        assert "which no tool may read or change" in d.reason


def test_reading_the_users_config_is_allowed_but_writing_it_is_not(world):
    _, work, home, rt, tmp = world
    config = home / ".config" / "claudeguard" / "config.toml"
    assert verdict(world, "Read", {"file_path": str(config)}).decision == "allow"
    assert verdict(world, "Glob", {"pattern": "/tmp/**"}).decision == "allow"  # names only, not a search of contents


@pytest.mark.parametrize("mode", [None, "acceptEdits", "bypassPermissions"])
def test_no_writing_tool_changes_the_guards_files_or_the_settings(world, mode):
    _, work, home, rt, tmp = world
    targets = [home / ".config" / "claudeguard" / "config.toml", home / ".config" / "claudeguard" / "ci.toml",
               tmp / "extra.toml", home / ".local" / "state" / "claudeguard" / "log" / "audit.jsonl",
               home / ".local" / "state" / "claudeguard" / "trust.json", rt / "sessions" / "s1" / "grants.jsonl",
               work / ".claude" / "settings.json", work / ".claude" / "settings.local.json",
               home / ".claude" / "settings.json", work / ".claude" / "worktrees" / "w1" / ".claude" / "settings.json",
               work / ".git" / "hooks" / "pre-commit", work / ".git" / "config"]
    for target in targets:
        for tool, tool_input in [("Write", {"file_path": str(target), "content": "x"}),
                                 ("Edit", {"file_path": str(target), "old_string": "a", "new_string": "b"}),
                                 ("MultiEdit", {"file_path": str(target), "edits": []}),
                                 ("NotebookEdit", {"notebook_path": str(target), "new_source": "x"})]:
            for agent in (None, "scribe"):
                d = verdict(world, tool, tool_input, agent, mode)
                assert d.decision == "deny", (tool, target, d.reason)
                assert d.source == SOURCE
    assert verdict(world, "Write", {"file_path": str(work / "notes.txt"), "content": "x"}).decision == "allow"
    assert verdict(world, "Write", {"file_path": str(work / ".claudeguard.toml"), "content": "x"}).decision == "allow"


def test_a_link_to_a_protected_file_is_the_file(world):
    _, work, home, rt, _ = world
    os.symlink(rt, work / "innocent")
    assert verdict(world, "Read", {"file_path": str(work / "innocent" / "sessions" / "s1" / "mcp.json")}
                   ).decision == "deny"
    (work / ".claude").mkdir()
    os.symlink(work / ".claude" / "settings.local.json", work / "notes.json")
    assert verdict(world, "Write", {"file_path": str(work / "notes.json"), "content": "{}"}).decision == "deny"


@pytest.mark.parametrize("command", [
    "cat {rt}/sessions/s1/mcp.json", "grep -r Bearer {rt}", "cp {rt}/sessions/s1/mcp.json /tmp/x",
    "echo '{{}}' > .claude/settings.local.json", "tee -a .claude/settings.json < /dev/null",
    "sed -i s/a/b/ .claude/settings.json", "cp evil.json .claude/settings.local.json", "mv x .claude/settings.json",
    "rm -rf .claude", "mv .claude elsewhere", "cp -r other/.claude .",
    "echo x >> {home}/.config/claudeguard/config.toml",
    "python3 evil.py > {tmp}/extra.toml", "cat /proc/1/environ", "rm -rf {home}/.local/state/claudeguard",
    "bash -c 'echo allow > .claude/settings.json'", "ln -sf /tmp/evil .claude/settings.json",
    "cp evil.sh .git/hooks/pre-commit", "echo '[core] fsmonitor = ./x' >> .git/config",
])
def test_no_bash_command_the_parser_sees_reads_or_writes_them(world, command):
    _, work, home, rt, tmp = world
    line = command.format(rt=rt, home=home, tmp=tmp)
    for mode in (None, "acceptEdits", "bypassPermissions"):
        d = verdict(world, "Bash", {"command": line}, mode=mode)
        assert d.decision == "deny", (line, d.reason)
        assert d.source == PROTECTED_SOURCE == SOURCE
    d = verdict(world, "Monitor", {"command": line})
    assert d.decision == "deny", line


@pytest.mark.parametrize("command", ["cat .claude/settings.json", "cp a b .", "git status", "ls /tmp",
                                     "cat ~/.config/claudeguard/config.toml", "echo x > notes.txt"])
def test_ordinary_commands_stay_allowed(world, command):
    assert verdict(world, "Bash", {"command": command}).decision == "allow", command


def test_no_config_loosens_it(world):
    _, work, home, rt, _ = world
    spec = {"permissions": {"allow": [{"rule": f"Read(/{rt}/**)", "source": "t", "root": str(work)},
                                      {"rule": "Bash(cat *)", "source": "t", "root": str(work)}]},
            "protected": {"reads": [[str(rt), "the runtime dir"]], "writes": []}}
    policy = policy_from_spec(spec)
    assert decide(policy, "Read", {"file_path": str(rt / "x")}, agent_type=None, cwd=str(work)).decision == "deny"
    assert decide(policy, "Bash", {"command": f"cat {rt}/x"}, agent_type=None, cwd=str(work)).decision == "deny"
    # /proc/*/environ is built in even without a spec
    assert decide(policy_from_spec({}), "Read", {"file_path": "/proc/2/environ"}, agent_type=None,
                  cwd=str(work)).decision == "deny"


def test_explain_shows_it_with_its_reason(tmp_path):
    (tmp_path / ".git").mkdir()
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               CLAUDEGUARD_RUNTIME_DIR=str(tmp_path / "rt"), XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("CLAUDEGUARD_CONFIG", None)
    target = tmp_path / "cfg" / "claudeguard" / "config.toml"
    proc = subprocess.run(CTL + ["explain", f"Write({target})"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:4] == [
        f"deny: Write({target}) (main agent)",
        f"  rule:   protected path {target}",
        f"  source: {SOURCE}",
        f"  why:    Write writes {target}: the user's claudeguard config file, which no tool may change ({SOURCE}).",
    ]
    out = json.loads(subprocess.run(CTL + ["explain", "--json", f"Bash(cat {tmp_path}/rt/x)"], env=env, cwd=tmp_path,
                                    capture_output=True, text=True, timeout=60).stdout)
    assert out["decision"] == "deny" and out["rule"] == f"protected path {tmp_path}/rt" and out["source"] == SOURCE
    assert out["reason"].endswith("the guard's runtime dir (sessions, hook secrets, the approval channel).")


def test_no_reading_tool_reads_another_home_s_runtime_dir(world):
    """Issue 36: another HOME's runtime dir (/tmp/claudeguard-<uid>-<key>) holds that home's hook
    secrets: refused like this home's own, made before the session or after it."""
    for path in (f"/tmp/claudeguard-{os.getuid()}-0123456789ab/sessions/s/settings.json",
                 f"/tmp/claudeguard-{os.getuid()}/sessions/s/mcp.json"):
        d = verdict(world, "Read", {"file_path": path})
        assert d.decision == "deny" and d.source == SOURCE, (path, d.reason)
        assert "another home's guard runtime dir" in f"{d.rule} {d.reason}", (path, d.rule, d.reason)
