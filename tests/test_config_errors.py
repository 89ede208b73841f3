"""A config file's mistakes all at once, each with its file:line: rules naming a tool no Claude
Code has (with the nearest name), durations where seconds are (and a bad one), lockdown's
refusals; and the same lines from the commands and the launcher, which starts nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from claudeguard.config.durations import seconds
from claudeguard.config.load import Overrides, Sourced, env_overrides, load_config, parse_value
from claudeguard.errors import ConfigError

from tests.shim_helpers import CTL

KNOWN_WATCHDOG = "kill_grace, on_stall, sample_interval, stall_after, tool_stall_after"
TYPOS = """\
[permissions]
allow = ["Bsh(ls *)", "bash(git log)", "Webfetch", "Reed(./src/**)", "Bash(git status)"]
deny = ["Bash(rm -rf *)"]

[approval]
timeout = "10 minutes"

[watchdog]
stall_after = "5m"
stal_after = 3
on_stall = "explode"
"""


def expected_typos(path: Path) -> list[str]:
    return [
        f"{path}:2: bad rule 'Bsh(ls *)' in 'permissions.allow': 'Bsh' is not a Claude Code tool: did you mean Bash?",
        f"{path}:2: bad rule 'bash(git log)' in 'permissions.allow': 'bash' is not a Claude Code tool: did you mean "
        f"Bash? (tool names are matched exactly, as Claude Code matches them: bash matches no call)",
        f"{path}:2: bad rule 'Webfetch' in 'permissions.allow': 'Webfetch' is not a Claude Code tool: did you mean "
        f"WebFetch? (tool names are matched exactly, as Claude Code matches them: Webfetch matches no call)",
        f"{path}:2: bad rule 'Reed(./src/**)' in 'permissions.allow': 'Reed' is not a Claude Code tool: did you "
        f"mean Read?",
        f"{path}:6: 'approval.timeout' must be a number of seconds or a duration such as 90s, 10m, 1h or 1h30m, "
        f"not '10 minutes'",
        f"{path}:10: unknown key 'watchdog.stal_after' (known here: {KNOWN_WATCHDOG})",
        f"{path}:11: 'watchdog.on_stall' is 'explode'; expected one of: warn, interrupt, kill",
    ]


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in ("CLAUDEGUARD_CONFIG", "CLAUDEGUARD_PROFILE", "CLAUDEGUARD_STALL_AFTER", "CLAUDEGUARD_ON_STALL",
                "CLAUDEGUARD_APPROVAL_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    user = tmp_path / "xdg" / "claudeguard" / "config.toml"
    user.parent.mkdir(parents=True)
    return user, project


def test_every_mistake_of_a_file_comes_at_once_in_line_order(env):
    user, project = env
    user.write_text(TYPOS)
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value).splitlines() == expected_typos(user)


def test_the_mistakes_of_every_file_come_together(env, tmp_path):
    user, project = env
    user.write_text('[approval]\ntimeout = "soon"\n')
    proj = project / ".claudeguard.toml"
    proj.write_text('[permissions]\nask = ["Bash(git push *)"]\ndeny = [\n  "WebFech(domain:x.com)",\n]\n'
                    "[agents.Explore]\nallow = ['Gerp']\n[profiles.ci.watchdog]\nstall_after = 'forever'\n")
    extra = tmp_path / "extra.toml"
    extra.write_text("[approval\n")
    with pytest.raises(ConfigError) as info:
        load_config(project, Overrides(extra_files=[Sourced(str(extra), "--guard-config")]))
    assert str(info.value).splitlines() == [
        f"{extra}:1: invalid TOML: Expected ']' at the end of a table declaration (column 10)",
        f"{user}:2: 'approval.timeout' must be a number of seconds or a duration such as 90s, 10m, 1h or 1h30m, "
        f"not 'soon'",
        f"{proj}:4: bad rule 'WebFech(domain:x.com)' in 'permissions.deny': 'WebFech' is not a Claude Code tool: "
        f"did you mean WebFetch?",
        f"{proj}:7: bad rule 'Gerp' in 'agents.Explore.allow': 'Gerp' is not a Claude Code tool: did you mean Grep?",
        f"{proj}:9: 'watchdog.stall_after' must be a number of seconds or a duration such as 90s, 10m, 1h or "
        f"1h30m, not 'forever'",
    ]


def test_blocked_tools_are_tool_names_too(env):
    user, project = env
    user.write_text('[subagents]\nblocked_tools = ["Agent", "AskUserQuestoin"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == (f"{user}:2: bad rule 'AskUserQuestoin' in 'subagents.blocked_tools': "
                               f"'AskUserQuestoin' is not a Claude Code tool: did you mean AskUserQuestion?")


def test_every_tool_of_every_cli_and_every_mcp_name_is_accepted(env):
    user, project = env
    user.write_text('[permissions]\nallow = ["Task(Explore)", "KillShell", "LS", "CronCreate", "ToolSearch", '
                    '"mcp__github", "mcp__github__*", "mcp__github__create_issue", "Monitor"]\n')
    cfg = load_config(project)
    assert len(cfg.rules["permissions.allow"]) == 9


def test_durations_where_seconds_are(env):
    user, project = env
    user.write_text('[approval]\ntimeout = "10m"\nidle_before_channel = "90s"\n[watchdog]\nstall_after = "5m"\n'
                    'tool_stall_after = "1h"\nkill_grace = 2\n[profiles.ci.approval]\ntimeout = "1h30m"\n')
    cfg = load_config(project)
    assert cfg.approval() == {"timeout": 600.0, "on_timeout": "deny", "notify": [], "idle_before_channel": 90.0}
    watchdog = cfg.watchdog()
    assert (watchdog["stall_after"], watchdog["tool_stall_after"], watchdog["kill_grace"]) == (300.0, 3600.0, 2)
    assert cfg.source("approval.timeout") == f"{user}:2"
    profiled = load_config(project, Overrides(profile=Sourced("ci", "--guard-profile")))
    assert profiled.approval()["timeout"] == 5400.0 and profiled.source("approval.timeout") == f"{user}:9"


def test_a_duration_below_the_minimum_is_refused_with_its_line(env):
    user, project = env
    user.write_text('[watchdog]\n\nstall_after = "0s"\n')
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == f"{user}:3: 'watchdog.stall_after' must be at least 0.001"


def test_durations_in_the_variables_and_options(monkeypatch):
    monkeypatch.setenv("CLAUDEGUARD_STALL_AFTER", "5m")
    monkeypatch.setenv("CLAUDEGUARD_APPROVAL_TIMEOUT", "90s")
    values = env_overrides().values
    assert values["watchdog.stall_after"] == Sourced(300.0, "env CLAUDEGUARD_STALL_AFTER")
    assert values["approval.timeout"] == Sourced(90.0, "env CLAUDEGUARD_APPROVAL_TIMEOUT")
    assert parse_value("approval.timeout", "1h", "--guard-approval-timeout") == 3600.0
    assert parse_value("approval.timeout", "12.5", "--guard-approval-timeout") == 12.5  # plain numbers: seconds
    with pytest.raises(ConfigError) as info:
        parse_value("watchdog.stall_after", "5 min", "--guard-stall-after")
    assert str(info.value) == ("--guard-stall-after: expected a number of seconds or a duration such as 90s, 10m, "
                               "1h or 1h30m, got '5 min'")


@pytest.mark.parametrize("text, value", [("90s", 90), ("10m", 600), ("1h", 3600), ("1h30m", 5400), ("1.5h", 5400),
                                         ("7d", 604800), ("2w", 1209600), ("45", 45), ("0.5", 0.5), ("10M", 600)])
def test_the_duration_grammar(text, value):
    assert seconds(text) == value


@pytest.mark.parametrize("text", ["", "m", "10x", "10 m", "1h 30m", ".5m", "5m3", "-5m", "1..5m"])
def test_what_is_no_duration(text):
    with pytest.raises(ValueError):
        seconds(text)


def test_lockdown_refuses_every_loosening_of_a_file_at_once(env, tmp_path):
    user, project = env
    user.write_text("[security]\ndisable_bypass_permissions = true\n")
    extra = tmp_path / "caller.toml"
    extra.write_text('[permissions]\nmode = "bypassPermissions"\nallow = ["Bash(curl *)"]\n'
                     '[approval]\non_timeout = "allow"\n')
    with pytest.raises(ConfigError) as info:
        load_config(project, Overrides(extra_files=[Sourced(str(extra), "--guard-config")]))
    lockdown = f"lockdown ({user}:2; only the user's own config file may loosen)"
    assert str(info.value).splitlines() == [
        f"{extra}:3: allow rule 'Bash(curl *)' in [permissions] loosens the guard: refused by {lockdown}",
        f"{extra}:2: lockdown: permissions.mode = \"bypassPermissions\" is refused",
        f"{extra}:5: approval.on_timeout = \"allow\" loosens the guard: refused by {lockdown}",
    ]


# --- the commands ---------------------------------------------------------------------------------


def _ctl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "proj" / ".git").mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "XDG_STATE_HOME": str(tmp_path / "state"), "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"),
           "CLAUDEGUARD_AUTO_VERIFY": "0"}
    return subprocess.run(CTL + list(args), env=env, cwd=tmp_path / "proj", capture_output=True, text=True,
                          timeout=60)


def test_config_show_and_doctor_say_every_mistake(env, tmp_path):
    user, _ = env
    user.write_text(TYPOS)
    shown = _ctl(tmp_path, "config", "show")
    assert shown.returncode == 2 and shown.stdout == ""
    assert shown.stderr.splitlines() == [f"claudeguardctl: {line}" for line in expected_typos(user)]
    doctor = _ctl(tmp_path, "doctor")
    assert doctor.returncode == 1
    assert [ln for ln in doctor.stdout.splitlines() if ln.startswith("FAIL")] == [
        f"FAIL  config: {line}" for line in expected_typos(user)]


def test_config_show_gives_durations_in_seconds_with_their_line(env, tmp_path):
    user, _ = env
    user.write_text('[approval]\ntimeout = "10m"\n')
    shown = _ctl(tmp_path, "config", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["values"]["approval.timeout"] == {"value": 600.0, "source": f"{user}:2"}


def test_explain_refuses_a_call_no_claude_code_makes(env, tmp_path):
    proc = _ctl(tmp_path, "explain", "bash(git log)")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("claudeguardctl: cannot read the call 'bash(git log)': 'bash' is not a Claude Code "
                           "tool: did you mean Bash? (tool names are matched exactly, as Claude Code matches them: "
                           "bash matches no call)\n")




def test_a_tool_a_cli_newer_than_every_table_adds_is_read_from_the_installed_cli(env, tmp_path, monkeypatch):
    from claudeguard.cli_tables import tools

    user, project = env
    user.write_text('[permissions]\ndeny = ["BrandNewTool"]\n')
    monkeypatch.delenv("CLAUDEGUARD_CLAUDE", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(ConfigError, match=r":2: bad rule 'BrandNewTool' in 'permissions.deny': 'BrandNewTool' is "
                                          r"not a Claude Code tool"):
        load_config(project)
    # a CLI whose binary lists it, as 2.1.330 and later keep their list (cli_tables.tools)
    shim, real = tmp_path / "shim", tmp_path / "cli"
    shim.mkdir()
    real.mkdir()
    (shim / "claude").write_text("#!/bin/sh\nexec claudeguard \"$@\"\n")  # a launcher: names no tool
    (real / "claude").write_bytes(b'\x7fELF...var a1=["Agent","Bash","BrandNewTool","Read"],b2={Task:"Agent",'
                                  b'KillShell:"TaskStop"};function f(){}...')
    for f in (shim / "claude", real / "claude"):
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{real}:/usr/bin:/bin")
    tools._SEEN.clear()
    assert [r.rule for r in load_config(project).rules["permissions.deny"]] == ["BrandNewTool"]
    assert tools.installed_names() == {"Agent", "Bash", "BrandNewTool", "Read", "Task", "KillShell", "TaskStop"}
