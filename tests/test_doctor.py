"""`claudeguardctl doctor` on the real CLI: it finds the CLI, proves the injected flags, the MCP
prompt server and the hooks work offline, and refuses a runtime dir others can enter."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import in_ci
from tests.shim_helpers import CTL, guarded_env


@pytest.mark.newest_cli
def test_doctor_proves_the_injection_on_the_real_cli(real_claude, cli_version, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"version {cli_version}" in proc.stdout
    for line in ("injected flags accepted", "hooks fire"):
        assert f"ok    {line}" in proc.stdout
    # who asks in -p: the MCP prompt server on 2.1.197, the PermissionRequest hook on 2.1.330
    if cli_version == "2.1.197":
        assert "ok    permission-prompt MCP server: connected" in proc.stdout
    else:
        assert f"-p asks through: permission-request (no MCP prompt server on {cli_version})" in proc.stdout
        assert "permission-prompt MCP server" not in proc.stdout
    assert "FAIL" not in proc.stdout
    assert "ok    launcher: " in proc.stdout
    assert f"ok    argv table: {cli_version}\n" in proc.stdout  # its own table: no note
    assert not list(Path(env["CLAUDEGUARD_RUNTIME_DIR"], "sessions").iterdir())  # its probe session is gone


def test_doctor_names_the_table_that_reads_a_cli_newer_than_every_table(capsys):
    from claudeguard.commands.doctor import argv_table

    assert argv_table("2.1.400")
    out = capsys.readouterr().out
    assert out.startswith("ok    argv table: 2.1.332 (another version's)\n")
    assert "note: Claude Code 2.1.400 has no argv table in this claudeguard: its argv is read with the table of " \
           "2.1.332" in out


def test_doctor_refuses_a_runtime_dir_others_can_enter(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    runtime = Path(env["CLAUDEGUARD_RUNTIME_DIR"])
    runtime.mkdir(parents=True, exist_ok=True)
    os.chmod(runtime, 0o755)
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=60)
    assert proc.returncode == 1
    assert "FAIL  runtime dir" in proc.stdout and "lets others in" in proc.stdout


@pytest.mark.newest_cli
def test_doctor_shows_the_box_that_holds_here(real_claude, cli_version, offline_env, run_claude):
    if shutil.which("bwrap") is None and not in_ci():
        pytest.skip("bubblewrap is not installed (under CI=true this fails instead)")
    env = guarded_env(offline_env, real_claude)
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok    sandbox: bubblewrap " in proc.stdout
    assert "ok    sandbox: a command run through the box as the CLI runs it: bwrap is its pid 1" in proc.stdout
    assert f"CLI {cli_version}: Bash, background Bash and ! commands run in the box" in proc.stdout
    assert "Claude Code's own sandbox: off in every guarded session" in proc.stdout
    assert "open with the box: the host network" in proc.stdout


def test_without_bubblewrap_doctor_lists_what_stays_open_and_lockdown_fails(real_claude, offline_env, run_claude,
                                                                          tmp_path):
    env = guarded_env(offline_env, real_claude)
    missing = tmp_path / "no-bwrap"
    config = Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[sandbox]\nbwrap = "{missing}"\n')
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warn  sandbox: none here (bubblewrap is not installed" in proc.stdout
    assert "install the package 'bubblewrap'" in proc.stdout
    opened = [line for line in proc.stdout.splitlines()
              if "open without the box: a Bash call the policy allows can" in line]
    assert len(opened) == 6 and any("/proc/<pid>/environ" in line for line in opened)
    config.write_text(f'[security]\ndisable_bypass_permissions = true\n\n[sandbox]\nbwrap = "{missing}"\n')
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert proc.returncode == 1
    assert "FAIL  sandbox: lockdown (" in proc.stdout and "needs it, and bubblewrap is not installed" in proc.stdout
    assert "FAIL  injected flags: a session is refused here" in proc.stdout


def test_doctor_gives_the_chmod_of_each_dir_others_can_enter_and_goes_on(real_claude, offline_env, run_claude):
    env = guarded_env(offline_env, real_claude)
    state = Path(env["XDG_STATE_HOME"]) / "claudeguard"
    log = Path(env["CLAUDEGUARD_LOG_DIR"])
    log.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o755)  # as `os.makedirs(log dir)` of older versions left it
    os.chmod(log, 0o750)
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"FAIL  state dir: {state}: mode 0755 lets others in; expected 0700; fix: chmod 700 {state}" in lines
    assert f"FAIL  log dir: {log}: mode 0750 lets others in; expected 0700; fix: chmod 700 {log}" in lines
    assert len([line for line in lines if line.startswith("FAIL")]) == 2, proc.stdout
    # what needs the state dir is skipped (a session is refused until it is private: the box's
    # check), the rest is still reported, to the last check
    assert lines.index(f"ok    argv table: {real_claude_version(env)}") > lines.index(f"FAIL  log dir: {log}: mode "
                                                                                      f"0750 lets others in; expected "
                                                                                      f"0700; fix: chmod 700 {log}")
    assert any(line.startswith("ok    launcher: ") for line in lines)
    assert [line for line in lines if line.startswith("skip")] == [
        f"skip  sandbox: not checked while {state} is not private (above)",
        f"skip  injected flags: not checked while {state} is not private (above)"]
    os.chmod(state, 0o700)
    os.chmod(log, 0o700)
    proc = run_claude(CTL + ["doctor"], env, offline_env.cwd, timeout=120)
    assert "FAIL" not in proc.stdout and "skip" not in proc.stdout, proc.stdout
    assert "ok    hooks fire (PreToolUse reached claudeguardctl hook)" in proc.stdout.splitlines()


def real_claude_version(env: dict) -> str:
    from claudeguard.plan.claude_args import installed_version

    version = installed_version(env["CLAUDEGUARD_CLAUDE"])
    assert version is not None
    return version


def test_dirs_the_guard_makes_are_made_0700_with_their_parents(tmp_path):
    from claudeguard.config.trust import record
    from claudeguard.config.write import add_rule
    from claudeguard.files import make_dirs

    target = tmp_path / "a" / "b" / "c"
    make_dirs(target)
    assert [oct(os.stat(p).st_mode & 0o777) for p in (tmp_path / "a", tmp_path / "a" / "b", target)] == ["0o700"] * 3
    make_dirs(target)  # there already: left as it is
    os.chmod(tmp_path / "a", 0o755)
    make_dirs(tmp_path / "a" / "d")
    assert oct(os.stat(tmp_path / "a").st_mode & 0o777) == "0o755"  # not ours to change
    assert oct(os.stat(tmp_path / "a" / "d").st_mode & 0o777) == "0o700"
    # the trust records' state dir and a config file's dir, from nothing
    project_file = tmp_path / "proj" / ".claudeguard.toml"
    project_file.parent.mkdir()
    project_file.write_text("[permissions]\n")
    record([str(project_file)], env={"XDG_STATE_HOME": str(tmp_path / "st" / "state")})
    assert [oct(os.stat(p).st_mode & 0o777) for p in (tmp_path / "st", tmp_path / "st" / "state",
                                                      tmp_path / "st" / "state" / "claudeguard",
                                                      tmp_path / "st" / "state" / "claudeguard" / "trusted")] \
        == ["0o700"] * 4
    add_rule(tmp_path / "cfg" / "claudeguard" / "config.toml", "allow", "Read")
    assert [oct(os.stat(p).st_mode & 0o777) for p in (tmp_path / "cfg", tmp_path / "cfg" / "claudeguard")] \
        == ["0o700"] * 2
