"""`claudeguardctl doctor` on the real CLI: it finds the CLI, proves the injected flags, the MCP
prompt server and the hooks work offline, and refuses a runtime dir others can enter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
