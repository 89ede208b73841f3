"""Lockdown covers the commands that start background sessions (2.1.330): ``agents`` and ``--bg``
with a bypass flag, and ``respawn``/``attach`` of a session recorded with one, are refused with
exit 2 and one line, and nothing starts: no daemon, no session, no socket dir, no model request.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from claudeguard.testing import bg_daemon as bg
from claudeguard.testing.services import live_services, stop_services
from tests.shim_helpers import GUARD, guarded_env, mark_verified, wait_until, write_user_config

LOCKDOWN = '[security]\ndisable_bypass_permissions = true\n'
BYPASS_SETTINGS = json.dumps({"permissions": {"defaultMode": "bypassPermissions"}})
RESUME_ID = str(uuid.UUID(int=7))

REFUSED = [
    (["agents", "--dangerously-skip-permissions"], "agents: --dangerously-skip-permissions is refused"),
    (["agents", "--allow-dangerously-skip-permissions"], "agents: --allow-dangerously-skip-permissions is refused"),
    (["agents", "--permission-mode", "bypassPermissions"], "agents: --permission-mode bypassPermissions is refused"),
    (["agents", "--permission-mode=bypassPermissions"], "agents: --permission-mode bypassPermissions is refused"),
    (["agents", "--model", "x", "--permission-mode", "bypassPermissions", "--json"],
     "--permission-mode bypassPermissions is refused"),
    (["agents", "--settings", BYPASS_SETTINGS], "agents: --settings sets permissions.defaultMode bypassPermissions"),
    (["--bg", "--dangerously-skip-permissions", "hello"], "--dangerously-skip-permissions is refused"),
    (["--bg", "--allow-dangerously-skip-permissions", "hello"], "--allow-dangerously-skip-permissions is refused"),
    (["--bg", "--permission-mode", "bypassPermissions", "hello"], "--permission-mode bypassPermissions is refused"),
    (["--background", "--permission-mode=bypassPermissions", "hello"],
     "--permission-mode bypassPermissions is refused"),
    (["--resume", RESUME_ID, "--bg", "--permission-mode", "bypassPermissions", "again"],
     "--permission-mode bypassPermissions is refused"),
    (["--bg", "--settings", BYPASS_SETTINGS, "hello"],
     "--settings (inline JSON): permissions.defaultMode: bypassPermissions"),
]

IDS = [" ".join(a if not a.startswith("{") else "BYPASS-SETTINGS" for a in argv) for argv, _ in REFUSED]


def _run(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(GUARD + argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, start_new_session=True)


# --- with a stand-in CLI: fast, and proves pass-through where nothing is loosened ---------------


@pytest.fixture
def fake(tmp_path, offline_env):
    marker = tmp_path / "child-started"
    cli = tmp_path / "fake-claude"
    cli.write_text(f'#!/bin/sh\necho "$@" > {marker}\n')
    cli.chmod(0o755)
    write_user_config(offline_env, LOCKDOWN)
    return dict(offline_env, CLAUDEGUARD_CLAUDE=str(cli)), marker


@pytest.mark.parametrize("argv, words", REFUSED, ids=IDS)
def test_refused_with_a_stand_in(fake, offline_env, argv, words):
    env, marker = fake
    proc = _run(argv, env, offline_env.cwd)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert words in proc.stderr and proc.stderr.count("\n") == 1
    assert not marker.exists()


@pytest.mark.parametrize("argv", [["agents", "--json"], ["agents", "--permission-mode", "acceptEdits", "--json"],
                                  ["respawn", "--all"], ["attach", "abc"], ["stop", "abc"]])
def test_sub_commands_that_loosen_nothing_pass_through(fake, offline_env, argv):
    env, marker = fake
    proc = _run(argv, env, offline_env.cwd)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text().split() == argv


def _record_job(env: dict, short: str, flags: list[str], name: str = "ok") -> None:
    """What 2.1.330 writes for a background session (only the fields the guard reads)."""
    job = bg.config_dir(env) / "jobs" / short
    job.mkdir(parents=True)
    (job / "state.json").write_text(json.dumps({"state": "stopped", "respawnFlags": flags, "name": name,
                                                "sessionId": f"{short}-0000-4000-8000-000000000000"}))


@pytest.mark.parametrize("argv", [["respawn", "5d2fa609"], ["respawn", "--all"], ["attach", "5d2f"],
                                  ["attach", "nightly"], ["respawn", "5d2fa609-0000"]])
@pytest.mark.parametrize("flags", [["--dangerously-skip-permissions"], ["--permission-mode", "bypassPermissions", "x"],
                                   ["--permission-mode=bypassPermissions"], ["--allow-dangerously-skip-permissions"]])
def test_respawn_and_attach_of_a_bypass_session_are_refused(fake, offline_env, argv, flags):
    env, marker = fake
    _record_job(env, "1111aaaa", ["--settings", "{}", "quiet"], name="other")
    _record_job(env, "5d2fa609", flags, name="nightly build")
    proc = _run(argv, env, offline_env.cwd)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "5d2fa609 is refused: that background session was started with --" in proc.stderr
    assert not marker.exists()


def test_respawn_of_a_session_without_bypass_passes(fake, offline_env):
    env, marker = fake
    _record_job(env, "1111aaaa", ["--permission-mode", "acceptEdits", "x"])
    _record_job(env, "5d2fa609", ["--dangerously-skip-permissions"])
    proc = _run(["respawn", "1111aaaa"], env, offline_env.cwd)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text().split() == ["respawn", "1111aaaa"]


# --- on the real 2.1.330 -------------------------------------------------------------------------


@pytest.fixture
def short_runtime() -> Any:
    """A runtime dir with a path short enough for the guard service's Unix sockets (the one
    under pytest's tmp_path is not, and the service then never starts, which would hide a
    service started before a refusal); stopped and removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="cgbg-"))
    yield path
    stop_services(path)
    shutil.rmtree(path, ignore_errors=True)


