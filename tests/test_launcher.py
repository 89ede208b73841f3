"""The installed `claudeguard` and `claudeguardctl`: the hand-written scripts of bin/ (a generated
console script would import `re` first, bench/RESULTS.md), found and skipped by discovery, and
exec'ing the real CLI for the commands they pass through.

Each test runs the launcher installed beside this interpreter, the program users run, in front of
a stand-in CLI that prints what it received (argv, its pid and the recursion token)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.plan.discovery import is_claudeguard

REPO = Path(__file__).resolve().parents[1]
INSTALLED = Path(sys.executable).with_name("claudeguard")


@pytest.fixture(scope="module")
def launcher() -> Path:
    if not INSTALLED.is_file():
        pytest.fail(f"{INSTALLED}: claudeguard is not installed in this interpreter's environment", pytrace=False)
    return INSTALLED


class Bed:
    def __init__(self, root: Path, launcher: Path) -> None:
        self.root = root
        self.launcher = launcher
        self.real_dir = root / "real"
        self.real_dir.mkdir()
        self.real = self.real_dir / "claude"
        self.real.write_text(
            f"#!{sys.executable}\n"
            "import json, os, sys\n"
            "print(json.dumps({'exe': sys.argv[0], 'argv': sys.argv[1:], 'pid': os.getpid(),"
            " 'token': os.environ.get('CLAUDEGUARD_EXEC_PID')}))\n"
        )
        self.real.chmod(0o755)
        self.home = root / "home"
        self.home.mkdir()
        self.cwd = root / "work" / "project"
        self.cwd.mkdir(parents=True)
        (root / "work" / ".git").mkdir()
        self.env = {"PATH": f"{self.real_dir}:/usr/bin:/bin", "HOME": str(self.home),
                    "XDG_CONFIG_HOME": str(self.home / "config"), "CLAUDEGUARD_RUNTIME_DIR": str(root / "rt"),
                    "CLAUDEGUARD_AUTO_VERIFY": "0"}

    def run(self, argv: list[str], env: dict[str, str] | None = None,
            exe: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([exe or str(self.launcher), *argv], env=env or self.env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


@pytest.fixture
def bed(tmp_path: Path, launcher: Path) -> Bed:
    return Bed(tmp_path, launcher)


@pytest.mark.parametrize("name", ["claudeguard", "claudeguardctl"])
def test_installed_commands_are_the_scripts_of_bin(launcher, name):
    installed = launcher.with_name(name).read_text()
    shebang, _, body = installed.partition("\n")
    assert shebang.startswith("#!") and "python" in shebang
    assert body == (REPO / "bin" / name).read_text().partition("\n")[2]
    assert "import re" not in body
    assert is_claudeguard(str(launcher.with_name(name)))


@pytest.mark.parametrize("arg", ["--version", "-v", "--help", "-h"])
def test_version_and_help_exec_the_real_cli(bed, arg):
    proc = bed.run([arg], dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real)))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["exe"] == str(bed.real) and seen["argv"] == [arg]
    assert seen["token"] == str(seen["pid"])  # exec'd, not a child: the token names the CLI's own pid
    assert not (bed.root / "rt").exists()  # a pass-through makes no runtime dir


def test_path_search_skips_every_kind_of_claudeguard(bed):
    shim_dir, copy_dir, link_dir = (bed.root / d for d in ("shim", "copy", "link"))
    for d in (shim_dir, copy_dir, link_dir):
        d.mkdir()
    (shim_dir / "claude").symlink_to(REPO / "bin" / "claude")  # bin/claude, by content
    shutil.copy2(bed.launcher, copy_dir / "claude")  # a copy of the installed launcher, by content
    (link_dir / "claude").symlink_to(bed.launcher)  # a link to the launcher itself, by path
    env = dict(bed.env, PATH=f"{shim_dir}:{copy_dir}:{link_dir}:::{bed.real_dir}:/usr/bin:/bin")
    proc = bed.run(["--version"], env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["exe"] == str(bed.real)
    assert is_claudeguard(str(copy_dir / "claude")) and not is_claudeguard(str(bed.real))


def test_the_claude_shim_runs_the_installed_launcher(bed):
    env = dict(bed.env, PATH=f"{bed.launcher.parent}:{bed.real_dir}:/usr/bin:/bin")
    proc = bed.run(["--version"], env, exe=str(REPO / "bin" / "claude"))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["exe"] == str(bed.real) and seen["argv"] == ["--version"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("where", ["user file", "project file", "CLAUDEGUARD_CONFIG"])
def test_any_config_file_can_name_the_cli(bed, where):
    env = dict(bed.env)
    configured = bed.root / "configured" / "claude"  # PATH leads elsewhere: only the file knows
    configured.parent.mkdir()
    shutil.copy2(bed.real, configured)
    text = f'[claude]\npath = "{configured}"\n'
    if where == "user file":
        _write(bed.home / "config" / "claudeguard" / "config.toml", text)
    elif where == "project file":
        project = _write(bed.cwd.parent / ".claudeguard.toml", text)  # above the cwd, below the .git
        # a repository's file names the CLI only once trusted (it would run a program of its choosing)
        proc = bed.run(["--version"], env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["exe"] == str(bed.real)
        trusted = subprocess.run([str(bed.launcher.with_name("claudeguardctl")), "config", "trust", str(project)],
                                 env=env, cwd=bed.cwd, capture_output=True, text=True, timeout=30)
        assert trusted.returncode == 0, trusted.stderr
    else:
        env["CLAUDEGUARD_CONFIG"] = str(_write(bed.root / "extra.toml", text))
    proc = bed.run(["--version"], env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["exe"] == str(configured)


def test_project_file_above_the_repository_root_is_not_read(bed):
    _write(bed.root / ".claudeguard.toml", "this is not TOML [\n")
    proc = bed.run(["--version"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["exe"] == str(bed.real)


@pytest.mark.parametrize("case", ["missing", "not executable", "is the launcher", "no claude on PATH"])
def test_errors_are_one_line(bed, case):
    env = dict(bed.env)
    if case == "missing":
        env["CLAUDEGUARD_CLAUDE"] = str(bed.root / "nothing")
    elif case == "not executable":
        env["CLAUDEGUARD_CLAUDE"] = str(_write(bed.root / "plain", "x"))
    elif case == "is the launcher":
        env["CLAUDEGUARD_CLAUDE"] = str(bed.launcher)
    else:
        env["PATH"] = "/usr/bin:/bin"
    proc = bed.run(["--version"], env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("claudeguard: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_a_session_ends_with_its_output_flushed_and_its_exit_code(bed):
    # The launcher leaves with os._exit after a session (no interpreter teardown): what it printed
    # through a pipe must still arrive whole, and the child's exit code must still be ours.
    proc = bed.run(["--guard-dry-run", "-p", "x"], env=dict(bed.env, CLAUDEGUARD_SERVICE="0"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["guarded"] is True
    for code in (0, 3):
        bed.real.write_text(f"#!/bin/sh\necho out-$$\nexit {code}\n")
        proc = bed.run(["-p", "x"], env=dict(bed.env, CLAUDEGUARD_SERVICE="0"))
        assert proc.returncode == code and proc.stdout.startswith("out-"), proc.stderr
    proc = bed.run(["--guard-report", str(bed.root / "missing" / "r.json"), "-p", "x"])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr


BROKEN = ('[security]\ndisable_bypass_permissions = true\n[permissions]\nallow = ["Bsh(ls *)"]\n'
          '[approval]\ntimeout = "soon"\n')


def _broken_lines(path: Path) -> list[str]:
    return [f"{path}:4: bad rule 'Bsh(ls *)' in 'permissions.allow': 'Bsh' is not a Claude Code tool: did you mean "
            f"Bash?",
            f"{path}:6: 'approval.timeout' must be a number of seconds or a duration such as 90s, 10m, 1h or 1h30m, "
            f"not 'soon'"]


@pytest.mark.parametrize("arg", ["--version", "-v", "--help", "-h"])
def test_a_broken_config_never_breaks_version_or_help(bed, arg):
    config = _write(bed.home / "config" / "claudeguard" / "config.toml", BROKEN)
    proc = bed.run([arg], dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["argv"] == [arg]  # the real CLI answered, exec'd
    asked = "--help" if arg in ("--help", "-h") else "--version"
    assert proc.stderr == (f"claudeguard: config error: {_broken_lines(config)[0]} (and 1 more); {asked} passed "
                           f"through to the real CLI (claudeguardctl config show lists every error)\n")


@pytest.mark.parametrize("argv, service", [(["-p", "hi"], "1"), (["-p", "hi"], "0"), (["hi"], "0"),
                                           (["mcp", "list"], "1"), (["doctor"], "0")])
def test_a_broken_config_stops_everything_that_may_run_a_tool(bed, argv, service):
    # lockdown is on in the broken file: what it would refuse is never let through (fail closed)
    config = _write(bed.home / "config" / "claudeguard" / "config.toml", BROKEN)
    proc = bed.run(argv, dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real), CLAUDEGUARD_SERVICE=service))
    assert proc.returncode == 2 and proc.stdout == ""  # the stand-in CLI never ran
    assert proc.stderr.splitlines() == [f"claudeguard: {line}" for line in _broken_lines(config)]
    assert not (bed.root / "rt" / "sessions").exists() or not list((bed.root / "rt" / "sessions").iterdir())


@pytest.mark.parametrize("argv, extra, said", [
    (["--guard-approval-timeout", "10x", "-p", "hi"], {}, "--guard-approval-timeout"),
    (["--guard-stall-after=5 min", "-p", "hi"], {}, "--guard-stall-after"),
    (["-p", "hi"], {"CLAUDEGUARD_STALL_AFTER": "5mins"}, "env CLAUDEGUARD_STALL_AFTER"),
])
def test_a_bad_duration_given_to_the_launcher_is_one_line_and_starts_nothing(bed, argv, extra, said):
    proc = bed.run(argv, dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real), CLAUDEGUARD_SERVICE="0", **extra))
    value = {"--guard-approval-timeout": "10x", "--guard-stall-after": "5 min"}.get(said, "5mins")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"claudeguard: {said}: expected a number of seconds or a duration such as 90s, 10m, 1h "
                           f"or 1h30m, got '{value}'\n")


def test_durations_are_taken_by_the_launchers_options_and_variables(bed):
    env = dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real), CLAUDEGUARD_SERVICE="0", CLAUDEGUARD_STALL_AFTER="5m")
    proc = bed.run(["--guard-approval-timeout", "10m", "--guard-dry-run", "-p", "hi"], env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["guarded"] is True


@pytest.mark.parametrize("argv", [["-p", "x"], ["x"], ["--version"]])
def test_a_removed_working_directory_is_one_line_and_starts_nothing(bed, argv):
    gone = bed.root / "gone"
    gone.mkdir()
    cmd = f"cd {gone} && rmdir {gone} && exec {bed.launcher} \"$@\""
    proc = subprocess.run(["/bin/sh", "-c", cmd, "sh", *argv], env=dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real)),
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr == ("claudeguard: the current directory no longer exists (it was removed): run claudeguard "
                           "from one that does\n")
    assert proc.stdout == ""  # the stand-in CLI never ran
    assert not (bed.root / "rt" / "sessions").exists() or not any((bed.root / "rt" / "sessions").iterdir())


@pytest.mark.parametrize("argv", [["config", "show"], ["doctor"], ["explain", "Bash(ls)"]])
def test_claudeguardctl_in_a_removed_working_directory_says_so_in_one_line(bed, argv):
    gone = bed.root / "gone"
    gone.mkdir()
    ctl = bed.launcher.with_name("claudeguardctl")
    cmd = f"cd {gone} && rmdir {gone} && exec {ctl} \"$@\""
    proc = subprocess.run(["/bin/sh", "-c", cmd, "sh", *argv], env=bed.env, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert (proc.returncode, proc.stderr) == (2, "claudeguardctl: the current directory no longer exists (it was "
                                                 "removed): run claudeguardctl from one that does\n")

