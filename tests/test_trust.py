"""Trust (issue 24 part 3): a project's config may always tighten; its loosening applies only once
the user trusted its exact content (`config trust`, path + SHA-256 in the user's state dir); under
lockdown no file but the user's own may loosen. Also the order of modes, and `config trust`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from claudeguard.config.load import MODE_ORDER, Overrides, Sourced, load_config, mode_rank
from claudeguard.config.trust import Records, digest, load, record, trust_path
from claudeguard.errors import ConfigError
from tests.shim_helpers import CTL


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in ("CLAUDEGUARD_CONFIG", "CLAUDEGUARD_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    user = tmp_path / "xdg" / "claudeguard" / "config.toml"
    user.parent.mkdir(parents=True)
    return user, project, project / ".claudeguard.toml"


LOOSE = ('[permissions]\nmode = "acceptEdits"\nallow = ["Bash(npm test)"]\ndeny = ["Read(./.env)"]\n'
         'ask = ["Bash(git push *)"]\n\n[agents.scribe]\nreplace = true\nallow = ["Write"]\n')


def rules(cfg, key):  # type: ignore[no-untyped-def]
    return [r.rule for r in cfg.rules.get(key, [])]


def test_an_untrusted_project_tightens_but_does_not_loosen(env):
    user, project, proj = env
    user.write_text('[permissions]\nmode = "default"\n\n[agents.scribe]\ndeny = ["Bash"]\n')
    proj.write_text(LOOSE)
    cfg = load_config(project)
    assert rules(cfg, "permissions.deny") == ["Read(./.env)"] and rules(cfg, "permissions.ask") == ["Bash(git push *)"]
    assert rules(cfg, "permissions.allow") == []
    assert cfg.get("permissions.mode") == "default"
    assert rules(cfg, "agents.scribe.deny") == ["Bash"] and not cfg.policy_spec()["agents"]["scribe"]["replace"]
    [(path, what)] = cfg.untrusted
    assert path == str(proj)
    assert what == ["allow rule 'Bash(npm test)' in [permissions]", "permissions.mode = 'acceptEdits' (looser than "
                    "'default')", "replace = true in [agents.scribe]", "allow rule 'Write' in [agents.scribe]"]
    [note] = cfg.untrusted_notes()
    assert note.startswith(f"claudeguard: {proj}: not trusted, so its loosening is ignored (")
    assert note.endswith(f"after reviewing it: claudeguardctl config trust {proj}")


def test_trusted_content_loosens_and_a_changed_file_is_untrusted_again(env):
    user, project, proj = env
    proj.write_text(LOOSE)
    [(real, sha)] = record([str(proj)])
    assert real == os.path.realpath(proj) and sha == digest(str(proj))
    assert json.loads(open(trust_path()).read())["files"][real]["sha256"] == sha
    assert oct(os.stat(trust_path()).st_mode & 0o777) == "0o600"
    cfg = load_config(project)
    assert cfg.untrusted == []
    assert rules(cfg, "permissions.allow") == ["Bash(npm test)"] and cfg.get("permissions.mode") == "acceptEdits"
    assert cfg.policy_spec()["agents"]["scribe"]["replace"] is True
    proj.write_text(LOOSE + "# one more line\n")
    cfg = load_config(project)
    assert rules(cfg, "permissions.allow") == [] and cfg.untrusted


def test_a_tighter_mode_applies_untrusted_and_the_order_is_one(env):
    user, project, proj = env
    assert sorted(MODE_ORDER, key=MODE_ORDER.__getitem__) == ["plan", "dontAsk", "default", "manual", "acceptEdits",
                                                               "auto", "bypassPermissions"]
    assert mode_rank(None) == mode_rank("default") and mode_rank("someNewMode") > mode_rank("bypassPermissions")
    user.write_text('[permissions]\nmode = "acceptEdits"\n')
    for mode, applies in (("plan", True), ("dontAsk", True), ("default", True), ("acceptEdits", True),
                          ("auto", False), ("bypassPermissions", False)):
        proj.write_text(f'[permissions]\nmode = "{mode}"\n')
        assert load_config(project).get("permissions.mode") == (mode if applies else "acceptEdits"), mode


@pytest.mark.parametrize("text, loosened", [
    ('[approval]\non_timeout = "allow"\n', "approval.on_timeout"),
    ('[claude]\npath = "./fake-claude"\n', "claude.path"),
    ('[approval]\nnotify = ["sh", "-c", "curl evil"]\n', "approval.notify"),
    ('[subagents]\nblocked_tools = ["Agent"]\n', "subagents.blocked_tools drops"),
    ('[subagents]\nread_only_types = []\n', "subagents.read_only_types drops"),
    ('[agents.x]\nreplace = true\nask = ["Bash"]\n', "replace = true in [agents.x]"),
])
def test_each_loosening_needs_trust(env, text, loosened):
    user, project, proj = env
    proj.write_text(text)
    cfg = load_config(project)
    assert any(w.startswith(loosened) for w in cfg.untrusted[0][1]), cfg.untrusted
    assert cfg.source(loosened.split()[0]) == "default" or loosened.startswith("replace")


def test_tightening_settings_apply_untrusted(env):
    user, project, proj = env
    proj.write_text('[subagents]\nblocked_tools = ["Agent", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode", '
                    '"KillShell", "WebFetch"]\nbackground = "deny"\n\n[watchdog]\nstall_after = 60\n\n[approval]\n'
                    'timeout = 30\n')
    cfg = load_config(project)
    assert cfg.untrusted == []
    assert "WebFetch" in cfg.subagents()["blocked_tools"] and cfg.subagents()["background"] == "deny"
    assert cfg.get("watchdog.stall_after") == 60 and cfg.get("approval.timeout") == 30


def test_a_profile_in_the_project_file_is_as_trusted_as_the_file(env):
    user, project, proj = env
    proj.write_text('[profiles.ci.permissions]\nallow = ["Bash"]\ndeny = ["Bash(rm *)"]\n')
    cfg = load_config(project, Overrides(profile=Sourced("ci", "--guard-profile")))
    assert rules(cfg, "permissions.allow") == [] and rules(cfg, "permissions.deny") == ["Bash(rm *)"]
    record([str(proj)])
    cfg = load_config(project, Overrides(profile=Sourced("ci", "--guard-profile")))
    assert rules(cfg, "permissions.allow") == ["Bash"]


@pytest.mark.parametrize("source", ["--guard-config", "env CLAUDEGUARD_CONFIG"])
def test_an_extra_file_inside_the_project_needs_trust_and_outside_it_does_not(env, tmp_path, source):
    user, project, proj = env
    inside, outside = project / "loose.toml", tmp_path / "loose.toml"
    for path in (inside, outside):
        path.write_text('[permissions]\nallow = ["Bash"]\n')
    cfg = load_config(project, Overrides(extra_files=[Sourced(str(inside), source)]))
    assert rules(cfg, "permissions.allow") == [] and cfg.untrusted[0][0] == str(inside)
    cfg = load_config(project, Overrides(extra_files=[Sourced(str(outside), source)]))
    assert rules(cfg, "permissions.allow") == ["Bash"] and cfg.untrusted == []


@pytest.mark.parametrize("where", ["project", "--guard-config", "env CLAUDEGUARD_CONFIG"])
@pytest.mark.parametrize("text", [
    '[permissions]\nallow = ["Bash"]\n',
    '[permissions]\nreplace = true\ndeny = ["Read"]\n',  # drops only the user's ask rules
    '[agents.scribe]\nreplace = true\n',  # drops an agent's rules
    '[permissions]\nmode = "acceptEdits"\n',
])
def test_lockdown_refuses_every_loosening_from_every_layer_but_the_users_trusted_or_not(env, tmp_path, where, text):
    user, project, proj = env
    user.write_text('[security]\ndisable_bypass_permissions = true\n\n[permissions]\nask = ["Bash(git push *)"]\n\n'
                    '[agents.scribe]\ndeny = ["Write"]\n')
    path = proj if where == "project" else tmp_path / "extra.toml"  # outside the project: the caller's
    path.write_text(text)
    record([str(path)])
    overrides = Overrides() if where == "project" else Overrides(extra_files=[Sourced(str(path), where)])
    with pytest.raises(ConfigError) as err:
        load_config(project, overrides)
    message = str(err.value)
    assert message.startswith(f"{path}:") and "loosens the guard: refused by lockdown" in message
    assert "\n" not in message


def test_the_users_own_file_loosens_under_lockdown(env):
    user, project, proj = env
    user.write_text('[security]\ndisable_bypass_permissions = true\n\n[permissions]\nmode = "acceptEdits"\n'
                    'allow = ["Bash"]\n')
    cfg = load_config(project)
    assert rules(cfg, "permissions.allow") == ["Bash"] and cfg.get("permissions.mode") == "acceptEdits"


def test_records_trust_nothing_when_missing_or_broken(env, tmp_path):
    user, project, proj = env
    proj.write_text("x")
    assert load().files == {}
    os.makedirs(os.path.dirname(trust_path()), exist_ok=True)
    with open(trust_path(), "w") as fh:
        fh.write("{not json")
    assert not load().trusted(str(proj))
    assert not Records("x", {os.path.realpath(proj): "0" * 64}).trusted(str(proj))


def test_a_directory_is_trusted_by_its_whole_tree(tmp_path):
    plug = tmp_path / "plug"
    (plug / "hooks").mkdir(parents=True)
    (plug / "hooks" / "hooks.json").write_text("{}")
    before = digest(str(plug))
    (plug / "hooks" / "run.sh").write_text("echo")
    assert digest(str(plug)) != before
    (plug / "hooks" / "run.sh").unlink()
    assert digest(str(plug)) == before
    os.symlink("/etc", plug / "link")
    assert digest(str(plug)) != before


def _ctl(env: dict, cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + list(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_config_trust_without_a_file_trusts_what_applies_here(env, tmp_path):
    user, project, proj = env
    proj.write_text('[permissions]\nallow = ["Bash"]\n')
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"statusLine": {"command": "x"}}))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    environ = dict(os.environ)
    environ.pop("CLAUDECODE", None)
    environ.pop("CLAUDEGUARD_SESSION", None)
    proc = _ctl(environ, project, "config", "trust")
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[1] for line in proc.stdout.splitlines()] == [
        str(proj), str(project / ".claude" / "settings.json"), str(project / ".mcp.json")]
    assert load_config(project).untrusted == []
    shown = _ctl(environ, project, "config", "show")
    assert f"# project: {proj} (trusted)" in shown.stdout
    proc = _ctl(environ, project, "config", "trust", str(project / "missing.toml"))
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "no such file to trust" in proc.stderr


def test_config_show_says_what_is_ignored(env):
    user, project, proj = env
    proj.write_text('[permissions]\nallow = ["Bash"]\n')
    environ = dict(os.environ)
    shown = _ctl(environ, project, "config", "show")
    assert f"# project: {proj} (not trusted: may tighten, not loosen)" in shown.stdout
    assert f"# {proj}: loosening ignored until trusted: allow rule 'Bash' in [permissions]" in shown.stdout
    data = json.loads(_ctl(environ, project, "config", "show", "--json").stdout)
    assert data["untrusted"] == [{"path": str(proj), "ignored": ["allow rule 'Bash' in [permissions]"],
                                  "trust_command": f"claudeguardctl config trust {proj}"}]


def test_config_trust_is_refused_from_inside_a_guarded_session(env, tmp_path):
    user, project, proj = env
    proj.write_text('[permissions]\nallow = ["Bash"]\n')
    # a process whose ancestor is a guarded session's (its environment names the session)
    script = f"import subprocess, sys; sys.exit(subprocess.run({CTL + ['config', 'trust', str(proj)]!r}).returncode)"
    proc = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, CLAUDEGUARD_SESSION="abc123"),
                          cwd=project, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip() == ("claudeguardctl: config trust is refused from inside guarded session abc123: "
                                   "trust a file from your own shell, outside any session")
    assert load().files == {}


def test_an_opt_out_from_a_file_inside_the_project_needs_trust(env):
    user, project, proj = env
    inside = project / "ci.toml"
    inside.write_text("[security]\nallow_unguarded = true\nallow_settings_override = true\n")
    cfg = load_config(project, Overrides(extra_files=[Sourced(str(inside), "env CLAUDEGUARD_CONFIG")]))
    assert cfg.security()["allow_unguarded"] is False and cfg.security()["allow_settings_override"] is False
    assert cfg.untrusted == [(str(inside), ["security.allow_unguarded = true", "security.allow_settings_override = "
                                            "true"])]
    record([str(inside)])
    cfg = load_config(project, Overrides(extra_files=[Sourced(str(inside), "env CLAUDEGUARD_CONFIG")]))
    assert cfg.security()["allow_unguarded"] is True


# --- what the user trusted binds (issue 32) ------------------------------------------------------

BOUND = '[permissions]\nallow = ["Bash(npm test)"]\ndeny = ["Bash(touch *)"]\nask = ["Bash(git push *)"]\n'


@pytest.mark.parametrize("how", ["rewritten", "removed", "emptied"])
def test_a_trusted_config_changed_or_removed_keeps_its_deny_and_ask_rules(env, how):
    user, project, proj = env
    proj.write_text(BOUND)
    record([str(proj)])
    assert rules(load_config(project), "permissions.deny") == ["Bash(touch *)"]
    if how == "rewritten":  # what an agent's Write leaves: the deny gone, more allowed
        proj.write_text('[permissions]\nallow = ["Bash(npm test)", "Bash(touch *)", "Bash"]\n')
    elif how == "removed":
        proj.unlink()
    else:
        proj.write_text("")
    cfg = load_config(project)
    assert rules(cfg, "permissions.deny") == ["Bash(touch *)"]
    assert rules(cfg, "permissions.ask") == ["Bash(git push *)"]
    assert rules(cfg, "permissions.allow") == []  # the trusted allow no longer loosens, the new one never did
    [note] = [n for n in cfg.untrusted_notes() if "since you trusted it" in n]
    said = "changed" if how != "removed" else "was removed"
    assert note.startswith(f"claudeguard: {proj} {said} since you trusted it: the deny and ask rules you trusted "
                           f"still apply (")
    assert note.endswith(f"after reviewing it: claudeguardctl config trust {proj} (or config untrust)")
    [where] = [r.source for r in cfg.rules["permissions.deny"]]
    assert where.endswith(f"trusted/{digest_of(BOUND)}:3")  # the kept copy, file:line


def digest_of(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_trusting_the_new_content_or_untrusting_ends_the_binding(env, tmp_path):
    user, project, proj = env
    proj.write_text(BOUND)
    record([str(proj)])
    proj.write_text('[permissions]\nask = ["Bash(rm *)"]\n')
    assert "Bash(touch *)" in rules(load_config(project), "permissions.deny")
    record([str(proj)])  # the user reviewed the change and trusts it
    cfg = load_config(project)
    assert rules(cfg, "permissions.deny") == [] and rules(cfg, "permissions.ask") == ["Bash(rm *)"]
    assert not [n for n in cfg.untrusted_notes() if "since you trusted it" in n]
    proj.unlink()
    assert rules(load_config(project), "permissions.ask") == ["Bash(rm *)"]  # removed: still binds
    out = subprocess.run(CTL + ["config", "untrust"], cwd=project, capture_output=True, text=True, timeout=30,
                         env={**os.environ, "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt")})
    assert out.returncode == 0 and out.stdout == f"no longer trusted: {os.path.realpath(proj)}\n", out.stderr
    cfg = load_config(project)
    assert rules(cfg, "permissions.ask") == [] and cfg.untrusted_notes() == []


def test_lockdown_refuses_to_start_on_a_trusted_config_that_changed(env):
    user, project, proj = env
    user.write_text("[security]\ndisable_bypass_permissions = true\n")
    proj.write_text(BOUND)
    record([str(proj)])
    proj.write_text("")
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value).startswith(f"{proj} changed since you trusted it: the deny and ask rules you trusted "
                                      f"still apply (")
    assert str(info.value).endswith("lockdown (" + str(user) + ":2) refuses to start until you trust the new "
                                    "content or revoke the trust")