def _nothing_started(env: dict, server) -> None:  # type: ignore[no-untyped-def]
    cfg = bg.config_dir(env)
    assert live_services(Path(env["CLAUDEGUARD_RUNTIME_DIR"])) == []  # not even the guard service
    assert bg.daemon_pid(cfg) is None
    assert not (cfg / "daemon.lock").exists()
    assert bg.live_processes(env) == []
    assert not bg.socket_dir(cfg).exists()
    assert len(server.requests()) == 0


@pytest.mark.parametrize("argv, words", REFUSED, ids=IDS)
def test_refused_on_the_real_cli(bg_claude, model_server, offline_env, bg_daemon, short_runtime, argv, words):
    server = model_server([{"match": "hello", "turns": [{"text": "hi"}]}])
    env = guarded_env(offline_env.use(server), bg_claude, CLAUDEGUARD_RUNTIME_DIR=str(short_runtime))
    write_user_config(env, LOCKDOWN)
    jobs_before = sorted((bg.config_dir(env) / "jobs").glob("*"))
    proc = _run(argv, env, offline_env.cwd)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert words in proc.stderr and proc.stderr.count("\n") == 1
    _nothing_started(env, server)
    assert sorted((bg.config_dir(env) / "jobs").glob("*")) == jobs_before == []


def test_the_real_cli_would_have_started_a_daemon(bg_claude, model_server, offline_env, bg_daemon):
    """The control for the test above: unlocked, the same checks do see a daemon and a session."""
    server = model_server([{"match": "hello", "turns": [{"text": "hi from the background"}]}])
    env = offline_env.use(server)
    launch = bg.launch_bg([bg_claude, "--bg", "hello"], env, offline_env.cwd)
    assert launch.returncode == 0 and launch.short_id, launch.stderr
    cfg = bg.config_dir(env)
    pid = bg.wait_for_daemon(cfg)
    wait_until(lambda: "hi from the background" in bg.job_texts(cfg, launch.short_id), 60, what="the reply")
    agents = bg.list_agents(bg_claude, env, offline_env.cwd)
    assert [a["id"] for a in agents] == [launch.short_id]
    assert agents[0]["pid"] != pid and agents[0]["kind"] == "background"
    assert pid in bg.live_processes(env) and bg.socket_dir(cfg).is_dir()
    session_pid = agents[0]["pid"]
    report = bg_daemon.stop(env)
    # The session's process is stopped with the daemon, unless it had already ended on its own
    # (its one reply given) between the listing and the stop: seen once on a loaded machine.
    assert report.daemon_pid == pid and pid in report.stopped
    assert session_pid in report.stopped or not psutil.pid_exists(session_pid)
    assert bg.live_processes(env) == [] and not bg.socket_dir(cfg).exists()


def test_respawn_and_attach_of_a_real_bypass_session_are_refused(bg_claude, model_server, offline_env, bg_daemon,
                                                                 short_runtime):
    server = model_server([{"match": "hello", "turns": [{"text": "hi"}]}])
    env = offline_env.use(server)
    state = json.loads((offline_env.home / ".claude.json").read_text())
    state["bypassPermissionsModeAccepted"] = True  # else: "requires accepting the disclaimer first"
    (offline_env.home / ".claude.json").write_text(json.dumps(state))
    # As root, 2.1.330 refuses bypass mode unless it is told it runs in a sandbox.
    launch = bg.launch_bg([bg_claude, "--bg", "--dangerously-skip-permissions", "hello"], dict(env, IS_SANDBOX="1"),
                          offline_env.cwd)
    assert launch.returncode == 0 and launch.short_id, launch.stderr
    cfg = bg.config_dir(env)
    wait_until(lambda: "hi" in bg.job_texts(cfg, launch.short_id), 60, what="the reply")
    assert bg.job_state(cfg, launch.short_id)["respawnFlags"] == ["--dangerously-skip-permissions"]
    bg_daemon.stop(env)
    assert bg.live_processes(env) == []
    requests_before = len(server.requests())

    guarded = guarded_env(env, bg_claude, CLAUDEGUARD_RUNTIME_DIR=str(short_runtime))
    write_user_config(guarded, LOCKDOWN)
    for argv in (["respawn", launch.short_id], ["respawn", "--all"], ["attach", launch.short_id[:4]]):
        proc = _run(argv, guarded, offline_env.cwd)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stderr.count("\n") == 1
        assert (f"{launch.short_id} is refused: that background session was started with "
                "--dangerously-skip-permissions") in proc.stderr
        assert bg.daemon_pid(cfg) is None and bg.live_processes(env) == []
        assert live_services(short_runtime) == []
        assert not bg.socket_dir(cfg).exists()
    assert len(server.requests()) == requests_before


