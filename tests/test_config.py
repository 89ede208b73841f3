"""Config layering, validation messages with file:line, lockdown rules, and tomlkit write-back."""

from __future__ import annotations

import os

import pytest

from claudeguard.config.load import Overrides, Sourced, load_config
from claudeguard.config.trust import record
from claudeguard.config.write import STARTER, add_rule, write_starter
from claudeguard.errors import ConfigError


@pytest.fixture
def env(tmp_path, monkeypatch):
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the trust records
    for var in ("CLAUDEGUARD_CONFIG", "CLAUDEGUARD_PROFILE", "CLAUDEGUARD_STALL_AFTER", "CLAUDEGUARD_ON_STALL",
                "CLAUDEGUARD_APPROVAL_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    user = xdg / "claudeguard" / "config.toml"
    user.parent.mkdir(parents=True)
    return user, project


def test_defaults_without_files(env):
    user, project = env
    cfg = load_config(project)
    assert cfg.get("approval.timeout") == 600
    assert cfg.source("approval.timeout") == "default"
    assert cfg.get("subagents.blocked_tools")[0] == "Agent"
    assert cfg.lockdown.value is False


def test_layers_override_and_rules_extend(env, tmp_path):
    user, project = env
    user.write_text('[permissions]\nallow = ["Bash(git status)"]\n[approval]\ntimeout = 100\n')
    (project / ".claudeguard.toml").write_text('[permissions]\nallow = ["Read"]\n\n[approval]\ntimeout = 50\n')
    record([str(project / ".claudeguard.toml")])  # its allow rule applies once trusted
    extra = tmp_path / "extra.toml"
    extra.write_text("[approval]\ntimeout = 7\n")
    cfg = load_config(project / "sub", Overrides(extra_files=[Sourced(str(extra), "--guard-config")]))
    assert [r.rule for r in cfg.rules["permissions.allow"]] == ["Bash(git status)", "Read"]
    assert cfg.rules["permissions.allow"][1].source == f"{project / '.claudeguard.toml'}:2"
    assert cfg.get("approval.timeout") == 7
    assert cfg.source("approval.timeout") == f"{extra}:2"


def test_replace_true_drops_earlier_rules(env):
    user, project = env
    user.write_text('[permissions]\nallow = ["Bash(git status)"]\n')
    (project / ".claudeguard.toml").write_text('[permissions]\nreplace = true\nallow = ["Read"]\n')
    record([str(project / ".claudeguard.toml")])
    cfg = load_config(project)
    assert [r.rule for r in cfg.rules["permissions.allow"]] == ["Read"]


def test_profile_layer(env):
    user, project = env
    user.write_text('[profiles.ci]\npermissions.mode = "dontAsk"\n[profiles.ci.watchdog]\non_stall = "kill"\n')
    cfg = load_config(project, Overrides(profile=Sourced("ci", "--guard-profile")))
    assert cfg.get("permissions.mode") == "dontAsk"
    assert cfg.source("permissions.mode") == f"{user}:2"
    assert cfg.get("watchdog.on_stall") == "kill"
    with pytest.raises(ConfigError, match="profile 'nope'"):
        load_config(project, Overrides(profile=Sourced("nope", "--guard-profile")))


def test_command_line_overrides_win(env):
    user, project = env
    user.write_text("[watchdog]\nstall_after = 10\n")
    cfg = load_config(project, Overrides(values={"watchdog.stall_after": Sourced(3.0, "--guard-stall-after")}))
    assert cfg.get("watchdog.stall_after") == 3.0
    assert cfg.source("watchdog.stall_after") == "--guard-stall-after"


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[approval]\ntimeout = "soon"\n', r":2: 'approval.timeout' must be a number"),
        ("[approval]\n\ntimeouts = 3\n", r":3: unknown key 'approval.timeouts'"),
        ("[bogus]\nx = 1\n", r":1: unknown key 'bogus'"),
        ('[watchdog]\non_stall = "explode"\n', r":2: 'watchdog.on_stall' is 'explode'; expected one of"),
        ("[permissions]\nallow = [\n  'Read',\n  3,\n]\n", r":2: 'permissions.allow' must be a list of rule strings"),
        ("[approval]\ntimeout = = 3\n", r":2: invalid TOML"),
        ('[agents.Explore]\nallow = ["Read"]\nfoo = 1\n', r":3: unknown key 'agents.Explore.foo'"),
        ('[profiles.ci]\nsecurity.disable_bypass_permissions = false\n', r":2: unknown key 'profiles.ci.security'"),
        ("[approval]\ntimeout = -1\n", r":2: 'approval.timeout' must be at least"),
    ],
)
def test_validation_errors_name_file_and_line(env, text, expected):
    user, project = env
    user.write_text(text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(project)
    assert str(info.value).startswith(str(user))
    assert "\n" not in str(info.value)


def test_bad_rule_string_names_its_line(env):
    user, project = env
    user.write_text('[permissions]\ndeny = [\n  "Read",\n  "Bash(unclosed",\n]\n')
    with pytest.raises(ConfigError, match=r"config.toml:4: bad rule 'Bash\(unclosed'"):
        load_config(project)


def test_unreadable_file_is_an_error_missing_is_fine(env, tmp_path):
    user, project = env
    assert load_config(project).searched[0] == ("user", user, False)
    if os.getuid() != 0:
        user.write_text("[approval]\n")
        user.chmod(0)
        with pytest.raises(ConfigError, match="cannot read"):
            load_config(project)
        user.chmod(0o600)
    user.unlink(missing_ok=True)
    user.mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(project)
    user.rmdir()
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(project, Overrides(extra_files=[Sourced(str(tmp_path / "missing.toml"), "--guard-config")]))


def test_project_file_may_not_set_security(env):
    user, project = env
    (project / ".claudeguard.toml").write_text("[security]\ndisable_bypass_permissions = false\n")
    with pytest.raises(ConfigError, match=r"\.claudeguard\.toml:1: \[security\] may only be set"):
        load_config(project)


def test_lockdown_refuses_project_dropping_denies_and_bypass_mode(env, tmp_path):
    user, project = env
    user.write_text('[security]\ndisable_bypass_permissions = true\n[permissions]\ndeny = ["Bash(rm *)"]\n')
    proj = project / ".claudeguard.toml"
    proj.write_text('[permissions]\nreplace = true\nallow = ["Read"]\n')
    record([str(proj)])  # trusted or not: under lockdown only the user's own file may loosen
    with pytest.raises(ConfigError, match=r":2: replace = true in \[permissions\] loosens the guard: refused by "
                                          r"lockdown \(.*config.toml:2; only the user's own config file may loosen\)"):
        load_config(project)
    proj.write_text('[permissions]\nmode = "bypassPermissions"\n')
    with pytest.raises(ConfigError, match=r":2: lockdown"):
        load_config(project)
    proj.unlink()  # a trusted file gone: its rules bind, and lockdown refuses until the trust is revoked
    with pytest.raises(ConfigError, match="was removed since you trusted it"):
        load_config(project)
    from claudeguard.config.trust import revoke

    assert revoke([str(proj)]) == [str(proj.resolve())]
    extra = tmp_path / "loosen.toml"
    extra.write_text("[security]\ndisable_bypass_permissions = false\n")
    with pytest.raises(ConfigError, match="may not be turned off"):
        load_config(project, Overrides(extra_files=[Sourced(str(extra), "env CLAUDEGUARD_CONFIG")]))
    cfg = load_config(project)
    assert cfg.lockdown.value is True and cfg.lockdown.source == f"{user}:2"


def test_lockdown_from_claudeguard_config_env(env, tmp_path, monkeypatch):
    user, project = env
    locked = tmp_path / "locked.toml"
    locked.write_text("[security]\ndisable_bypass_permissions = true\n")
    monkeypatch.setenv("CLAUDEGUARD_CONFIG", str(locked))
    from claudeguard.config.load import env_overrides

    assert load_config(project, env_overrides()).lockdown.value is True


def test_starter_loads_and_refuses_overwrite(env):
    user, project = env
    write_starter(user)
    cfg = load_config(project)
    assert [r.rule for r in cfg.rules["permissions.ask"]] == ["Bash(git push *)"]
    with pytest.raises(ConfigError, match="already exists"):
        write_starter(user)
    assert user.read_text() == STARTER


def test_add_rule_keeps_comments_and_layout(env):
    user, project = env
    user.write_text('# my notes\n[permissions]  # inline\nallow = ["Read"]  # keep '
                    'me\n\n[approval]\ntimeout = 5 # five\n')
    assert add_rule(user, "allow", "Bash(npm test)") is True
    text = user.read_text()
    assert "# my notes" in text and "# inline" in text and "timeout = 5 # five" in text
    assert add_rule(user, "allow", "Bash(npm test)") is False
    cfg = load_config(project)
    assert [r.rule for r in cfg.rules["permissions.allow"]] == ["Read", "Bash(npm test)"]
    assert cfg.rules["permissions.allow"][1].source.startswith(f"{user}:")


def test_add_rule_creates_missing_file(env, tmp_path):
    target = tmp_path / "new" / "config.toml"
    add_rule(target, "deny", "Bash(curl *)")
    assert 'deny = ["Bash(curl *)"]' in target.read_text()


def test_the_config_the_planner_hands_over_reads_back_as_it_was_read(env):
    """The launcher takes the planner's checked config (``to_wire`` through marshal, then
    ``from_wire``) instead of reading the layers again: every view of it is the same."""
    import marshal

    from claudeguard.config.model import Config

    user, project = env
    user.write_text('[permissions]\nallow = ["Bash(git status)"]\ndeny = ["Bash(rm *)"]\n'
                    '[agents.Explore]\nreplace = true\nask = ["Read(//etc/**)"]\n'
                    '[watchdog]\nstall_after = 42\non_stall = "kill"\n[sandbox]\nallow_write = ["~/cache"]\n'
                    '[profiles.ci]\napproval.timeout = 9\n')
    (project / ".claudeguard.toml").write_text('[permissions]\nallow = ["Bash(make *)"]\n')  # not trusted: left out
    cfg = load_config(project / "sub", Overrides(profile=Sourced("ci", "--guard-profile")))
    assert cfg.untrusted and cfg.rules["agents.Explore.ask"]  # the case is a real one
    back = Config.from_wire(marshal.loads(marshal.dumps(cfg.to_wire())))
    assert back.to_wire() == cfg.to_wire()
    for view in ("policy_spec", "watchdog", "security", "sandbox", "subagents", "untrusted_notes", "agent_types",
                 "fleet_table", "claude_path", "permission_mode"):
        assert getattr(back, view)() == getattr(cfg, view)(), view
    assert back.approval(interactive=False) == cfg.approval(interactive=False)
    assert (back.searched, back.project_root, back.profile, back.lockdown, back.values, back.rules) == \
        (cfg.searched, cfg.project_root, cfg.profile, cfg.lockdown, cfg.values, cfg.rules)
    assert (back.layer_trust, back.binding, back.untrusted) == (cfg.layer_trust, cfg.binding, cfg.untrusted)
    for broken in ({}, {**cfg.to_wire(), "values": {"a": 1}}, {**cfg.to_wire(), "rules": {"permissions.allow": [1]}}):
        with pytest.raises(ValueError, match="not a config"):
            Config.from_wire(broken)  # type: ignore[arg-type]
