"""Installs as users make them, offline: an sdist built from this checkout into a fresh venv, and
an editable install of that sdist's tree (setuptools' default mode and the compat mode .ci/run
uses). From each venv, with no XDG_RUNTIME_DIR, the launcher passes `--version` to the real CLI
and plans a session, and the entry the CLI starts for the prompt tool and the hooks
(`python -E -S claudeguard/gate/fast_entry.py`) answers, imports the package's dependencies
(psutil, via `ps --all`) and decides a hook from a config file.

Nothing is downloaded: the venvs get the dependencies and the build backend as this environment
has them installed (their files copied), and pip runs with --no-index and no config files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache",
                              ".hypothesis")
PIP_ENV = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
PIP_OFFLINE = ["--no-index", "--no-deps", "--no-build-isolation", "--no-cache-dir", "--quiet"]


def _run(argv: list, **kw) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    kw.setdefault("timeout", 180)
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist of this checkout, built from a copy (the build writes into its source tree)."""
    root = tmp_path_factory.mktemp("sdist")
    src = root / "src"
    shutil.copytree(REPO, src, ignore=SKIP)
    out = root / "dist"
    _run([sys.executable, "-c", "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))", out],
         cwd=src, env=PIP_ENV)
    (built,) = out.glob("claudeguard-*.tar.gz")
    return built


def _runtime_requirements(name: str, seen: set[str]) -> None:
    """``name`` and what it needs at run time in this interpreter, recursively."""
    key = name.lower().replace("_", "-")
    if key in seen:
        return
    seen.add(key)
    for text in metadata.requires(name) or ():
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            _runtime_requirements(req.name, seen)


def _copy_installed(name: str, site_packages: Path) -> None:
    """Put distribution ``name`` into ``site_packages`` as this environment has it installed."""
    dist = metadata.distribution(name)
    for f in dist.files or ():
        if f.parts[0] == ".." or "__pycache__" in f.parts:
            continue  # scripts and caches: not needed to import it
        target = site_packages / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(dist.locate_file(f)), target)


def _fresh_venv(root: Path) -> Path:
    _run([sys.executable, "-m", "venv", "--without-pip", root / "venv"])
    python = root / "venv" / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    needed: set[str] = set()
    for dep in metadata.requires("claudeguard") or ():
        req = Requirement(dep)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            _runtime_requirements(req.name, needed)
    for name in sorted(needed | {"setuptools"}):  # setuptools: the build backend, for --no-build-isolation
        _copy_installed(name, site)
    return python


