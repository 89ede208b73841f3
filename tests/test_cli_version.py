"""A real CLI's version however it is installed (issue 36, plan/cli_version.py): the npm layout's
package.json, the platform package's, and the native installer's layout (a binary with nothing
beside it) asked once and cached by its stat key; a program that is not a Claude Code CLI is
never run to find out. On the real CLIs: the native layout and the platform binary give the
same version, argv table, hooks outside the box and a passing ``doctor --verify`` as npm's."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from claudeguard.plan import cli_version as cv
from claudeguard.plan.claude_args import read_args
from tests.shim_helpers import GUARD, guarded_env
from tests.test_verify import CHECKS, verify_json


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "claudeguard"


def _exe(path: Path, body: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    path.chmod(0o755)
    return path


def test_the_platform_package_names_its_version(tmp_path):
    pkg = tmp_path / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64"
    binary = _exe(pkg / "claude", "")
    (pkg / "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code-linux-x64", "version": "2.1.330"}))
    assert cv.package_version(str(binary)) == "2.1.330"
    other = tmp_path / "node_modules" / "left-pad"
    _exe(other / "claude", "")
    (other / "package.json").write_text(json.dumps({"name": "left-pad", "version": "1.0.0"}))
    assert cv.package_version(str(other / "claude")) is None


def test_a_program_that_is_not_the_cli_is_never_run(tmp_path, state):
    ran = tmp_path / "ran"
    script = _exe(tmp_path / "bin" / "claude", f"#!/bin/sh\necho 2.1.330 '(Claude Code)'\ntouch {ran}\n")
    assert cv.cli_version(str(script)) is None and not cv.is_claude_cli(str(script))
    # a large native-looking binary without Claude Code's marks: looked into, never run, and
    # remembered as no CLI (not looked into again while its stat key holds)
    big = _exe(tmp_path / "big", b"\x7fELF" + b"\0" * (cv.MIN_NATIVE_SIZE + 10))
    assert cv.cli_version(str(big)) is None
    assert not ran.exists()
    assert cv.cached(cv.stat_key(str(big)) or []) == (True, None)
    saved = json.loads((state / cv.VERSIONS_FILE).read_text())["binaries"]
    assert list(saved.values()) == [{"key": cv.stat_key(str(big)), "cli_version": None, "path": str(big)}]
    assert stat.S_IMODE((state / cv.VERSIONS_FILE).stat().st_mode) == 0o600
    # not executable: never a CLI, whatever it says
    assert not cv.is_claude_cli(str(tmp_path / "nowhere"))


def test_the_cache_holds_only_while_the_binary_is_unchanged_and_only_when_it_is_ours(tmp_path, state):
    binary = _exe(tmp_path / "versions" / "2.1.330", b"\x7fELF" + b"\0" * 64)
    key = cv.stat_key(str(binary))
    assert key is not None
    cv._remember(key, str(binary), "2.1.330")
    assert cv.cli_version(str(binary)) == "2.1.330"
    assert cv.cli_version(str(tmp_path / "link-free-name"), ask_binary=False) is None
    os.utime(binary, ns=(1, 1))  # touched: another key, asked again (a small file: not a CLI)
    assert cv.cli_version(str(binary)) is None
    cv._remember(cv.stat_key(str(binary)) or [], str(binary), "2.1.330")
    (state / cv.VERSIONS_FILE).chmod(0o666)  # writable by others: not believed
    assert cv.cli_version(str(binary)) is None


# --- on the real CLIs ----------------------------------------------------------------------------


def _native_layout(real_claude: Path, home: Path, version: str) -> Path:
    """Anthropic's native installer's layout in ``home``: a copy of the pinned binary as
    ``~/.local/share/claude/versions/<version>`` behind the link ``~/.local/bin/claude``."""
    versions = home / ".local" / "share" / "claude" / "versions"
    versions.mkdir(parents=True)
    binary = versions / version
    shutil.copyfile(os.path.realpath(real_claude), binary)
    binary.chmod(0o755)
    link = home / ".local" / "bin" / "claude"
    link.parent.mkdir(parents=True)
    link.symlink_to(binary)
    return link


def _platform_binary(real_claude: Path) -> Path:
    """The platform package's own binary of the npm install (its package.json names the platform
    package, not the CLI's)."""
    found = list((Path(real_claude).parent.parent / "@anthropic-ai").glob("claude-code-linux-*/claude"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("layout", ["native", "platform"])
def test_every_layout_gives_the_version_the_table_hooks_outside_the_box_and_a_passing_verify(
        real_claude, cli_version, offline_env, model_server, tmp_path, monkeypatch, layout):
    cli = _native_layout(real_claude, offline_env.home, cli_version) if layout == "native" else _platform_binary(
        real_claude)
    server = model_server([{"match": "LAYOUT", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "touch boxed-ran", "description": "t"}}},
        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), cli)
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    assert cv.cli_version(str(cli)) == cli_version
    args = read_args(["-p", "x"], str(cli))
    assert (args.cli_version, args.table_version) == (cli_version, cli_version)
    if layout == "native":  # asked once, then known from the cache by its stat key
        assert cv.cached(cv.stat_key(os.path.realpath(cli)) or []) == (True, cli_version)
    # The user's own hook runs outside the box, as with the npm layout: it writes beside the project.
    outside = tmp_path / "outside"
    outside.mkdir()
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"touch {outside}/hook-ran"}]}]}}
    (offline_env.home / ".claude" / "settings.json").write_text(json.dumps(settings))
    config = Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\nallow = ["Bash(touch boxed-ran)"]\n')
    proc = subprocess.run(GUARD + ["-p", "LAYOUT"], env=env, cwd=offline_env.cwd, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "version unknown" not in proc.stderr
    assert (offline_env.cwd / "boxed-ran").exists()  # the allowed call ran (in the box, in the project)
    assert (outside / "hook-ran").exists(), proc.stderr  # the user's hook ran outside the box
    (offline_env.home / ".claude" / "settings.json").unlink()
    config.unlink()
    code, result = verify_json(env, offline_env.cwd)
    assert code == 0, [c for c in result["checks"] if not c["ok"]]
    assert result["cli_version"] == cli_version and result["ok"] is True
    assert [c["name"] for c in result["checks"]] == CHECKS and all(c["ok"] for c in result["checks"])


def test_the_native_installers_binaries_run_as_claude_code_processes():
    from claudeguard.ancestry import cli_executable

    assert cli_executable("/home/u/.local/share/claude/versions/2.1.330")
    assert cli_executable("/opt/ide/resources/native-binary/claude") and cli_executable("/x/bin/claude.exe")
    assert not cli_executable("/home/u/versions/2.1.330") and not cli_executable("/usr/bin/python3")
