"""The native launcher (claudeguard/shim/launcher.c): execs the real CLI itself for --version and
--help when nothing else is to be decided, and hands every other call to the Python launcher
beside it, with the same outcome as the Python path alone.

Each test compiles the launcher into its tmp dir next to a `claudeguard-python` that notes each
start in a file, so a test sees which path a call took, not only what it printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claudeguard.shim.discovery import is_claudeguard

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "claudeguard" / "shim" / "launcher.c"
GUARD = [sys.executable, "-m", "claudeguard"]

CC = shutil.which("cc") or shutil.which("gcc")
if not CC or not sys.platform.startswith("linux"):
    if os.environ.get("CI") == "true":
        pytest.fail("the native launcher needs Linux and a C compiler on CI", pytrace=False)
    pytest.skip("the native launcher needs Linux and a C compiler", allow_module_level=True)


class Bed:
    def __init__(self, root: Path, *defines: str) -> None:
        self.root = root
        self.bin = root / "install" / "bin"
        self.bin.mkdir(parents=True)
        self.launcher = self.bin / "claudeguard"
        subprocess.run([CC, "-O2", "-Wall", "-Wextra", "-Werror", *defines, "-o", str(self.launcher), str(SOURCE)], check=True)
        self.python_ran = root / "python-ran"
        # Stands in for the installed Python launcher: notes that it ran, then is claudeguard.
        (self.bin / "claudeguard-python").write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"open({str(self.python_ran)!r}, 'a').write('ran\\n')\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from claudeguard.shim.main import main\n"
            "sys.exit(main())\n"
        )
        (self.bin / "claudeguard-python").chmod(0o755)
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
        self.env = {
            "PATH": f"{self.real_dir}:/usr/bin:/bin",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "PYTHONPATH": str(REPO),
        }

    def run(self, argv: list[str], env: dict[str, str] | None = None, exe: list[str] | None = None) -> subprocess.CompletedProcess:
        self.python_ran.unlink(missing_ok=True)
        return subprocess.run((exe or [str(self.launcher)]) + argv, env=env or self.env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=30)

    def outcome(self, argv: list[str], env: dict[str, str] | None = None) -> tuple[bool, subprocess.CompletedProcess]:
        """(did Python run, what the launcher gave), after checking Python alone gives the same."""
        native = self.run(argv, env)
        python_ran = self.python_ran.exists()
        alone = self.run(argv, env, exe=GUARD)
        assert (native.returncode, native.stderr) == (alone.returncode, alone.stderr)
        if native.returncode == 0:
            seen, seen_alone = json.loads(native.stdout), json.loads(alone.stdout)
            assert seen["argv"] == seen_alone["argv"] == argv
            assert seen["exe"] == seen_alone["exe"]  # the same real CLI
            assert seen["token"] == str(seen["pid"])  # the recursion token names the exec'ing pid
        return python_ran, native


@pytest.fixture
def bed(tmp_path: Path) -> Bed:
    return Bed(tmp_path)


@pytest.mark.parametrize("arg", ["--version", "-v", "--help", "-h"])
def test_version_and_help_exec_the_real_cli_without_python(bed, arg):
    python_ran, proc = bed.outcome([arg], dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real)))
    assert proc.returncode == 0, proc.stderr
    assert not python_ran


def test_path_search_skips_every_kind_of_claudeguard(bed):
    shim_dir, copy_dir, script_dir = (bed.root / d for d in ("shim", "copy", "script"))
    for d in (shim_dir, copy_dir, script_dir):
        d.mkdir()
    (shim_dir / "claude").symlink_to(REPO / "bin" / "claude")  # bin/claude, by content
    shutil.copy2(bed.launcher, copy_dir / "claude")  # a copy of the native launcher, by marker
    (script_dir / "claude").symlink_to(bed.launcher)  # a link to ourselves, by path
    env = dict(bed.env, PATH=f"{shim_dir}:{copy_dir}:{script_dir}:::{bed.real_dir}:/usr/bin:/bin")
    python_ran, proc = bed.outcome(["--version"], env)
    assert proc.returncode == 0, proc.stderr
    assert not python_ran
    assert is_claudeguard(str(copy_dir / "claude")) and not is_claudeguard(str(bed.real))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("where", ["user file", "project file", "CLAUDEGUARD_CONFIG"])
def test_any_config_file_goes_to_python(bed, where):
    env = dict(bed.env)
    configured = bed.root / "configured" / "claude"  # PATH leads elsewhere: only the file knows
    configured.parent.mkdir()
    shutil.copy2(bed.real, configured)
    text = f'[claude]\npath = "{configured}"\n'
    if where == "user file":
        _write(bed.home / "config" / "claudeguard" / "config.toml", text)
    elif where == "project file":
        _write(bed.cwd.parent / ".claudeguard.toml", text)  # above the cwd, below the .git
    else:
        env["CLAUDEGUARD_CONFIG"] = str(_write(bed.root / "extra.toml", text))
    python_ran, proc = bed.outcome(["--version"], env)
    assert proc.returncode == 0, proc.stderr
    assert python_ran
    assert json.loads(proc.stdout)["exe"] == str(configured)


def test_project_file_above_the_repository_root_is_not_read(bed):
    _write(bed.root / ".claudeguard.toml", "this is not TOML [\n")
    python_ran, proc = bed.outcome(["--version"])
    assert proc.returncode == 0, proc.stderr
    assert not python_ran


def test_user_file_under_home_when_xdg_is_unset(bed):
    env = {k: v for k, v in bed.env.items() if k != "XDG_CONFIG_HOME"}
    _write(bed.home / ".config" / "claudeguard" / "config.toml", "[claude\n")
    python_ran, proc = bed.outcome(["--version"], env)
    assert proc.returncode == 2 and "config.toml:1:" in proc.stderr
    assert python_ran


@pytest.mark.parametrize("argv", [["-p", "--version"], ["--version", "--guard-dry-run"], ["doctor"], ["hello"]])
def test_other_calls_go_to_python(bed, argv):
    env = dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real))
    bed.run(argv, env)
    assert bed.python_ran.exists()


@pytest.mark.parametrize("value, fast", [("1", False), ("yes", False), ("0", True), ("", True)])
def test_disable_goes_to_python_unless_off(bed, value, fast):
    python_ran, proc = bed.outcome(["--version"], dict(bed.env, CLAUDEGUARD_DISABLE=value))
    assert proc.returncode == 0, proc.stderr
    assert python_ran is not fast


def test_recursion_token_naming_the_parent_goes_to_python(bed):
    python_ran, proc = bed.outcome(["--version"], dict(bed.env, CLAUDEGUARD_EXEC_PID=str(os.getpid())))
    assert python_ran
    assert proc.returncode == 2 and "started as its own child" in proc.stderr


def test_recursion_token_of_someone_else_is_ignored(bed):
    python_ran, proc = bed.outcome(["--version"], dict(bed.env, CLAUDEGUARD_EXEC_PID="1"))
    assert proc.returncode == 0 and not python_ran


@pytest.mark.parametrize("case", ["missing", "not executable", "is the launcher", "no claude on PATH"])
def test_errors_are_worded_by_python(bed, case):
    env = dict(bed.env)
    if case == "missing":
        env["CLAUDEGUARD_CLAUDE"] = str(bed.root / "nothing")
    elif case == "not executable":
        env["CLAUDEGUARD_CLAUDE"] = str(_write(bed.root / "plain", "x"))
    elif case == "is the launcher":
        env["CLAUDEGUARD_CLAUDE"] = str(bed.launcher)
    else:
        env["PATH"] = "/usr/bin:/bin"
    python_ran, proc = bed.outcome(["--version"], env)
    assert python_ran
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("how", ["by path", "through a link", "by name on PATH", "by name in ''"])
def test_without_proc_the_launcher_finds_itself_from_argv0(tmp_path, how):
    bed = Bed(tmp_path, '-DSELF_EXE="/nonexistent/proc/self/exe"')  # as in a chroot without /proc
    links = tmp_path / "links"
    links.mkdir()
    (links / "claude").symlink_to(bed.launcher)
    env = dict(bed.env, CLAUDEGUARD_CLAUDE=str(bed.real))
    exe = {"by path": [str(bed.launcher)], "through a link": [str(links / "claude")]}.get(how, ["claude"])
    if how == "by name on PATH":
        env["PATH"] = f"{links}:{env['PATH']}"
    elif how == "by name in ''":
        env["PATH"] = f":{env['PATH']}"
        bed.cwd = links
    fast = bed.run(["--version"], env, exe=exe)
    assert fast.returncode == 0, fast.stderr
    assert json.loads(fast.stdout)["exe"] == str(bed.real) and not bed.python_ran.exists()
    slow = bed.run(["--guard-dry-run", "--version"], env, exe=exe)
    assert slow.returncode == 0, slow.stderr
    assert bed.python_ran.exists()  # found claudeguard-python beside the resolved launcher


def test_missing_python_launcher_is_one_line(bed):
    (bed.bin / "claudeguard-python").unlink()
    proc = bed.run(["-p", "hi"])
    assert proc.returncode == 2
    assert proc.stderr.startswith("claudeguard: cannot run ") and proc.stderr.count("\n") == 1


def test_installed_claudeguard_is_the_native_launcher():
    # setup.py compiles it wherever a compiler is, as here; the Python launcher sits beside it.
    installed = Path(sys.executable).with_name("claudeguard")
    if not installed.exists():
        pytest.fail(f"{installed}: claudeguard is not installed in this interpreter's environment")
    assert installed.read_bytes()[:4] == b"\x7fELF"
    assert is_claudeguard(str(installed))
    beside = installed.with_name("claudeguard-python")
    assert beside.read_bytes().startswith(b"#!")
    proc = subprocess.run([str(installed), "--guard-dry-run", "--version"], env=dict(os.environ, CLAUDEGUARD_CLAUDE=sys.executable),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["argv"] == [sys.executable, "--version"]


@pytest.mark.parametrize("compiler", ["found", "missing", "broken", "opted out"])
def test_setup_builds_the_native_launcher_or_falls_back(tmp_path, compiler):
    pytest.importorskip("setuptools")
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CLAUDEGUARD_NO_NATIVE_LAUNCHER")}
    if compiler == "missing":
        env["CC"] = str(tmp_path / "no-such-cc")
    elif compiler == "broken":
        broken = tmp_path / "cc"
        broken.write_text("#!/bin/sh\necho 'cc: internal error' >&2\nexit 1\n")
        broken.chmod(0o755)
        env["CC"] = str(broken)
    elif compiler == "opted out":
        env["CLAUDEGUARD_NO_NATIVE_LAUNCHER"] = "1"
    out = tmp_path / "scripts"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_scripts", "-d", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr  # the install never fails for want of a compiler
    python_launcher = (out / "claudeguard-python").read_bytes()
    assert python_launcher.startswith(b"#!") and b"claudeguard.shim.main" in python_launcher
    launcher = (out / "claudeguard").read_bytes()
    if compiler == "found":
        assert launcher[:4] == b"\x7fELF" and b"claudeguard-native-launcher" in launcher
    else:
        assert launcher == python_launcher
    assert os.access(out / "claudeguard", os.X_OK) and os.access(out / "claudeguard-python", os.X_OK)
    assert not list(out.glob("*.native"))  # no half-built file left
