"""Detection of Claude Code settings that would silence the guard (plan/settings_sources.py),
without the CLI: which sources a run loads and what each key found there leads to. The real-CLI
effects of the same placements are in test_settings_sources_real.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from claudeguard.errors import UsageError
from claudeguard.plan import settings_sources as ss
from claudeguard.plan.claude_args import parse_claude_args


@dataclass
class _Locked:
    value: bool
    source: str = "config.toml:2"


@dataclass
class FakeConfig:
    """What check() reads from a Config."""

    lockdown: _Locked = field(default_factory=lambda: _Locked(False))
    values: dict = field(default_factory=dict)

    def get(self, key: str):  # type: ignore[no-untyped-def]
        return self.values.get(key)

    def permission_mode(self) -> str | None:
        return self.values.get("permissions.mode")

    def security(self) -> dict:
        return {"allow_settings_override": self.values.get("security.allow_settings_override") is True,
                "allow_unguarded": self.values.get("security.allow_unguarded") is True}

    def source(self, key: str) -> str:
        return "config.toml:5"

    def fleet_password_file(self) -> str | None:
        return self.values.get("fleet.password_file")

    def fleet_approver_password_file(self) -> str | None:
        return self.values.get("fleet.approver_password_file")


@pytest.fixture
def place(tmp_path):
    home, work, managed = tmp_path / "home", tmp_path / "work", tmp_path / "managed"
    work.mkdir()
    env = {"HOME": str(home)}

    def put(where: str, data: dict) -> Path:
        path = {"user": home / ".claude" / "settings.json", "project": work / ".claude" / "settings.json",
                "local": work / ".claude" / "settings.local.json", "managed": managed / "managed-settings.json",
                "dropin": managed / "managed-settings.d" / "10-x.json", "configdir": tmp_path / "cfg" / "settings.json",
                "file": tmp_path / "extra.json"}[where]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        return path

    def found(*argv: str, mode: str | None = None, extra_env: dict | None = None) -> list[tuple[str, str, str]]:
        args = parse_claude_args(list(argv) or ["-p", "x"])
        srcs = ss.sources(args, str(work), dict(env, **(extra_env or {})), str(managed))
        return [(f.source, f.key, f.action) for f in ss.findings(args, srcs, mode_chosen=mode)]

    def check(*argv: str, lockdown: bool = False, override: bool = False, mode: str | None = None,  # type: ignore[no-untyped-def]
              extra_env: dict | None = None, unguarded: bool = False):
        cfg = FakeConfig(_Locked(lockdown), {"security.allow_settings_override": override, "permissions.mode": mode,
                                             "security.allow_unguarded": unguarded})
        return ss.check(parse_claude_args(list(argv) or ["-p", "x"]), cfg, str(work),
                        dict(env, **(extra_env or {})), str(managed))

    return put, found, check, tmp_path


OFF = {"disableAllHooks": True}


@pytest.mark.parametrize("where, source",
                         [("user", "user"), ("project", "project"), ("local", "local"), ("managed", "managed"),
                          ("dropin", "managed")])
def test_disable_all_hooks_is_found_in_every_file_source(place, where, source):
    put, found, check, _ = place
    path = put(where, OFF)
    assert found() == [(source, "disableAllHooks", ss.REFUSE)]
    for lockdown in (False, True):
        with pytest.raises(UsageError) as err:
            check(lockdown=lockdown)
        assert str(err.value).startswith(f"{path}: disableAllHooks: silences every hook")
        assert ("lockdown" in str(err.value)) is lockdown


def test_claude_config_dir_replaces_the_home_directory(place):
    put, found, _, tmp = place
    put("user", OFF)
    assert found(extra_env={"CLAUDE_CONFIG_DIR": str(tmp / "cfg")}) == []  # ~/.claude is not read then
    put("configdir", OFF)
    assert found(extra_env={"CLAUDE_CONFIG_DIR": str(tmp / "cfg")}) == [("user", "disableAllHooks", ss.REFUSE)]


def test_setting_sources_leaves_out_project_and_local(place):
    put, found, check, _ = place
    put("project", OFF)
    put("local", OFF)
    assert found("-p", "x", "--setting-sources", "user") == []
    assert check("-p", "x", "--setting-sources=user", lockdown=True) == []
    assert [f[0] for f in found("-p", "x", "--setting-sources", "user,local")] == ["local"]
    assert len(found("-p", "x", "--setting-sources", "bogus")) == 2  # the CLI would exit; fail closed


def test_a_later_false_overrides_and_managed_true_does_not(place):
    put, found, check, tmp = place
    put("project", OFF)
    assert found("-p", "x", "--settings", '{"disableAllHooks": false}') == [("project", "disableAllHooks",
                                                                             ss.OVERRIDDEN)]
    assert check("-p", "x", "--settings", '{"disableAllHooks": false}', lockdown=True) == []
    put("managed", OFF)
    assert ("managed", "disableAllHooks", ss.REFUSE) in found("-p", "x", "--settings", '{"disableAllHooks": false}')


def test_settings_file_and_managed_settings_flag(place):
    put, found, _, tmp = place
    path = put("file", OFF)
    assert found("-p", "x", "--settings", str(path)) == [("--settings", "disableAllHooks", ss.REFUSE)]
    assert found("-p", "x", "--managed-settings", json.dumps({"allowManagedHooksOnly": True})) == [
        ("--managed-settings", "allowManagedHooksOnly", ss.REFUSE)]


def test_managed_only_keys(place):
    put, found, _, _ = place
    put("managed",
        {"allowManagedHooksOnly": True, "strictPluginOnlyCustomization": ["hooks"],
         "allowManagedPermissionRulesOnly": True})
    assert found() == [("managed", "allowManagedHooksOnly", ss.REFUSE),
                       ("managed", "strictPluginOnlyCustomization", ss.REFUSE),
                       ("managed", "allowManagedPermissionRulesOnly", ss.REPORT)]
    put("project", {"allowManagedHooksOnly": True})
    assert ("project", "allowManagedHooksOnly", ss.REPORT) in found()


def test_bypass_default_mode_is_refused_unless_a_mode_is_chosen(place):
    put, found, check, _ = place
    put("project", {"permissions": {"defaultMode": "bypassPermissions"}})
    assert found() == [("project", "permissions.defaultMode", ss.REFUSE)]
    assert found(mode="--permission-mode") == [("project", "permissions.defaultMode", ss.OVERRIDDEN)]
    assert check("-p", "x", "--permission-mode", "default", lockdown=True) == []
    assert check(lockdown=True, mode="default") == []
    with pytest.raises(UsageError, match="permissions.defaultMode: bypassPermissions"):
        check()


def test_http_hook_allowlist_must_let_the_guard_through(place):
    put, found, _, _ = place
    put("project", {"allowedHttpHookUrls": ["https://hooks.example.invalid/*"]})
    assert found() == [("project", "allowedHttpHookUrls", ss.REFUSE)]
    put("user", {"allowedHttpHookUrls": ["http://127.0.0.1:*/hook/*"]})  # the lists merge
    assert found() == []
    put("user", {"allowedHttpHookUrls": ["http://127.0.0.1:8080/*"]})  # one port is not every port
    assert ("project", "allowedHttpHookUrls", ss.REFUSE) in found()
    put("user", {})
    put("project", {"allowedHttpHookUrls": []})  # empty: no HTTP hook at all
    assert found() == [("project", "allowedHttpHookUrls", ss.REFUSE)]


def test_decision_hooks_of_their_own_are_refused_under_lockdown_only(place):
    put, found, check, _ = place
    hook = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "echo"}]}],
                      "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "echo"}]}]}}
    path = put("local", hook)
    assert found() == [("local", "hooks.PreToolUse", ss.STRICT)]
    assert check() == []
    with pytest.raises(UsageError, match=f"^{path}: hooks.PreToolUse: 1 hook"):
        check(lockdown=True)
    put("managed", hook)
    assert ("managed", "hooks.PreToolUse", ss.REPORT) in found()


def test_opt_out_lets_through_without_lockdown_only(place):
    put, _, check, _ = place
    put("project", OFF)
    let = check(override=True)
    assert [(f.source, f.key) for f in let] == [("project", "disableAllHooks")]
    with pytest.raises(UsageError, match="refused by lockdown"):
        check(override=True, lockdown=True)


@pytest.mark.parametrize("argv, extra_env, named", [
    (["-p", "x"], {"CLAUDE_CODE_SAFE_MODE": "1"}, "environment CLAUDE_CODE_SAFE_MODE"),
    (["-p", "x"], {"CLAUDE_CODE_SIMPLE": "1"}, "environment CLAUDE_CODE_SIMPLE"),
    (["-p", "x", "--safe-mode"], {}, "--safe-mode"),
    (["-p", "x", "--bare"], {}, "--bare"),
    (["-p", "x", "--append-system-prompt", "--bare"], {}, "--bare"),  # as another option's value
    (["--model", "--bare", "-p", "x"], {}, "--bare"),
])
def test_modes_without_hooks_are_refused_unless_allowed_and_always_under_lockdown(place, argv, extra_env, named):
    _, _, check, _ = place
    with pytest.raises(UsageError) as err:
        check(*argv, extra_env=extra_env)
    assert str(err.value).startswith(f"{named}: ") and "set [security] allow_unguarded = true" in str(err.value)
    with pytest.raises(UsageError, match=f"^{named}: .*refused by lockdown"):
        check(*argv, lockdown=True, extra_env=extra_env)
    let = check(*argv, extra_env=extra_env, unguarded=True)
    assert [f.key for f in let] == [named.removeprefix("environment ")]
    assert check("-p", "x", "--", "--bare", extra_env={}) == []  # after --: a prompt word, not the switch


@pytest.mark.parametrize("where", ["user", "project", "local", "file"])
def test_env_blocks_naming_a_variable_the_guard_depends_on(place, where):
    put, found, check, tmp = place
    path = put(where, {"env": {"CLAUDEGUARD_HOOK_TOKEN": "evil", "CLAUDE_CODE_SHELL_PREFIX": "x", "FOO": "1"}})
    argv = ("-p", "x", "--settings", str(path)) if where == "file" else ()
    keys = [(k, a) for s, k, a in found(*argv) if k.startswith("env.")]
    assert keys == [("env.CLAUDEGUARD_HOOK_TOKEN", ss.WARN), ("env.CLAUDE_CODE_SHELL_PREFIX", ss.WARN)]
    assert [f.key for f in check(*argv)] == ["env.CLAUDEGUARD_HOOK_TOKEN", "env.CLAUDE_CODE_SHELL_PREFIX"]  # warned
    with pytest.raises(UsageError, match=f"^{'--settings ' if where == 'file' else ''}{path}: "
                                         f"env.CLAUDEGUARD_HOOK_TOKEN: sets a variable the guard depends on: refused "
                                         f"by lockdown"):
        check(*argv, lockdown=True)
    put(where, {"env": {"CLAUDE_CODE_SIMPLE": "1"}})
    assert [(k, a) for s, k, a in found(*argv)] == [("env.CLAUDE_CODE_SIMPLE", ss.UNGUARDED)]
    with pytest.raises(UsageError, match="allow_unguarded"):
        check(*argv)


def test_unreadable_or_broken_files_are_not_sources(place):
    put, found, _, tmp = place
    path = tmp / "work" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert found() == []
    srcs = ss.sources(parse_claude_args(["-p", "x"]), str(tmp / "work"), {"HOME": str(tmp / "home")},
                      str(tmp / "managed"))
    project = next(s for s in srcs if s.name == "project")
    assert not project.loaded and project.note.startswith("not valid JSON")


def test_http_hook_env_allowlist_must_keep_the_guards_variable(place):
    put, found, _, _ = place
    put("project", {"httpHookAllowedEnvVars": []})
    assert found() == [("project", "httpHookAllowedEnvVars", ss.REFUSE)]
    put("user", {"httpHookAllowedEnvVars": ["CLAUDEGUARD_HOOK_TOKEN"]})  # the lists merge
    assert found() == []


def test_the_token_variable_is_the_one_the_hooks_use():
    from claudeguard.plan.hooks import TOKEN_VAR

    assert ss.GUARD_TOKEN_VAR == TOKEN_VAR


def test_protected_rules_name_every_settings_file_of_the_run(place, monkeypatch):
    put, _, _, tmp = place
    monkeypatch.setenv("HOME", str(tmp / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    args = parse_claude_args(["-p", "x", "--settings", str(tmp / "extra.json")])
    work = tmp / "work"
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(tmp / "rt"))
    (tmp / "rt").mkdir()
    rules = ss.protected_rules(args, FakeConfig(), str(work))
    settings = [f"Edit(/{tmp}/home/.claude/settings.json)", f"Edit(/{work}/.claude/settings.json)",
                f"Edit(/{work}/.claude/settings.local.json)", f"Edit(/{tmp}/extra.json)",
                f"Edit(/{work}/.claude/worktrees/*/.claude/settings.json)"]
    assert all(rule in rules for rule in settings)
    assert rules[:2] == [f"Read(/{tmp}/rt)", f"Edit(/{tmp}/rt)"]  # a dir's rule holds what lies below it
    assert not any(rule.endswith("/**)") for rule in rules)
    # built in: no opt-out loosens it
    assert ss.protected_rules(args, FakeConfig(values={"security.allow_settings_override": True}), str(work)) == rules
