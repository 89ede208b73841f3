"""``bin/claude`` of the repository against any install (issue 36): the claudeguard of a venv, of
pipx, or one on PATH; never the checkout's own bin/claudeguard with a python3 that cannot import
the package (the ModuleNotFoundError a pipx or venv user met); nothing found: one line, exit 2.
And ``--guard-help``/``--guard-version`` (``--version`` stays the real CLI's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.shim_helpers import REPO

BIN_CLAUDE = REPO / "bin" / "claude"
PLAIN_PATH = "/usr/bin:/bin"


def _installed(where: Path) -> Path:
    """A claudeguard command as an install puts it (this interpreter runs the package)."""
    where.mkdir(parents=True)
    script = where / "claudeguard"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m claudeguard \"$@\"\n")
    script.chmod(0o755)
    return script


def _checkout(tmp_path: Path) -> Path:
    """A copy of bin/ in a directory with no package and no .venv beside it."""
    repo = tmp_path / "checkout"
    shutil.copytree(REPO / "bin", repo / "bin")
    return repo / "bin" / "claude"


def _run(script: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, cwd=env["HOME"])


def _env(tmp_path: Path, **extra: str) -> dict:
    return {"PATH": PLAIN_PATH, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), **extra}


def test_a_venv_a_pipx_install_or_one_on_path_runs_and_the_checkouts_own_launcher_is_skipped(tmp_path):
    claude = _checkout(tmp_path)
    venv = _installed(tmp_path / "venv" / "bin")
    out = _run(claude, _env(tmp_path, VIRTUAL_ENV=str(venv.parent.parent)), "--guard-version")
    assert out.returncode == 0 and out.stdout.startswith("claudeguard 0.1.0 ("), out.stderr
    _installed(tmp_path / "pipx" / "venvs" / "claudeguard" / "bin")
    out = _run(claude, _env(tmp_path, PIPX_HOME=str(tmp_path / "pipx")), "--guard-version")
    assert out.returncode == 0 and out.stdout.startswith("claudeguard 0.1.0 ("), out.stderr
    # bin/ itself on PATH (the README's route): its claudeguard is skipped for the installed one
    on_path = _installed(tmp_path / "elsewhere")
    env = _env(tmp_path, PATH=f"{claude.parent}:{on_path.parent}:{PLAIN_PATH}")
    out = _run(claude, env, "--guard-help")
    assert out.returncode == 0 and out.stdout.startswith("usage: claudeguard"), out.stderr
    assert "ModuleNotFoundError" not in out.stderr


def test_nothing_installed_is_one_line_and_exit_2(tmp_path):
    claude = _checkout(tmp_path)
    out = _run(claude, _env(tmp_path), "--version")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and "claudeguard is not installed where this script looks" in out.stderr


def test_the_guards_help_and_version_and_the_clis_own_version(real_claude, cli_version, tmp_path):
    env = _env(tmp_path, CLAUDEGUARD_CLAUDE=str(real_claude), CLAUDEGUARD_AUTO_VERIFY="0")
    version = _run(BIN_CLAUDE, env, "--guard-version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines()[1] == f"real CLI: Claude Code {cli_version} ({real_claude})"
    own = subprocess.run([str(real_claude), "--version"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    through = subprocess.run([str(BIN_CLAUDE), "--version"], env=env, capture_output=True, timeout=60,
                             stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert (through.returncode, through.stdout, through.stderr) == (0, own.stdout, b"")  # byte for byte
    helped = _run(BIN_CLAUDE, env, "--guard-help")
    assert helped.returncode == 0 and "--guard-version" in helped.stdout and "--guard-dry-run" in helped.stdout


def _doctor(env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "claudeguard.commands.ctl", "doctor"], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=cwd)


def test_not_found_offers_the_cli_the_demo_installed_with_its_config_line(real_claude, cli_version, tmp_path):
    # the layout claudeguardctl demo installs into (claudeguard's cache): a link to the pinned CLI
    cache = tmp_path / "cache" / "claudeguard" / "cli" / cli_version / "node_modules" / ".bin"
    cache.mkdir(parents=True)
    (cache / "claude").symlink_to(real_claude)
    env = _env(tmp_path, CLAUDEGUARD_AUTO_VERIFY="0")
    out = _run(BIN_CLAUDE, env, "-p", "hello")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    line = f'claude.path = "{cache / "claude"}"'
    assert f"found Claude Code {cli_version} at {cache / 'claude'}: add the line `{line}`" in out.stderr
    config = tmp_path / "xdg" / "claudeguard" / "config.toml"
    assert f"at the top of {config}" in out.stderr
    config.parent.mkdir(parents=True)
    config.write_text(line + "\n")  # the line, as offered, makes it the real CLI
    version = _run(BIN_CLAUDE, env, "--guard-version")
    assert version.stdout.splitlines()[1] == f"real CLI: Claude Code {cli_version} ({cache / 'claude'})"
    doctor = _doctor(env, tmp_path)
    assert f"real CLI: {cache / 'claude'} version {cli_version}" in doctor.stdout
    config.unlink()
    doctor = _doctor(env, tmp_path)
    assert f"found Claude Code {cli_version} at {cache / 'claude'}: add the line `{line}`" in doctor.stdout
