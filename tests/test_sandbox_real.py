"""The sandbox on the real CLIs (issue 24 part 1): every Bash call of a guarded session runs in the
guard's own bubblewrap box (plan/sandbox.py), whoever allowed it, and from inside it (a shell,
and a python3 it runs) the guard's files, sockets, processes and secrets are out of reach, while
ordinary work is not changed.

The model's Bash call runs ``tests/data/box_probe.py``, which waits for a targets file that the
test writes once the session runs (the CLI's and the service's pids are known only then) and
prints one line per check; the test reads those lines from the tool result the model server
received, and checks the outcome outside too (the service still alive, the files unchanged).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from claudeguard.testing.tui import expect_text
from claudeguard.testing.wait import wait_until
from claudeguard.plan import box_enter
from tests.conftest import BOX_ENTER, in_ci
from tests.shim_helpers import GUARD, Approver, guarded_env, mark_verified, results_of, write_user_config

PROBE = Path(__file__).parent / "data" / "box_probe.py"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None and not in_ci(),
                                reason="bubblewrap is not installed (under CI=true this fails instead)")


def _need_bwrap() -> None:
    assert shutil.which("bwrap"), "bubblewrap (bwrap) is not installed: apt-get install -y bubblewrap"


class _Servers:
    """A Unix socket server (docker's stand-in, in the project: where the box shows it, as it
    shows /var/run/docker.sock) and a loopback HTTP server (a new domain's)."""

    def __init__(self, root: Path) -> None:
        self.unix_path = root / "docker.sock"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(str(self.unix_path))
        self.unix.listen()
        self.unix_seen = 0
        threading.Thread(target=self._serve_unix, daemon=True).start()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.http_seen += 1
                body = b"HTTP-STAND-IN"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http_seen = 0
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http_port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def _serve_unix(self) -> None:
        while True:
            try:
                conn, _ = self.unix.accept()
            except OSError:
                return
            self.unix_seen += 1
            conn.sendall(b"DOCKER-STAND-IN\n")
            conn.close()

    def close(self) -> None:
        self.unix.close()
        self.http.shutdown()
        self.http.server_close()


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _project(work: Path) -> None:
    """A git checkout with a second branch and a test command."""
    _git(work, "init", "-q", "-b", "main")
    (work / "run_tests.sh").write_text("python3 -c 'assert 1 + 1 == 2' && echo TESTS-PASSED\n")
    _git(work, "add", "run_tests.sh")
    _git(work, "commit", "-q", "-m", "start")
    _git(work, "branch", "other")


def _cli_pid(launcher: subprocess.Popen[str], real_claude: Path) -> int:
    def find() -> int | None:
        try:
            for child in psutil.Process(launcher.pid).children(recursive=True):
                try:
                    if str(real_claude) in " ".join(child.cmdline()) or child.name() in ("claude", "claude.exe"):
                        return child.pid
                except psutil.Error:
                    continue
        except psutil.Error:
            return None
        return None

    return wait_until(find, 60, "the real CLI under the launcher", interval=0.1)


Probed = tuple[subprocess.CompletedProcess[str], dict[str, str], dict[str, Any]]


def _run_probe_approved_once(env: dict[str, str], cwd: Path, real_claude: Path, server: Any,
                             checks: list[str]) -> tuple[Any, Any, dict[str, Any]]:
    """``_run_probe`` while a human approves what waits in the channel: exactly one request is
    asked and approved. Returns (the run, the probe's findings, the one request seen)."""
    approver = Approver(env, [("approve", [])])
    approver.start()
    proc, found, _ = _run_probe(env, cwd, real_claude, server, checks, {})
    approver.finish()
    assert approver.error is None and len(approver.seen) == 1, approver.error
    return proc, found, approver.seen[0]


def _run_probe(env: dict[str, str], cwd: Path, real_claude: Path, server: Any, checks: list[str],
               extra_targets: dict[str, Any]) -> Probed:
    """One guarded -p session whose Bash call runs the probe with ``checks``; returns the run, each
    check's "YES ..."/"no ..." line, and the targets given."""
    shutil.copy(PROBE, cwd / "box_probe.py")
    targets_file = cwd / "targets.json"
    launcher = subprocess.Popen(GUARD + ["-p", "BOXPROBE go", "--output-format", "stream-json", "--verbose"],
                                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        cli = _cli_pid(launcher, real_claude)
        runtime = Path(env["CLAUDEGUARD_RUNTIME_DIR"])
        record = wait_until(lambda: _json(runtime / "service" / "service.json"), 60, "the guard service's record")
        session = wait_until(lambda: next(iter(sorted((runtime / "sessions").glob("*/session.json"))), None), 60,
                             "the session file")
        targets = {"runtime": str(runtime), "session_file": str(session),
                   "service_record": str(runtime / "service" / "service.json"),
                   "control_socket": str(runtime / "service" / "control.sock"), "cli_pid": cli,
                   "service_pid": record["pid"], "project": str(cwd), **extra_targets}
        tmp = targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(targets))
        tmp.rename(targets_file)
        out, err = launcher.communicate(timeout=240)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    proc = subprocess.CompletedProcess(launcher.args, launcher.returncode, out, err)
    found: dict[str, str] = {}
    for result in server.tool_results():
        found.update(_checks(result["content"]))
    return proc, found, targets


def _checks(content: str) -> dict[str, str]:
    """The probe's lines in a tool result: check -> "YES detail" or "no  detail"."""
    found = {}
    for line in content.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "check" in row:
            found[row["check"]] = ("YES " if row["ok"] else "no  ") + row["detail"]
    return found


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _scenario(checks: list[str], dangerously: bool = False) -> list[dict[str, Any]]:
    command = f"python3 box_probe.py targets.json {' '.join(checks)}"
    tool_input: dict[str, Any] = {"command": command, "description": "probe the box"}
    if dangerously:
        tool_input["dangerouslyDisableSandbox"] = True
    return [{"match": "BOXPROBE", "turns": [{"tool_use": {"name": "Bash", "input": tool_input}}, {"text": "fin"}]}]


OUT_OF_REACH = ["read_runtime", "read_session_file", "cat_runtime", "read_config", "cat_config", "read_log",
                "cli_environ", "cat_cli_environ", "control_socket", "visible_socket", "kill_service",
                "sh_kill_service", "write_config", "sh_write_config", "write_settings_local",
                "sh_write_settings_local", "write_git_hook", "write_outside"]
ORDINARY = ["write_project", "run_tests", "git_commit", "git_checkout", "http_loopback"]


@pytest.mark.newest_cli
@pytest.mark.parametrize("way", ["box-script", "cli-shell"])
def test_a_call_runs_in_the_sessions_own_box(real_claude, offline_env, model_server, way):
    """Issue 34: the launcher keeps one box for the session (plan/box_enter.py), and a call made
    once it is live runs in it: its pid 1 is the session box's entry, not a bwrap of its own,
    and the runtime dir is out of its reach. Through the box script (the CLI's prefix), and
    through the CLI's shell that enters the box itself (once the entry ran a trial call on the
    machine: box_enter.RAN_SUFFIX). (The call waits in the channel until the box is live, so that
    the test does not hang on the launcher's timing.)"""
    if in_ci():
        _need_bwrap()
        assert BOX_ENTER, "the session box's entry did not build (no C compiler?)"
    elif not BOX_ENTER:
        pytest.skip("no C compiler to build the session box's entry")
    ran = Path(BOX_ENTER + box_enter.RAN_SUFFIX)
    if way == "cli-shell":
        ran.touch()
    else:
        ran.unlink(missing_ok=True)  # (the launcher's trial call writes it again)
    server = model_server(_scenario(WHO + ["pid1_argv0"]))
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nask = ["Bash(python3 box_probe.py *)"]\n')
    sessions = Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions"

    class AfterLive(Approver):
        def _next(self) -> Any:
            found = super()._next()
            if found is not None:
                wait_until(lambda: list(sessions.glob(f"*/{box_enter.LIVE_FILE}")), 60, "the session box live")
            return found

    approver = AfterLive(env, [("approve", [])])
    approver.start()
    proc, found, _ = _run_probe(env, offline_env.cwd, real_claude, server, WHO + ["pid1_argv0"], {})
    approver.finish()
    assert approver.error is None and len(approver.seen) == 1, approver.error
    assert proc.returncode == 0, proc.stderr
    assert found["pid1"] == "YES box-enter", found
    assert found["read_runtime"].startswith("no"), found
    assert found["pid1_argv0"] == ("YES bash" if way == "cli-shell" else "YES box-enter"), found


@pytest.mark.newest_cli
def test_a_boxed_call_reaches_none_of_the_guard_and_ordinary_work_goes_on(real_claude, offline_env, model_server,
                                                                          tmp_path):
    if in_ci():
        _need_bwrap()
    _project(offline_env.cwd)
    server = model_server(_scenario(OUT_OF_REACH + ORDINARY))
    env = guarded_env(offline_env.use(server), real_claude)
    config = write_user_config(env, '[permissions]\nallow = ["Bash(python3 box_probe.py *)"]\n')
    config_text = config.read_text()
    servers = _Servers(offline_env.cwd)
    outside = tmp_path / "outside"
    outside.mkdir()
    try:
        proc, found, targets = _run_probe(env, offline_env.cwd, real_claude, server, OUT_OF_REACH + ORDINARY, {
            "config": str(config), "log": env["CLAUDEGUARD_LOG_DIR"], "visible_socket": str(servers.unix_path),
            "outside_file": str(outside / "npm-global.txt"), "http_port": servers.http_port})
    finally:
        servers.close()
    assert proc.returncode == 0, proc.stderr
    assert set(found) == set(OUT_OF_REACH + ORDINARY), found
    reached = {name: line for name, line in found.items() if name in OUT_OF_REACH and line.startswith("YES")}
    assert reached == {}, reached
    assert "EPERM" in found["visible_socket"] or "Operation not permitted" in found["visible_socket"]
    # Refused (the README's allow_write names the widening): a read-only root, and a /tmp of the
    # session's own, where this test's dirs are not (npm's /usr/local gets EROFS).
    assert "Read-only file system" in found["write_outside"] or "No such file" in found["write_outside"]
    blocked = {name: line for name, line in found.items() if name in ORDINARY and not line.startswith("YES")}
    assert blocked == {}, blocked
    assert "TESTS-PASSED" in found["run_tests"] and found["git_checkout"].endswith("other")
    # Outside the box: nothing of it happened.
    assert psutil.pid_exists(targets["service_pid"])
    assert config.read_text() == config_text
    assert not (offline_env.cwd / ".claude" / "settings.local.json").exists()
    assert not (offline_env.cwd / ".git" / "hooks" / "pre-commit").exists()
    assert not (outside / "npm-global.txt").exists()
    assert servers.unix_seen == 0 and servers.http_seen == 1
    assert "from the box" in _git(offline_env.cwd, "log", "--oneline", "main")
    assert results_of(proc)[-1]["permission_denials"] == []


def test_the_widenings_the_readme_names(real_claude, offline_env, model_server, tmp_path):
    """`docker ps` (a Unix socket) and `npm install -g` (a write outside the project) work once
    the user's config gives the README's widening."""
    if in_ci():
        _need_bwrap()
    _project(offline_env.cwd)
    checks = ["visible_socket", "write_outside", "control_socket", "read_runtime", "write_config"]
    server = model_server(_scenario(checks))
    env = guarded_env(offline_env.use(server), real_claude)
    outside = tmp_path / "outside"
    outside.mkdir()
    config = write_user_config(env, f'[permissions]\nallow = ["Bash(python3 box_probe.py *)"]\n\n[sandbox]\n'
                                    f'allow_unix_sockets = true\nallow_write = ["{outside}"]\n')
    servers = _Servers(offline_env.cwd)
    try:
        proc, found, _ = _run_probe(env, offline_env.cwd, real_claude, server, checks, {
            "config": str(config), "visible_socket": str(servers.unix_path),
            "outside_file": str(outside / "npm-global.txt")})
    finally:
        servers.close()
    assert proc.returncode == 0, proc.stderr
    assert found["visible_socket"].strip() == "YES DOCKER-STAND-IN", found
    assert found["write_outside"].startswith("YES") and (outside / "npm-global.txt").exists()
    # The guard's own paths stay out of reach with every widening.
    for name in ("control_socket", "read_runtime", "write_config"):
        assert found[name].startswith("no"), found
    assert servers.unix_seen == 1


# --- whoever allows the call, it runs in the box ---------------------------------------------------

WHO = ["pid1", "read_runtime"]


def _boxed(found: dict[str, str]) -> bool:
    """The call ran in the box: its pid 1 is bwrap (a box of the call's own) or the session box's
    entry (plan/box_enter.py), and the runtime dir is out of its reach."""
    return _pid1_boxed(found["pid1"]) and found["read_runtime"].startswith("no")


def _pid1_boxed(pid1: str) -> bool:
    name = pid1.removeprefix("YES ")  # the probe's "YES <what it read>"
    return name == "bwrap" or name.startswith("box-enter")


def _audit(env: dict[str, str]) -> list[dict[str, Any]]:
    path = Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_call_a_human_approves_through_the_channel_runs_boxed(real_claude, offline_env, model_server):
    if in_ci():
        _need_bwrap()
    server = model_server(_scenario(WHO))
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nask = ["Bash(python3 box_probe.py *)"]\n')
    proc, found, _ = _run_probe_approved_once(env, offline_env.cwd, real_claude, server, WHO)
    assert proc.returncode == 0, proc.stderr
    assert _boxed(found), found


@pytest.mark.newest_cli
def test_a_call_the_clis_own_asker_gets_approved_runs_boxed(real_claude, cli_version, offline_env, model_server):
    """No rule decides: in -p a human is asked through the channel, by the CLI's asker (the
    guard's prompt tool) on 2.1.197, by the guard's PreToolUse hook itself on 2.1.330 and later
    (issue 27: a PreToolUse "ask" there denies without asking anyone)."""
    if in_ci():
        _need_bwrap()
    server = model_server(_scenario(WHO))
    env = guarded_env(offline_env.use(server), real_claude)
    proc, found, _ = _run_probe_approved_once(env, offline_env.cwd, real_claude, server, WHO)
    assert proc.returncode == 0, proc.stderr
    assert _boxed(found), found
    (row,) = [r for r in _audit(env) if r["tool"] == "Bash"]
    assert row["via"] == ("prompt-tool" if cli_version == "2.1.197" else "hook"), row
    assert row["decided_by"] == "human", row


@pytest.mark.newest_cli
def test_leaving_the_box_is_asked_even_under_an_allow_rule_and_a_humans_yes_lets_it_out_once(
        real_claude, offline_env, model_server):
    if in_ci():
        _need_bwrap()
    server = model_server([{"match": "BOXPROBE", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "python3 box_probe.py targets.json pid1 read_runtime",
                                                "description": "out", "dangerouslyDisableSandbox": True}}},
        {"tool_use": {"name": "Bash", "input": {"command": "python3 box_probe.py targets.json pid1",
                                                "description": "in again"}}},
        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Bash(python3 box_probe.py *)"]\n')
    proc, _, seen = _run_probe_approved_once(env, offline_env.cwd, real_claude, server, [])
    assert seen["input"]["dangerouslyDisableSandbox"] is True, seen
    assert proc.returncode == 0, proc.stderr
    first, second = (_checks(r["content"]) for r in server.tool_results())
    assert not _pid1_boxed(first["pid1"]) and first["read_runtime"].startswith("YES")  # out of the box, once
    assert _pid1_boxed(second["pid1"])  # the next call is boxed again
    rows = [r for r in _audit(env) if r["tool"] == "Bash"]
    assert [(r["decided_by"], r.get("ask_rule")) for r in rows] == [
        ("human", "Bash(dangerouslyDisableSandbox)"), ("rule", None)], rows


def test_leaving_the_box_is_denied_under_lockdown(real_claude, offline_env, model_server):
    if in_ci():
        _need_bwrap()
    server = model_server(_scenario(WHO, dangerously=True))
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[security]\ndisable_bypass_permissions = true\n\n'
                           '[permissions]\nallow = ["Bash(python3 box_probe.py *)"]\n')
    mark_verified(env, real_claude)  # lockdown runs only a CLI that passed doctor --verify
    proc, found, _ = _run_probe(env, offline_env.cwd, real_claude, server, WHO, {})
    assert proc.returncode == 0, proc.stderr
    assert found == {}
    (result,) = server.tool_results()
    assert result["is_error"] and "no command may run outside the sandbox" in result["content"]


