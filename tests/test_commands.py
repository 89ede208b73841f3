"""`claudeguardctl explain`, `config show|path|init`, `pending`, `approve` on nothing: outputs as
the contract names them, one-line errors with their exit codes."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.shim_helpers import CTL, plain_env


@pytest.fixture
def env(tmp_path):
    return plain_env(tmp_path, (
        '[permissions]\nallow = ["Bash(git status)", "Read"]\ndeny = ["Bash(git push --force*)", '
        '"Read(//etc/shadow)"]\n'
        'ask = ["Bash(git push *)"]\n\n[agents.Explore]\ndeny = '
        '["WebFetch"]\n\n[profiles.ci]\npermissions.mode = "dontAsk"\n'
    )), tmp_path / "work"


def ctl(env_cwd, *args: str) -> subprocess.CompletedProcess:
    env, cwd = env_cwd
    return subprocess.run(CTL + list(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_explain_json_names_rule_source_and_parts(env):
    out = ctl(env, "explain", "--json", "Bash(git status && git push --force origin)")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["decision"] == "deny" and result["rule"] == "Bash(git push --force*)"
    assert result["source"].endswith("config.toml:3") and result["agent_type"] is None
    assert [(p["part"], p["decision"]) for p in result["parts"]] == [("git status", "allow"),
                                                                     ("git push --force origin", "deny")]


@pytest.mark.parametrize("call, agent, decision", [
    ("Bash(git push origin main)", None, "ask"),
    ("Read(/etc/shadow)", None, "deny"),
    ("Read(/etc/hosts)", None, "allow"),
    ("mcp__github__create_issue", None, "none"),
    ("WebFetch(https://example.com)", "Explore", "deny"),
    ("Agent(general-purpose)", "general-purpose", "deny"),
])
def test_explain_decisions(env, call, agent, decision):
    args = ["explain", "--json", call] + (["--agent", agent] if agent else [])
    out = ctl(env, *args)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["decision"] == decision


def test_explain_junk_is_a_usage_error(env):
    out = ctl(env, "explain", "Bash(unclosed")
    assert out.returncode == 2 and out.stderr.startswith("claudeguardctl: ") and out.stderr.count("\n") == 1


def test_config_show_names_sources_and_profile(env):
    out = ctl(env, "config", "show", "--profile", "ci", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["values"]["permissions.mode"]["value"] == "dontAsk"
    assert data["values"]["permissions.mode"]["source"].endswith("config.toml:10")
    assert data["values"]["approval.timeout"] == {"value": 600.0, "source": "default"}
    assert [r["rule"] for r in data["rules"]["agents.Explore.deny"]] == ["WebFetch"]
    text = ctl(env, "config", "show").stdout
    assert "permissions.allow += 'Bash(git status)'" in text and "config.toml:2" in text


def test_config_path_and_init(env):
    environ, cwd = env
    out = ctl(env, "config", "path")
    assert "user" in out.stdout and "project" in out.stdout and "(not found)" in out.stdout
    assert ctl(env, "config", "init", "--project").returncode == 0
    assert (cwd / ".claudeguard.toml").exists()
    again = ctl(env, "config", "init", "--project")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_bad_config_is_one_line_with_file_and_line(env):
    environ, cwd = env
    (cwd / ".claudeguard.toml").write_text('[approval]\ntimeout = "never"\n')
    out = ctl(env, "config", "show")
    assert out.returncode == 2
    assert out.stderr.strip().endswith("'approval.timeout' must be a number of seconds or a duration such as 90s, "
                                       "10m, 1h or 1h30m, not 'never'")
    assert ".claudeguard.toml:2:" in out.stderr and out.stderr.count("\n") == 1


def test_pending_empty_and_answers_to_nothing(env):
    assert json.loads(ctl(env, "pending", "--json").stdout) == []
    for verb in ("approve", "deny"):
        out = ctl(env, verb, "abcdefabcdefabcd")
        assert out.returncode == 1 and out.stderr.count("\n") == 1
    out = ctl(env, "frobnicate")
    assert out.returncode == 2 and "unknown command" in out.stderr
