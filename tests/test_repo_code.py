"""Repository code (issue 25 "Repository code is code"): what counts, how a session keeps an
untrusted piece from running (the CLI's argv and the guard's settings, as a dry run shows them),
and the lockdown refusal. The real CLIs: test_repo_code_real.py, test_repo_surfaces_real.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from claudeguard.config.trust import Records
from claudeguard.plan.claude_args import parse_claude_args
from claudeguard.plan.repo_code import find, markdown_code, settings_code, treat
from tests.shim_helpers import CTL, GUARD


@pytest.fixture
def repo(tmp_path):
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / ".claude" / "agents").mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "CLAUDEGUARD_CLAUDE": "/bin/true",
           "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "XDG_STATE_HOME": str(tmp_path / "state")}
    return work, env


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_what_counts_as_code():
    assert settings_code({"permissions": {"allow": ["Bash"]}, "model": "x", "enabledMcpjsonServers": ["a"],
                          "disableAllHooks": True}) == []
    assert settings_code({"hooks": {"SessionStart": [{}], "Stop": []}, "statusLine": {"command": "x"},
                          "apiKeyHelper": "x", "env": {"A": "1"}, "enabledPlugins": {"p@m": True},
                          "someFutureKey": 1}) == ["hooks (SessionStart)", "statusLine", "apiKeyHelper", "env",
                                                   "enabledPlugins", "someFutureKey"]
    assert markdown_code("---\nname: x\nhooks:\n  PreToolUse: []\npermissionMode: bypassPermissions\n---\n") == [
        "hooks", "permissionMode bypassPermissions"]
    assert markdown_code("---\nname: x\npermissionMode: plan\n---\nhooks: in the body\n") == []


def test_a_skill_or_command_that_runs_commands_or_grants_tools_is_code():
    shell = "shell commands run as it is invoked (!`...`)"
    assert markdown_code("---\nallowed-tools: Read, Grep, Glob\n---\nLook around.\n") == []
    assert markdown_code("---\nallowed-tools: Bash(git add:*), Read, Bash(echo a, b)\n---\nx\n") == [
        "allowed-tools (Bash(git add:*), Bash(echo a, b))"]
    assert markdown_code("---\nallowed-tools:\n  - Read\n  - 'Write'\ndescription: d\n---\nx\n") == [
        "allowed-tools (Write)"]
    assert markdown_code("---\nallowed-tools: [Edit]\n---\nx\n") == ["allowed-tools (Edit)"]
    assert markdown_code("---\ndescription: d\n---\nStatus: !`git status`\n") == [shell]
    assert markdown_code("No front matter.\n```!\nmake deploy\n```\n") == [shell]
    assert markdown_code("---\ndescription: run !`x` in the front matter only\n---\nplain\n") == []


def test_every_piece_is_found_and_trust_is_by_content(repo):
    work, _ = repo
    settings = _write(work / ".claude" / "settings.json", {"statusLine": {"command": "x"}})
    local = _write(work / ".claude" / "settings.local.json", {"permissions": {"allow": ["Read"]}})
    mcp = _write(work / ".mcp.json", {"mcpServers": {"b": {}, "a": {}}})
    agent = _write(work / ".claude" / "agents" / "x.md", "---\nname: x\nhooks:\n  Stop: []\n---\n")
    skill = _write(work / ".claude" / "skills" / "s" / "SKILL.md", "---\nname: s\nhooks:\n  Stop: []\n---\n")
    args = parse_claude_args(["-p", "x", "--plugin-dir", str(work / "plug")])
    found = find(args, str(work), Records("x", {}))
    assert [(c.path, c.role) for c in found] == [(str(settings), "project"), (str(mcp), "mcp"), (str(agent), "agent"),
                                                 (str(skill), "agent"), (str(work / "plug"), "plugin")]
    assert found[1].names == ["a", "b"] and str(local) not in [c.path for c in found]
    from claudeguard.config.trust import digest

    records = Records("x", {str(settings.resolve()): digest(str(settings)) or ""})
    treated = treat(args, str(work), records)
    assert treated.drop == {"project"}  # the agent files come with the project source
    assert treated.disabled_mcp == ["a", "b"] and treated.plugin_dirs == [str(work / "plug")]


def test_a_dry_run_shows_what_the_cli_gets(repo):
    work, env = repo
    _write(work / ".claude" / "settings.json", {"hooks": {"SessionStart": [{"hooks": [{"command": "x"}]}]},
                                                "permissions": {"deny": ["Read(/secret)"], "ask": ["Bash(git push *)"],
                                                                "allow": ["Bash(npm test)"]}})
    _write(work / ".mcp.json", {"mcpServers": {"srv": {"command": "x"}}})
    proc = subprocess.run(GUARD + ["--guard-dry-run", "-p", "x", "--plugin-dir", "plug", "--setting-sources",
                                   "project,user"], env=env, cwd=work, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)["argv"]
    assert "--plugin-dir" not in argv and "plug" not in argv
    assert argv[argv.index("--setting-sources") + 1] == "user"  # the caller's own value, narrowed where it stands
    settings = json.loads(next(a for a in argv if a.startswith("--settings=")).partition("=")[2])
    assert settings["permissions"] == {"deny": [f"Read(/{work}/secret)"], "ask": ["Bash(git push *)"],
                                       "allow": ["Bash(npm test)"]}  # the dropped file's rules, put back
    assert settings["disabledMcpjsonServers"] == ["srv"]
    assert [line.split(": ")[1] for line in proc.stderr.splitlines()] == [
        str(work / ".claude" / "settings.json"), str(work / ".mcp.json"), str(work / "plug")]
    trusted = subprocess.run(CTL + ["config", "trust", str(work / ".claude" / "settings.json"),
                                    str(work / ".mcp.json"), str(work / "plug")], env=env, cwd=work,
                             capture_output=True, text=True, timeout=60)
    assert trusted.returncode != 0 and "plug: no such file to trust" in trusted.stderr  # nothing half done
    (work / "plug").mkdir()
    assert subprocess.run(CTL + ["config", "trust", str(work / ".claude" / "settings.json"), str(work / ".mcp.json"),
                                 str(work / "plug")], env=env, cwd=work, capture_output=True).returncode == 0
    proc = subprocess.run(GUARD + ["--guard-dry-run", "-p", "x", "--plugin-dir", "plug"], env=env, cwd=work,
                          capture_output=True, text=True, timeout=60)
    argv = json.loads(proc.stdout)["argv"]
    assert proc.stderr == "" and "--plugin-dir" in argv and not any(a.startswith("--setting-sources") for a in argv)


def test_agent_view_hands_the_same_to_what_it_dispatches(repo):
    work, env = repo
    _write(work / ".claude" / "settings.json", {"statusLine": {"command": "x"}})
    proc = subprocess.run(GUARD + ["--guard-dry-run", "agents", "--plugin-dir", "plug"], env=env, cwd=work,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout)["argv"]
    assert "--setting-sources=user,local" in argv and "--plugin-dir" not in argv
    assert proc.stderr.count("repository code not run until you trust it") == 2


def test_lockdown_refuses_the_first_untrusted_piece_with_one_line(repo):
    work, env = repo
    _write(Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml",
           "[security]\ndisable_bypass_permissions = true\n")
    mcp = _write(work / ".mcp.json", {"mcpServers": {"srv": {"command": "x"}}})
    proc = subprocess.run(GUARD + ["-p", "x"], env=env, cwd=work, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == (f"claudeguard: {mcp}: MCP servers (srv): repository code the user has not trusted: refused "
                           f"by lockdown ({env['XDG_CONFIG_HOME']}/claudeguard/config.toml:2); after reviewing it: "
                           f"claudeguardctl config trust {mcp}\n")


def test_every_command_file_is_read(tmp_path):
    from claudeguard.plan.claude_args import parse_claude_args
    from claudeguard.plan.repo_code import agent_files

    (tmp_path / ".git").mkdir()
    commands = tmp_path / ".claude" / "commands" / "deep"
    commands.mkdir(parents=True)
    for i in range(600):
        (commands / f"c{i:03}.md").write_text("plain\n")
    assert len([f for f in agent_files(parse_claude_args(["-p", "x"]), str(tmp_path)) if "/commands/" in f]) == 600