@pytest.fixture(params=["sdist", "editable", "editable compat"])
def venv(request: pytest.FixtureRequest, sdist: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(the fresh venv's python, where its claudeguard/gate/fast_entry.py should be)."""
    python = _fresh_venv(tmp_path)
    pip = [sys.executable, "-m", "pip", "--python", python, "install", *PIP_OFFLINE]
    if request.param == "sdist":
        _run([*pip, sdist], env=PIP_ENV)
        site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
        return python, site / "claudeguard" / "gate" / "fast_entry.py"
    with tarfile.open(sdist) as tar:
        # the "data" filter where this Python has it (3.12+ warns without one)
        tar.extractall(tmp_path / "unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (tree,) = (tmp_path / "unpacked").iterdir()
    mode = ["--config-settings", "editable_mode=compat"] if request.param == "editable compat" else []
    _run([*pip, *mode, "-e", tree], env=PIP_ENV)
    return python, tree / "claudeguard" / "gate" / "fast_entry.py"


def _user_env(tmp_path: Path, python: Path, **extra: str) -> dict[str, str]:
    """A user's environment as cron gives it: no XDG_RUNTIME_DIR, the venv's bin on PATH."""
    home = tmp_path / "home"
    (tmp_path / "work" / ".git").mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
           "CLAUDEGUARD_CACHE_DIR": str(tmp_path / "cache"), "CLAUDEGUARD_SERVICE": "0",
           "CLAUDEGUARD_AUTO_VERIFY": "0"}
    env.update(extra)
    return env


MCP_HANDSHAKE = "".join(json.dumps(m) + "\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
))


def _mcp_handshake(argv: list, env: dict[str, str], cwd: Path) -> None:  # type: ignore[type-arg]
    proc = _run(argv, env=env, cwd=cwd, input=MCP_HANDSHAKE, timeout=60)
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["result"]["serverInfo"]["name"] == "claudeguard"
    assert [t["name"] for t in replies[1]["result"]["tools"]] == ["approve"]


def test_the_sdist_builds_a_pure_wheel(sdist, tmp_path):
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    tracked = {str(p.relative_to(REPO)) for p in (REPO / "claudeguard").rglob("*.py")}
    assert tracked <= {n.partition("/")[2] for n in names}  # every module of the package
    # No extension to compile at install: the session box's entry is C source the guard builds at a
    # session's start where a compiler is found (plan/box_enter.py), shipped as package data.
    assert [n for n in names if n.endswith((".c", "setup.py"))] == ["claudeguard-0.1.0/claudeguard/plan/box_enter.c"]
    _run([sys.executable, "-m", "pip", "wheel", *PIP_OFFLINE, "-w", tmp_path, sdist], env=PIP_ENV)
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name == "claudeguard-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as whl:
        scripts = sorted(n for n in whl.namelist() if "/scripts/" in n)
    assert scripts == ["claudeguard-0.1.0.data/scripts/claudeguard", "claudeguard-0.1.0.data/scripts/claudeguardctl"]


def test_installed_without_xdg_runtime_dir(venv, bg_claude, tmp_path):
    python, fast_entry = venv
    bin_dir = python.parent
    work = tmp_path / "work"
    env = _user_env(tmp_path, python)

    # pexpect is the test kit's (the [test] extra): the product runs without it
    _run([python, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('pexpect') is not None)"], env=env)

    proc = _run([bin_dir / "claudeguard", "--version"], env=dict(env, CLAUDEGUARD_CLAUDE=str(bg_claude)), cwd=work)
    assert proc.stdout == _run([bg_claude, "--version"], env=env, cwd=work).stdout

    # A CLI of unknown version (no npm package.json beside it): its -p asks our prompt tool, whose
    # command is checked here (2.1.330's -p asks through the PermissionRequest hook instead).
    unknown = tmp_path / "unknown" / "claude"
    unknown.parent.mkdir()
    unknown.write_text("#!/bin/sh\nexit 0\n")  # never run: a dry run
    unknown.chmod(0o755)
    proc = _run([bin_dir / "claudeguard", "--guard-dry-run", "-p", "x"],
                env=dict(env, CLAUDEGUARD_CLAUDE=str(unknown)), cwd=work)
    plan = json.loads(proc.stdout)
    assert plan["guarded"] is True and plan["argv"][0] == str(unknown)
    assert plan["argv"][-3:-1] == ["-p", "x"] and plan["argv"][-1].startswith("--settings=")
    # the guard's settings stand last
    (mcp_flag,) = [a for a in plan["argv"] if a.startswith("--mcp-config=")]
    server = json.loads(mcp_flag.split("=", 1)[1])["mcpServers"]["claudeguard"]
    entry = [server["command"], *server["args"]]
    assert entry == [str(python), "-E", "-S", str(fast_entry), "mcp-serve"]  # the venv's own interpreter and files
    (settings_flag,) = [a for a in plan["argv"] if a.startswith("--settings=")]
    hooks = json.loads(settings_flag.split("=", 1)[1])["hooks"]
    assert hooks["PreToolUse"][0]["hooks"][0]["command"] == f"{python} -E -S {fast_entry} hook"

    _mcp_handshake(entry, env, work)  # exactly what the CLI starts
    _mcp_handshake([bin_dir / "claudeguardctl", "mcp-serve"], env, work)

    # A dependency imported through the -S entry: psutil lists the Claude processes of the
    # machine (other people's may be among them; none of this test's, which started none).
    proc = _run([*entry[:-1], "ps", "--all", "--json"], env=env, cwd=work)
    rows = json.loads(proc.stdout)
    assert proc.stderr == "" and isinstance(rows, list)
    assert not [r for r in rows if str(tmp_path) in str(r.get("cwd"))]

    # The hook with no session decides from the config file, in its own process.
    config = tmp_path / "home" / ".config" / "claudeguard" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\ndeny = ["Bash(rm -rf *)"]\n')
    event = {"hook_event_name": "PreToolUse", "session_id": "s", "cwd": str(work), "tool_use_id": "t1",
             "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}
    proc = _run([*entry[:-1], "hook"], env=env, cwd=work, input=json.dumps(event))
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny" and "Bash(rm -rf *)" in answer["permissionDecisionReason"]



def test_the_readmes_install_steps_end_in_a_guarded_claude(sdist, bg_claude, model_server, tmp_path):
    # Issue 36: the README's "Install and alias" commands, verbatim, in a fresh HOME (the venv
    # route: `pip install .` into a venv, here the sdist of this checkout, offline), ending in a
    # guarded `claude -p` that a rule of the starter config decides.
    from tests.conftest import API_KEY
    from claudeguard.testing.offline_home import offline_env, prepare_home

    python = _fresh_venv(tmp_path)
    _run([sys.executable, "-m", "pip", "--python", python, "install", *PIP_OFFLINE, sdist], env=PIP_ENV)
    steps = []
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Install and alias", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    for line in block.splitlines():
        command = line.split("#", 1)[0].strip()
        if command and not command.startswith("pipx "):  # the venv route: pip install . is done above
            steps.append(command)
    assert steps == ["alias claude=claudeguard", "claudeguardctl config init", "claudeguardctl doctor",
                     "claudeguard --guard-version"], steps
    server = model_server([{"match": "FIRST", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "rm -rf build", "description": "clean"}}},
        {"text": "fin"}]}])
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    prepare_home(home, cwd=work, api_key=API_KEY)
    env = offline_env(home, server.url, API_KEY)
    # the venv's commands and the real CLI on PATH, as after the README's install; a fresh HOME
    env["PATH"] = f"{python.parent}:{Path(bg_claude).parent}:/usr/bin:/bin"
    env.pop("CLAUDEGUARD_RUNTIME_DIR", None)
    env.update({"CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"), "CLAUDEGUARD_AUTO_VERIFY": "0"})
    (work / "build").mkdir()
    script = "shopt -s expand_aliases\n" + "\n".join(steps) + "\nclaude -p 'FIRST go'\n"
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=work, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = home / ".config" / "claudeguard" / "config.toml"
    assert f"wrote {config}" in proc.stdout and config.exists()
    assert "FAIL" not in proc.stdout, proc.stdout
    assert "real CLI" in proc.stdout  # doctor found it, and --guard-version named it
    # the rule decided: the starter config's deny held, the model was told, nothing ran
    [result] = [r for r in server.tool_results() if r["script"] == "FIRST"]
    assert "denied by Bash(rm -rf *)" in result["content"], result
    assert (work / "build").is_dir()
    rows = [json.loads(line) for line in (home / ".local" / "state" / "claudeguard" / "log" / "audit.jsonl")
            .read_text().splitlines()]
    assert [(r["decision"], r["rule"]) for r in rows if r.get("tool") == "Bash"] == [("deny", "Bash(rm -rf *)")]