def test_a_cd_carries_over_to_the_next_boxed_call(real_claude, offline_env, model_server):
    if in_ci():
        _need_bwrap()
    (offline_env.cwd / "sub").mkdir()
    server = model_server([{"match": "CDTEST", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "cd sub && echo moved", "description": "cd"}}},
        {"tool_use": {"name": "Bash", "input": {"command": "pwd", "description": "where"}}},
        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nallow = ["Bash(cd *)", "Bash(pwd)"]\n')
    proc = subprocess.run(GUARD + ["-p", "CDTEST go", "--output-format", "stream-json", "--verbose"], env=env,
                          cwd=offline_env.cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    moved, where = (r["content"].strip() for r in server.tool_results())
    assert moved == "moved"
    assert where == str(offline_env.cwd / "sub")


@pytest.mark.newest_cli
def test_a_call_answered_at_the_keyboard_runs_boxed(real_claude, offline_env, model_server, spawn_tui):
    """A dialog on the CLI's own screen, answered at the keyboard: no answer of the guard's
    carries that call's input, and the prefix boxes it all the same."""
    if in_ci():
        _need_bwrap()
    shutil.copy(PROBE, offline_env.cwd / "box_probe.py")
    (offline_env.cwd / "targets.json").write_text(json.dumps({"runtime": offline_env["CLAUDEGUARD_RUNTIME_DIR"]}))
    server = model_server([{"match": "KEYBOARD", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": "python3 box_probe.py targets.json pid1 read_runtime",
                                                "description": "probe"}}}, {"text": "KEYBOARD-DONE"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, "[approval]\nidle_before_channel = 60\n")
    child = spawn_tui(GUARD + ["--permission-mode", "default", "KEYBOARD go"], env, offline_env.cwd)
    expect_text(child, "Do you want to proceed?", timeout=60)
    child.send("\r")  # Enter on the highlighted "Yes", at the keyboard
    expect_text(child, "KEYBOARD-DONE", timeout=60)
    (result,) = server.tool_results()
    found = _checks(result["content"])
    assert _boxed(found), found
    assert not [r for r in _audit(env) if r.get("decided_by") == "human"]


@pytest.mark.newest_cli
def test_no_settings_file_of_the_repository_or_the_user_switches_the_box_off(real_claude, offline_env, model_server):
    """A project, local and user ``env`` block that empties or replaces the prefix, and a
    project that turns Claude Code's own sandbox on (its proxy would refuse the guard's hooks,
    and every call would run unguarded): the guard's --settings win, the ask rule still asks,
    and the call runs boxed."""
    if in_ci():
        _need_bwrap()
    claude_dir = offline_env.cwd / ".claude"
    claude_dir.mkdir()
    (claude_dir / "settings.json").write_text(json.dumps({"env": {"CLAUDE_CODE_SHELL_PREFIX": ""},
                                                          "sandbox": {"enabled": True}}))
    (claude_dir / "settings.local.json").write_text(json.dumps({"env": {"CLAUDE_CODE_SHELL_PREFIX": "/bin/echo"}}))
    (offline_env.home / ".claude" / "settings.json").write_text(json.dumps({"env": {"CLAUDE_CODE_SHELL_PREFIX": ""}}))
    server = model_server(_scenario(WHO))
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, '[permissions]\nask = ["Bash(python3 box_probe.py *)"]\n')
    proc, found, _ = _run_probe_approved_once(env, offline_env.cwd, real_claude, server, WHO)  # the hooks were heard
    assert proc.returncode == 0, proc.stderr
    assert _boxed(found), found
    assert "Claude Code's own sandbox (project" in proc.stderr and "stays off" in proc.stderr