def test_agent_view_without_the_service_says_it_is_not_guarded_and_lockdown_refuses_it(fake, offline_env):
    env, marker = fake  # lockdown is on in this fixture's config
    env = dict(env, CLAUDEGUARD_SERVICE="0")
    proc = _run(["agents"], env, offline_env.cwd)
    assert (proc.returncode, proc.stdout) == (2, "") and proc.stderr.count("\n") == 1, proc.stderr
    assert ("agent view (claude agents) are not guarded: the guard service is off (CLAUDEGUARD_SERVICE=0); "
            "refused under lockdown") in proc.stderr
    assert not marker.exists()
    write_user_config(offline_env, "")  # lockdown off: one line, then the CLI, untouched
    proc = _run(["agents", "--model", "x"], env, offline_env.cwd)
    assert proc.returncode == 0 and proc.stderr.count("\n") == 1 and "are not guarded" in proc.stderr, proc.stderr
    assert marker.read_text().split() == ["agents", "--model", "x"]


def test_agent_view_with_the_service_runs_guarded_under_lockdown(tmp_path, offline_env):
    """The guard's settings go last among agents' options in one 0600 file, merged with the caller's."""
    copy = tmp_path / "settings-copy"
    cli = tmp_path / "fake-claude"
    cli.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\nfor a; do case "$a" in --settings=*) '
                   f'cp "${{a#--settings=}}" {copy}; stat -c %a "${{a#--settings=}}" > {tmp_path}/mode;; esac; done\n')
    cli.chmod(0o755)
    write_user_config(offline_env,
                      LOCKDOWN + '[permissions]\nmode = "default"\nallow = ["Bash(echo *)"]\ndeny = ["Bash(rm *)"]\n')
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(cli))
    mark_verified(env, cli)  # lockdown refuses an unverified CLI
    caller = json.dumps({"permissions": {"allow": ["Read"]},
                         "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}})
    proc = _run(["agents", "--settings", caller, "--model", "x"], env, offline_env.cwd)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    argv = (tmp_path / "argv").read_text().split()
    assert argv[-1].startswith("--settings=") and argv[-1].endswith("/settings.json"), argv
    assert argv[:-1] == ["agents", "--permission-mode=default", "--model", "x"], argv
    assert (tmp_path / "mode").read_text().strip() == "600"
    settings = json.loads(copy.read_text())
    assert settings["permissions"]["allow"] == ["Read", "Bash(echo *)"]
    deny = settings["permissions"]["deny"]
    assert deny[0] == "Bash(rm *)" and deny[1:] and all(r.startswith("Edit(//")
                                                        for r in deny[1:])  # + the guard's own files
    assert settings["hooks"]["Stop"][0]["hooks"][0] == {"type": "command", "command": "true"}  # the caller's kept
    [hook] = settings["hooks"]["PreToolUse"][0]["hooks"]
    auth = hook["headers"]["Authorization"]
    assert hook["type"] == "http" and auth.startswith("Bearer ") and "$" not in auth
    assert hook["headers"]["Authorization"][7:] not in " ".join(argv)  # the secret is in the file, not in argv


def test_agent_view_bad_settings_and_dry_run(tmp_path, offline_env):
    cli = tmp_path / "fake-claude"
    cli.write_text(f"#!/bin/sh\ntouch {tmp_path}/started\n")
    cli.chmod(0o755)
    env = dict(offline_env, CLAUDEGUARD_CLAUDE=str(cli))
    proc = _run(["agents", "--settings", str(tmp_path / "missing.json")], env, offline_env.cwd)
    assert (proc.returncode, proc.stdout) == (2, "") and proc.stderr.count("\n") == 1, proc.stderr
    assert "missing.json: cannot read" in proc.stderr and not (tmp_path / "started").exists()
    assert live_services(Path(env["CLAUDEGUARD_RUNTIME_DIR"])) == []  # nothing started, not even the service
    proc = _run(["--guard-dry-run", "agents", "--model", "x"], env, offline_env.cwd)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    # the mode its sessions get allows no more than default (plan/argv.py, "Fail closed by construction")
    assert plan["guarded"] is True and plan["argv"][1:] == ["agents", "--permission-mode=default", "--model", "x",
                                                            "--settings=<session dir>/settings.json"]
    assert plan["settings"]["hooks"]["PreToolUse"][0]["hooks"][0]["type"] == "http"
    assert not (tmp_path / "started").exists()
