"""Claude Code's own background sessions (``claudeguard --bg``, 2.1.330) are guarded for their
whole life by the resident service: the policy (allow runs, deny holds), ask → channel → answer,
the audit, the listing in ``ps``, and the watchdog (a hung session is flagged, then stopped
under ``on_stall = "kill"``), all after the launching command has returned (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from claudeguard.service.files import process_start
from claudeguard.testing import bg_daemon as bg
from claudeguard.testing.cli_install import bg_version_under_test
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, remove_at_once, wait_pending, write_user_config
from tests.shim_helpers import wait_until as shared_wait_until


def bash(command: str) -> dict:
    return {"name": "Bash", "input": {"command": command, "description": command}}


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    return shared_wait_until(predicate, timeout, what, interval=0.1)


def launch(env: dict, cwd: Path, prompt: str, *guard: str) -> str:
    import subprocess

    proc = subprocess.run(GUARD + [*guard, "--bg", prompt], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=90,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    short = bg.parse_short_id(proc.stdout)
    assert short, proc.stdout
    return short


def service_status(env: dict) -> dict:
    out = ctl(env, "service", "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def audit(env: dict) -> list[dict]:
    return [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]


@pytest.mark.newest_cli
def test_a_bg_session_is_guarded_after_its_launcher_returned(bg_claude, offline_env, model_server, bg_daemon, tmp_path):
    server = model_server([{"match": "BGGUARD", "turns": [
        {"tool_use": bash("echo allowed > allowed.txt")}, {"tool_use": bash("rm -f keep.txt")},
        {"tool_use": bash("touch asked.txt")}, {"text": "bg fin"}]}])
    env = guarded_env(offline_env.use(server), bg_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    # the redirection is a write: an Edit rule allows it (issue 23), as it would a Write call
    write_user_config(env, '[permissions]\nmode = "default"\nallow = ["Bash(echo *)", "Edit(./allowed.txt)"]\n'
                           'deny = ["Bash(rm *)"]\nask = ["Bash(touch *)"]\n')
    (offline_env.cwd / "keep.txt").write_text("kept\n")
    report = tmp_path / "report.json"
    short = launch(env, offline_env.cwd, "BGGUARD go", "--guard-report", str(report), "--guard-fail-on", "denied")
    # the launcher has exited here
    req = wait_pending(env, lambda r: "touch asked.txt" in r["summary"] and r["cli_short_id"], timeout=90)
    assert req["cli_short_id"] == short and f"bg {short}" in ctl(env, "pending").stdout
    assert (offline_env.cwd / "allowed.txt").read_text() == "allowed\n"
    assert (offline_env.cwd / "keep.txt").read_text() == "kept\n"
    assert not (offline_env.cwd / "asked.txt").exists()
    # listed: the service holds it, ps shows it as a background session with the CLI's short id
    status = service_status(env)
    held_list = [s for s in status["sessions"] if s["short_id"] == short]
    assert len(held_list) == 1, (short, status)
    held = held_list[0]
    assert held["kind"] == "background" and held["cli_pid"]
    def ps_row() -> dict | None:
        rows = [r for r in json.loads(ctl(env, "ps", "--json").stdout) if r.get("short_id") == short]
        assert len(rows) <= 1, rows
        return rows[0] if rows and rows[0]["pending"] == 1 else None

    row = wait_until(ps_row, timeout=60, what="ps to show the session waiting on its request")
    assert row["background"] is True and row["child_pid"] == held["cli_pid"] and row["state"] == "awaiting-approval"

    def same_name() -> bool:  # the CLI's own name for it (it renames it to an auto title early on)
        [cli_row] = [a for a in bg.list_agents(bg_claude, env, offline_env.cwd) if a.get("id") == short]
        [ours] = [r for r in json.loads(ctl(env, "ps", "--json").stdout) if r.get("short_id") == short]
        return bool(ours.get("name")) and ours["name"] == cli_row["name"]

    wait_until(same_name, timeout=60, what="ps to show the CLI's name for the session")
    assert ctl(env, "approve", req["id"]).returncode == 0
    wait_until(lambda: (offline_env.cwd / "asked.txt").exists(), what="the approved call to run")
    wait_until(lambda: "bg fin" in " ".join(bg.job_texts(bg.config_dir(env), short)), what="the session's last turn")
    rows = [(r["summary"], r["decision"], r["decided_by"]) for r in audit(env)]
    assert rows == [("Bash: echo allowed > allowed.txt", "allow", "rule"), ("Bash: rm -f keep.txt", "deny", "rule"),
                    ("Bash: touch asked.txt", "allow", "human")], rows
    assert [r.get("cli_short_id") for r in audit(env)][-1] == short  # the asked call came after attach
    assert pending(env) == []
    # the session ends: the service forgets it and removes its dir
    bg.stop_daemon(env)
    wait_until(lambda: not any(s["session_id"] == held["session_id"] for s in service_status(env)["sessions"]),
               what="the service to drop the ended session")
    wait_until(lambda: not (Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions" / held["session_id"]).exists(),
               what="the session dir to go")
    # the report covers the background session, written when it ended
    data = json.loads(report.read_text())
    assert data["session_id"] == held["session_id"] and data["background"]["short_id"] == short
    assert data["counts"] == {"allowed_by_rule": 1, "denied_by_rule": 1, "asked": 1, "approved_by_human": 1,
                              "denied_by_human": 0, "timed_out": 0, "stalls": 0}
    assert [c["summary"] for c in data["calls"]] == [r[0] for r in rows] and data["fail_on"] == ["denied"]
    assert data["exit_code"] == 0 and data["child_exit_code"] is None and data["cli_version"] == bg_version_under_test()


def test_a_hung_bg_session_is_flagged_then_killed_alone(bg_claude, offline_env, model_server, bg_daemon):
    server = model_server([{"match": "BGHANG", "turns": [{"stall_after_text": "thinking"}]},
                           {"match": "BGFINE", "turns": [{"text": "fine"}]}])
    env = guarded_env(offline_env.use(server), bg_claude)
    write_user_config(env, '[permissions]\nmode = "default"\n[watchdog]\nstall_after = 3\non_stall = '
                           '"kill"\nkill_grace = 1\n')
    short = launch(env, offline_env.cwd, "BGHANG go")
    held = wait_until(lambda: [s for s in service_status(env)["sessions"] if s["short_id"] == short and s["cli_pid"]],
                      what="the session's process")[0]
    daemon = bg.daemon_pid(bg.config_dir(env))
    assert daemon and process_start(daemon)
    # flagged and stopped within seconds of the threshold; the daemon lives on
    try:
        wait_until(lambda: process_start(held["cli_pid"]) is None, timeout=60, what="the hung session to be killed")
    except AssertionError:
        raise AssertionError(f"not killed; ps: {ctl(env, 'ps', '--json').stdout}") from None
    assert process_start(daemon) is not None
    stalls = [r for r in audit(env) if r.get("event") == "stall"]
    assert [(r["session_id"], r["decided_by"], r["action"]) for r in stalls] == [
        (held["session_id"], "watchdog", "kill")], stalls
    # the session is gone: the service forgets it
    wait_until(lambda: not any(s["short_id"] == short for s in service_status(env)["sessions"]),
               what="the service to drop it")


def test_a_bg_session_whose_port_nobody_held_across_a_restart_ends(bg_claude, offline_env, model_server, bg_daemon):
    # A --bg session's launcher exits at once: only the service held its hooks' port. Stopped,
    # the service leaves that port free for any process to take while none lives; its successor
    # cannot know what answered there meanwhile, so it does not keep the session: it ends it.
    server = model_server([{"match": "BGADOPT", "turns": [
        {"tool_use": bash("python3 -c 'import time; time.sleep(6)'")},
        {"tool_use": bash("touch adopted.txt")}, {"text": "adopt fin"}]}])
    env = guarded_env(offline_env.use(server), bg_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    write_user_config(env, '[permissions]\nmode = "default"\nallow = ["Bash(python3 *)"]\nask = ["Bash(touch *)"]\n')
    short = launch(env, offline_env.cwd, "BGADOPT go")
    first = wait_until(lambda: [s for s in service_status(env)["sessions"] if s["short_id"] == short and s["cli_pid"]],
                       what="the session's process")[0]
    wait_until(lambda: [r for r in audit(env) if "python3" in r["summary"]], what="the first call's decision")
    old = service_status(env)
    assert ctl(env, "service", "stop").returncode == 0
    assert ctl(env, "service", "start").returncode == 0
    new = service_status(env)
    assert new["pid"] != old["pid"] and old["port"] not in new["ports"]
    wait_until(lambda: process_start(first["cli_pid"]) is None, timeout=60, what="the session's CLI to be stopped")
    [row] = [r for r in audit(env) if r.get("event") == "compromised"]
    assert row["session_id"] == first["session_id"] and f"port {old['port']} was not held" in row["summary"]
    assert not (offline_env.cwd / "adopted.txt").exists() and pending(env) == []


def test_a_bg_session_survives_its_runtime_dir_being_removed(bg_claude, offline_env, model_server, bg_daemon):
    server = model_server([{"match": "BGRMDIR",
                            "turns": [{"tool_use": bash("touch survived.txt")}, {"text": "rm fin"}]}])
    env = guarded_env(offline_env.use(server), bg_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    write_user_config(env, '[permissions]\nmode = "default"\nask = ["Bash(touch *)"]\n')
    short = launch(env, offline_env.cwd, "BGRMDIR go")
    req = wait_pending(env, lambda r: "touch survived.txt" in r["summary"], timeout=60)
    wait_until(lambda: [s for s in service_status(env)["sessions"] if s["short_id"] == short and s["cli_pid"]],
               what="the session's process")
    remove_at_once(env["CLAUDEGUARD_RUNTIME_DIR"])
    again = wait_pending(env, lambda r: r["id"] == req["id"], timeout=60)  # the same request, listed again
    assert again["session_id"] == req["session_id"]
    wait_until(lambda: [r for r in json.loads(ctl(env, "ps", "--json").stdout) if r.get("short_id") == short],
               timeout=60, what="ps to list the session again")
    assert ctl(env, "approve", req["id"]).returncode == 0
    wait_until(lambda: (offline_env.cwd / "survived.txt").exists(), what="the approved call to run")
