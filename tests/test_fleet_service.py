"""The service's part in the fleet (``service/fleet.py``) and what it stands on, fast, on a real
redis-server: ``[fleet]`` only from the user's own files with ``file:line`` errors; every
request waiting in the service mirrored, answered from afar through the channel's answer path,
taken down when it ends; Redis down: local answers work, nothing waits on it; without a fleet
nothing imports redis; the credential never reaches the CLI; its file is among the paths no
tool may read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from claudeguard import channel
from claudeguard.config.load import env_overrides, load_config
from claudeguard.errors import ConfigError
from claudeguard.testing.wait import wait_until

from fleet_helpers import PREFIX


def _user_config(root: Path, text: str) -> Path:
    path = root / "xdg" / "claudeguard" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def machine_env(tmp_path, monkeypatch):
    """This process as a machine of its own: HOME, config dir, runtime and log dirs under tmp."""
    for key, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "xdg"), ("CLAUDEGUARD_RUNTIME_DIR", "run"),
                     ("CLAUDEGUARD_LOG_DIR", "log")):
        (tmp_path / sub).mkdir(mode=0o700, exist_ok=True)
        monkeypatch.setenv(key, str(tmp_path / sub))
    for key in ("CLAUDEGUARD_CONFIG", "CLAUDEGUARD_PROFILE", "CLAUDEGUARD_FLEET_URL", "CLAUDEGUARD_FLEET_PASSWORD"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- configuration -------------------------------------------------------------------------------


def test_fleet_in_a_project_file_is_refused_with_its_line(machine_env):
    project = machine_env / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".claudeguard.toml").write_text('[permissions]\nallow = []\n\n[fleet]\nurl = "redis://evil:6379"\n')
    with pytest.raises(ConfigError) as err:
        load_config(project, env_overrides())
    assert str(err.value).startswith(f"{project / '.claudeguard.toml'}:4: [fleet] may only be set")


def test_fleet_in_claudeguard_config_inside_the_project_is_refused(machine_env, monkeypatch):
    project = machine_env / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "cg.toml").write_text('[fleet]\nurl = "redis://evil:6379"\n')
    monkeypatch.setenv("CLAUDEGUARD_CONFIG", str(project / "cg.toml"))
    with pytest.raises(ConfigError, match=r"cg.toml:1: \[fleet\] may only be set"):
        load_config(project, env_overrides())


def test_a_fleet_mistake_in_the_user_file_is_one_line_with_its_line(machine_env):
    from claudeguard.fleet.config import from_config

    path = _user_config(machine_env, '[fleet]\nurl = "redis://127.0.0.1:6379/0"\nprefix = "a b"\n')
    with pytest.raises(ConfigError) as err:
        from_config(load_config(machine_env, env_overrides()))
    assert str(err.value).startswith(f"{path}:3: fleet.prefix 'a b': 1-64 letters")
    _user_config(machine_env, '[fleet]\nurl = "redis://127.0.0.1:6379/0"\npassword = "x"\n')
    with pytest.raises(ConfigError, match=r"config.toml:3: unknown key 'fleet.password'"):
        load_config(machine_env, env_overrides())


def test_without_a_fleet_the_service_imports_no_redis(machine_env):
    code = ("import sys; from claudeguard.service import server, fleet; "
            "assert fleet.start(lambda: False) is None; "
            "from claudeguard.commands import pending, ps, console, answer, doctor; "
            "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith(('redis.', 'claudeguard.fleet'))))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- the credential and its file -------------------------------------------------------------------


def test_the_credential_never_reaches_the_cli(machine_env, monkeypatch):
    from claudeguard.plan.argv import DROPPED, child_environ

    _user_config(machine_env, '[fleet]\nurl = "redis://127.0.0.1:1/0"\npassword_env = "MY_FLEET_PW"\n'
                              'approver = "cg-a-desk"\napprover_password_env = "MY_DESK_PW"\n')
    cfg = load_config(machine_env, env_overrides())
    env = {"PATH": "/bin", "MY_FLEET_PW": "s3", "CLAUDEGUARD_FLEET_PASSWORD": "s4", "KEEP": "1", "MY_DESK_PW": "s5",
           "CLAUDEGUARD_FLEET_APPROVER_PASSWORD": "s6"}
    assert child_environ(env, {"X": "1", "KEEP": DROPPED}, cfg) == {"PATH": "/bin", "X": "1"}
    # the launcher's dry run shows what its plan takes out of the CLI's environment
    monkeypatch.setenv("CLAUDEGUARD_FLEET_PASSWORD", "s4")
    monkeypatch.setenv("MY_FLEET_PW", "s3")
    monkeypatch.setenv("MY_DESK_PW", "s5")
    monkeypatch.setenv("CLAUDEGUARD_FLEET_APPROVER_PASSWORD", "s6")
    monkeypatch.setenv("CLAUDEGUARD_CLAUDE", "/bin/true")
    out = subprocess.run([sys.executable, "-m", "claudeguard", "--guard-dry-run", "-p", "hi"], env=dict(os.environ),
                         capture_output=True, text=True, timeout=60, cwd=machine_env)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)["env"]
    assert shown["CLAUDEGUARD_FLEET_PASSWORD"] is None and shown["MY_FLEET_PW"] is None
    assert shown["CLAUDEGUARD_FLEET_APPROVER_PASSWORD"] is None and shown["MY_DESK_PW"] is None
    assert not any(word in out.stdout for word in ("s3", "s4", "s5", "s6"))


def test_the_password_file_is_among_the_paths_no_tool_may_read(machine_env):
    from claudeguard.paths import guard_paths
    from claudeguard.plan.claude_args import parse_claude_args
    from claudeguard.plan.settings_sources import protected_rules

    pw = machine_env / "secrets" / "fleet.pw"
    desk_pw = machine_env / "secrets" / "desk.pw"
    _user_config(machine_env, f'[fleet]\nurl = "redis://127.0.0.1:1/0"\npassword_file = "{pw}"\n'
                              f'approver = "cg-a-desk"\napprover_password_file = "{desk_pw}"\n')
    cfg = load_config(machine_env, env_overrides())
    reads = guard_paths(cfg=cfg).reads()
    assert (str(pw), "the fleet's password file") in reads
    assert (str(desk_pw), "the fleet's approver password file") in reads
    rules = protected_rules(parse_claude_args([]), cfg, str(machine_env))
    assert f"Read(/{pw})" in rules and f"Edit(/{pw})" in rules
    assert f"Read(/{desk_pw})" in rules and f"Edit(/{desk_pw})" in rules


# -- the service's link ------------------------------------------------------------------------------


def _post_and_wait(results: list, **kwargs) -> threading.Thread:
    def run() -> None:
        pending = channel.post(session_id="s1", agent_type=None, agent_id=None, tool="Bash",
                               input=kwargs.get("input", {"command": "git push"}), summary="Bash: git push",
                               cwd="/", timeout=kwargs.get("timeout", 30))
        results.append(pending.request.id)
        results.append(pending.wait())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _start_alpha_link(machine_env, fleet, monkeypatch):
    """The service's link of this process as member "alpha" of ``fleet`` (its user config names
    the fleet; the password comes from the environment, as a user would give it)."""
    from claudeguard.service import fleet as service_fleet

    user, password = fleet.member_user("alpha")
    _user_config(machine_env, f'[fleet]\nurl = "{fleet.server.url}"\nusername = "{user}"\nmachine = "alpha"\n'
                              f'prefix = "{PREFIX}"\n')
    monkeypatch.setenv("CLAUDEGUARD_FLEET_PASSWORD", password)
    link = service_fleet.start(lambda: False)
    assert link is not None
    return link


def test_the_service_mirrors_its_requests_and_applies_a_remote_answer(machine_env, fleet, monkeypatch):
    link = _start_alpha_link(machine_env, fleet, monkeypatch)
    try:
        results: list = []
        waiter = _post_and_wait(results)
        with fleet.client("bob") as bob:
            views = wait_until(lambda: bob.requests() or None, 60, "the request mirrored")
            assert [v["id"] for v in views] == [results[0]] and views[0]["machine"] == "alpha"
            verdict = bob.answer(results[0], "allow", scope="session")
            assert verdict["applied"] is True
            waiter.join(60)
            answer = results[1]
            assert (answer.decision, answer.scope, answer.decided_by) == ("allow", "session", "human")
            assert answer.answered_by["via"] == "fleet" and answer.answered_by["acl_user"] == "cg-a-bob"
            assert answer.answered_by["machine"] == "desk-bob" and "relayed_by" in answer.answered_by
            wait_until(lambda: bob.requests() == [], 60, "the answered request taken down")
            # a local answer of a second request wins as ever, and the fleet learns how it ended
            more: list = []
            second = _post_and_wait(more, input={"command": "git push --tags"})
            wait_until(lambda: bob.requests() or None, 60, "the second request mirrored")
            channel.answer(more[0], "deny", by="claudeguardctl deny")
            second.join(60)
            assert more[1].decision == "deny"
            with pytest.raises(Exception, match="already answered by claudeguardctl deny on alpha"):
                bob.answer(more[0], "allow")
        assert link.status()["connected"] == {"pub": True, "inbox": True}
    finally:
        link.stop()


def test_redis_down_local_answers_work_and_nothing_waits_on_it(machine_env, monkeypatch):
    from claudeguard.service import fleet as service_fleet
    from claudeguard.testing.redis_server import free_port

    _user_config(machine_env, f'[fleet]\nurl = "redis://127.0.0.1:{free_port()}/0"\nmachine = "alpha"\n')
    link = service_fleet.start(lambda: False)
    assert link is not None
    try:
        results: list = []
        waiter = _post_and_wait(results)
        wait_until(lambda: results or None, 60, "posted")
        channel.answer(results[0], "allow", by="test")
        waiter.join(60)
        assert not waiter.is_alive() and results[1].decision == "allow"
        status = wait_until(lambda: (s := link.status())["last_error"] and s, 60, "the link to say Redis is down")
        assert status["connected"] == {"pub": False, "inbox": False}
    finally:
        link.stop()


# -- the commands ------------------------------------------------------------------------------------


def _approver_env(fleet, root: Path) -> dict[str, str]:
    cfg = fleet.approver_config("bob")  # writes the 0600 password file
    home = root / "bravo"
    (home / "xdg" / "claudeguard").mkdir(parents=True)
    (home / "xdg" / "claudeguard" / "config.toml").write_text(
        f'[fleet]\nurl = "{fleet.server.url}"\nusername = "{cfg.username}"\npassword_file = "{cfg.password_file}"\n'
        f'machine = "bravo"\nprefix = "{PREFIX}"\n')
    for sub in ("run", "log"):
        (home / sub).mkdir(mode=0o700)
    return {"PATH": os.environ.get("PATH", "/bin"), "HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg"),
            "CLAUDEGUARD_RUNTIME_DIR": str(home / "run"), "CLAUDEGUARD_LOG_DIR": str(home / "log")}


def _ctl(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "claudeguard.commands.ctl", *args], env=env, capture_output=True,
                          text=True, timeout=60, input=stdin)


def test_the_fleet_commands_list_answer_and_show_a_dead_machine_gone(fleet, tmp_path):
    import signal

    alpha = fleet.machine("alpha")
    beta = fleet.machine("beta")
    (first, second) = alpha.post(2, timeout=60)
    env = _approver_env(fleet, tmp_path)
    listed = json.loads(_ctl(env, "pending", "--fleet", "--json").stdout)
    assert sorted(v["id"] for v in listed) == sorted([first, second])
    assert all(v["machine"] == "alpha" and len(v["call_sha256"]) == 64 for v in listed)
    # forever from another machine: one line, nothing sent
    refused = _ctl(env, "approve", first, "--scope", "forever")
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "cannot be given from another machine" in refused.stderr and alpha.of("applied") == []
    # the console, scripted: `y` answers the oldest fleet request, for the call it showed
    out = _ctl(env, "console", "--fleet", stdin="y\n")
    assert out.returncode == 0 and f"{listed[0]['id']} (alpha): approved (once)" in out.stdout, out
    assert alpha.done(listed[0]["id"])["decision"] == "allow"
    # an unknown id: one line, exit 1
    unknown = _ctl(env, "deny", "zzzzzzzzzzzz")
    assert unknown.returncode == 1 and "no such pending request in the fleet" in unknown.stderr
    # ps --fleet: both alive; beta killed (nothing takes its keys down) is shown gone by its TTL
    def both_alive() -> dict | None:  # alpha's count as of its next heartbeat (every 0.5 s here)
        rows = {r["machine"]: r for r in json.loads(_ctl(env, "ps", "--fleet", "--json").stdout)}
        return rows if rows["alpha"]["alive"] and rows["beta"]["alive"] and rows["alpha"]["pending"] == 1 else None

    wait_until(both_alive, 60, "alpha (one call waiting) and beta alive")
    os.kill(beta.proc.pid, signal.SIGKILL)
    beta.proc.wait(10)

    def beta_gone() -> bool:
        rows = {r["machine"]: r for r in json.loads(_ctl(env, "ps", "--fleet", "--json").stdout)}
        return not rows["beta"]["alive"]

    wait_until(beta_gone, 60, "beta shown gone")
    text = _ctl(env, "ps", "--fleet").stdout
    assert any(line.startswith("beta") and "gone (" in line for line in text.splitlines()), text


def test_doctor_checks_the_fleet_and_warns_about_clear_text_to_another_host(machine_env, capsys):
    from claudeguard.commands.doctor import fleet as doctor_fleet

    pw = machine_env / "fleet.pw"
    pw.write_text("x\n")
    pw.chmod(0o644)
    _user_config(machine_env, f'[fleet]\nurl = "redis://192.0.2.1:6379/0"\npassword_file = "{pw}"\n')
    assert doctor_fleet(load_config(machine_env, env_overrides())) is False
    assert f"fleet: fleet.password_file {pw}: mode 0644; it must be 0600" in capsys.readouterr().out
    pw.chmod(0o600)
    assert doctor_fleet(load_config(machine_env, env_overrides())) is True  # Redis unreachable: a warning only
    out = capsys.readouterr().out
    assert "redis:// to 192.0.2.1 sends requests (which can hold secrets)" in out and "use rediss://" in out
    assert "a boxed command can reach 192.0.2.1:6379" in out
    assert "x\n" not in out


def test_doctor_checks_the_desk_approver_and_warns_when_sessions_may_run_unboxed(machine_env, capsys, monkeypatch):
    from claudeguard.commands.doctor import fleet as doctor_fleet

    pw = machine_env / "desk.pw"
    pw.write_text("x\n")
    pw.chmod(0o640)
    base = f'[fleet]\nurl = "redis://127.0.0.1:1/0"\napprover = "cg-a-desk"\napprover_password_file = "{pw}"\n'
    _user_config(machine_env, base)
    assert doctor_fleet(load_config(machine_env, env_overrides())) is False
    assert f"fleet: fleet.approver_password_file {pw}: mode 0640; it must be 0600" in capsys.readouterr().out
    pw.chmod(0o600)
    assert doctor_fleet(load_config(machine_env, env_overrides())) is True
    assert "fleet.approver (cg-a-desk) lets this machine's desk answer" in capsys.readouterr().out
    _user_config(machine_env, '[security]\nsandbox = "require"\n\n' + base)
    assert doctor_fleet(load_config(machine_env, env_overrides())) is True
    out = capsys.readouterr().out
    assert "fleet.approver" not in out and "x\n" not in out


def test_the_service_publishes_again_when_redis_comes_back_empty(machine_env, fleet, redis_server, monkeypatch):
    link = _start_alpha_link(machine_env, fleet, monkeypatch)
    try:
        wait_until(lambda: link.status()["connected"] == {"pub": True, "inbox": True}, 60, "connected")
        redis_server.kill()
        results: list = []
        waiter = _post_and_wait(results, timeout=60)
        wait_until(lambda: results or None, 60, "posted while Redis is down")
        redis_server.start()  # empty: no persistence
        fleet.restore_users()
        with fleet.client("bob") as bob:
            views = wait_until(lambda: bob.requests() or None, 60, "the request published again")
            assert [v["id"] for v in views] == [results[0]]
            assert bob.answer(results[0], "deny", message="from afar")["applied"] is True
        waiter.join(60)
        assert (results[1].decision, results[1].message, results[1].decided_by) == ("deny", "from afar", "human")
    finally:
        link.stop()
