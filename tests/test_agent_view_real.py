"""Sessions dispatched from a guarded agent view (``claudeguard agents``, the real 2.1.330,
offline) are guarded for their whole life by the resident service: in a dispatched session an
allow rule runs, a deny rule holds, an ask is approved from the channel; each dispatched session
is its own guard session, listed by ``ps`` with the CLI's short id, and it stays guarded after
agent view has exited, until it ends (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from claudeguard.testing import bg_daemon as bg
from claudeguard.testing.tui import exit_tui, expect_text, screen_now
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, wait_pending, write_user_config
from tests.shim_helpers import wait_until as shared_wait_until

PROMPT_BOX = "describe a task"  # agent view's input box, ready for a new session's prompt


def bash(command: str) -> dict:
    return {"name": "Bash", "input": {"command": command, "description": command}}


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    return shared_wait_until(predicate, timeout, what, interval=0.1)


def dispatch(child, prompt: str) -> None:  # type: ignore[no-untyped-def]
    """Type a task into agent view's input box and press Enter: a new background session."""
    expect_text(child, PROMPT_BOX, 30)
    child.send(prompt)
    expect_text(child, prompt, 10)
    child.send("\r")


def ps_rows(env: dict) -> list[dict]:
    out = ctl(env, "ps", "--json")
    assert out.returncode == 0, out.stderr
    return [r for r in json.loads(out.stdout) if r.get("background")]


def service_sessions(env: dict) -> list[dict]:
    out = ctl(env, "service", "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["sessions"]


@pytest.mark.newest_cli
def test_sessions_dispatched_from_agent_view_are_guarded(bg_claude, offline_env, model_server, bg_daemon, spawn_tui):
    server = model_server([
        {"match": "AVONE",
         "turns": [{"tool_use": bash("echo allowed > allowed.txt")}, {"tool_use": bash("rm -f keep.txt")},
                                     {"tool_use": bash("touch asked.txt")}, {"text": "one fin"}]},
        {"match": "AVTWO", "turns": [{"tool_use": bash("echo two > two.txt")}, {"text": "two fin"}]}])
    env = guarded_env(offline_env.use(server), bg_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    # the redirections are writes: Edit rules allow them (issue 23), as they would Write calls
    write_user_config(env, '[permissions]\nmode = "default"\n'
                           'allow = ["Bash(echo *)", "Edit(./allowed.txt)", "Edit(./two.txt)"]\n'
                           'deny = ["Bash(rm *)"]\nask = ["Bash(touch *)"]\n')
    (offline_env.cwd / "keep.txt").write_text("kept\n")
    cfg = bg.config_dir(env)
    view = spawn_tui(GUARD + ["agents"], env, offline_env.cwd)

    dispatch(view, "AVONE go")
    try:
        req = wait_pending(env, lambda r: "touch asked.txt" in r["summary"], timeout=90)
    except AssertionError as exc:  # seen once (a full local suite): say how far the session got
        jobs = {p.name: bg.job_state(cfg, p.name) for p in (cfg / "jobs").iterdir()} if (cfg / "jobs").is_dir() else {}
        played = [(r["script"], r["turn"], r["played"]) for r in server.requests()]
        raise AssertionError(f"{exc}; jobs: {jobs}; model requests: {played}; ps: {ps_rows(env)}; "
                             f"screen: {screen_now(view)}") from None
    assert (offline_env.cwd / "allowed.txt").read_text() == "allowed\n"  # the allow rule ran
    assert (offline_env.cwd / "keep.txt").read_text() == "kept\n"  # the deny rule held
    assert not (offline_env.cwd / "asked.txt").exists()  # the ask waits on the channel
    one = wait_until(lambda: [r for r in ps_rows(env) if r["pending"] == 1], timeout=60,
                     what="ps to show the session waiting")
    assert len(one) == 1 and one[0]["state"] == "awaiting-approval" and one[0]["session_id"] == req["session_id"]
    short_one = one[0]["short_id"]
    assert short_one and bg.job_state(cfg, short_one)["intent"] == "AVONE go"
    assert ctl(env, "approve", req["id"]).returncode == 0
    wait_until(lambda: (offline_env.cwd / "asked.txt").exists(), what="the approved call to run")
    wait_until(lambda: "one fin" in bg.job_texts(cfg, short_one), what="the first session's last turn")

    dispatch(view, "AVTWO go")
    wait_until(lambda: (offline_env.cwd / "two.txt").exists(), timeout=90, what="the second session's allowed call")
    rows = wait_until(lambda: (lambda rs: rs if len(rs) == 2 else None)(ps_rows(env)), timeout=60, what="two ps rows")
    short_two = next(r["short_id"] for r in rows if r["short_id"] != short_one)
    wait_until(lambda: "two fin" in bg.job_texts(cfg, short_two), what="the second session's last turn")
    # each dispatched session is its own guard session, under the one view, with the CLI's pid
    agents = {a["id"]: a["pid"] for a in bg.list_agents(bg_claude, env, offline_env.cwd)}
    assert {r["short_id"]: r["child_pid"] for r in rows} == agents, (rows, agents)
    held = service_sessions(env)
    views = [s for s in held if s["agent_view"] is None]
    assert len(views) == 1 and len(held) == 3, held
    held_here = [s["short_id"] for s in held if s["agent_view"] == views[0]["session_id"]]
    assert sorted(held_here) == sorted([short_one, short_two])
    by_session = {r["session_id"]: r["short_id"] for r in rows}
    audit = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    assert [(by_session[r["session_id"]], r["summary"], r["decision"], r["decided_by"]) for r in audit] == [
        (short_one, "Bash: echo allowed > allowed.txt", "allow", "rule"),
        (short_one, "Bash: rm -f keep.txt", "deny", "rule"),
        (short_one, "Bash: touch asked.txt", "allow", "human"),
        (short_two, "Bash: echo two > two.txt", "allow", "rule")], audit
    assert pending(env) == []

    # agent view exits; its sessions live on under the daemon, still guarded and listed
    assert exit_tui(view) == 0
    assert sorted(r["short_id"] for r in ps_rows(env)) == sorted([short_one, short_two])
    # the sessions end: the service drops them and the view, and removes every dir
    bg_daemon.stop(env)
    wait_until(lambda: service_sessions(env) == [], timeout=60, what="the service to drop the view and its sessions")
    sessions_dir = Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "sessions"
    wait_until(lambda: list(sessions_dir.iterdir()) == [], timeout=60, what="the session dirs to go")


def test_a_restarted_service_adopts_agent_view_and_its_sessions(bg_claude, offline_env, model_server,
                                                                bg_daemon, spawn_tui):
    server = model_server([{"match": "AVADOPT", "turns": [
        {"tool_use": bash("python3 -c 'import time; time.sleep(6)'")}, {"tool_use": bash("touch adopted.txt")},
        {"text": "adopt fin"}]}])
    env = guarded_env(offline_env.use(server), bg_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    write_user_config(env, '[permissions]\nmode = "default"\nallow = ["Bash(python3 *)"]\nask = ["Bash(touch *)"]\n')
    cfg = bg.config_dir(env)
    view = spawn_tui(GUARD + ["agents"], env, offline_env.cwd)
    dispatch(view, "AVADOPT go")
    first = wait_until(lambda: [s for s in service_sessions(env) if s["agent_view"] and s["cli_pid"]], timeout=60,
                       what="the dispatched session's process")[0]
    # while its first tool runs (allowed by the rule: a hook the stopped service missed would leave
    # the call to the session's own dialog, which nobody sees)
    wait_until(lambda: any("python3" in r["summary"]
                           for r in map(json.loads, ctl(env, "audit", "--json").stdout.splitlines())),
               what="the first call's decision")
    assert ctl(env, "service", "stop").returncode == 0
    assert ctl(env, "service", "start").returncode == 0
    # adopted whole: the restarted service names the session first, its CLI once it found its record
    again = wait_until(lambda: [s for s in service_sessions(env) if s["agent_view"] and s["cli_pid"]
                                and s["short_id"]], timeout=60, what="the session adopted")
    def why() -> str:
        jobs = {p.parent.name: json.loads(p.read_text()).get("sessionId") for p in (cfg / "jobs").glob("*/state.json")}
        log = (Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "service" / "service.log").read_text()[-1500:]
        return f"{service_sessions(env)} records={bg.session_records(cfg)} jobs={jobs} log={log}"
    assert [(s["session_id"], s["short_id"], s["cli_pid"]) for s in again] == [(first["session_id"], first["short_id"],
                                                                                first["cli_pid"])], why()
    try:
        req = wait_pending(env, lambda r: "touch adopted.txt" in r["summary"], timeout=30)
    except AssertionError:
        raise AssertionError(why()) from None
    assert req["session_id"] == first["session_id"] and not (offline_env.cwd / "adopted.txt").exists()
    assert ctl(env, "approve", req["id"]).returncode == 0
    wait_until(lambda: (offline_env.cwd / "adopted.txt").exists(), what="the approved call to run")
    assert exit_tui(view) == 0


def test_a_hung_dispatched_session_is_killed_alone(bg_claude, offline_env, model_server, bg_daemon, spawn_tui):
    from claudeguard.service.files import process_start

    server = model_server([{"match": "AVFINE", "turns": [{"text": "fine fin"}]},
                           {"match": "AVHANG", "turns": [{"stall_after_text": "thinking"}]}])
    env = guarded_env(offline_env.use(server), bg_claude)
    write_user_config(env, '[permissions]\nmode = "default"\n[watchdog]\nstall_after = 3\non_stall = '
                           '"kill"\nkill_grace = 1\n')
    cfg = bg.config_dir(env)
    view = spawn_tui(GUARD + ["agents"], env, offline_env.cwd)
    dispatch(view, "AVFINE go")
    fine = wait_until(lambda: [r for r in ps_rows(env) if r.get("child_pid")], timeout=60, what="the first session")[0]
    wait_until(lambda: "fine fin" in bg.job_texts(cfg, fine["short_id"]), what="the first session's reply")
    dispatch(view, "AVHANG go")
    hung = wait_until(lambda: [r for r in ps_rows(env) if r["short_id"] != fine["short_id"] and r.get("child_pid")],
                      timeout=60, what="the second session")[0]
    daemon = bg.daemon_pid(cfg)
    assert daemon
    try:
        wait_until(lambda: process_start(hung["child_pid"]) is None, timeout=60, what="the hung session to be killed")
    except AssertionError:
        raise AssertionError(f"not killed; ps: {ctl(env, 'ps', '--json').stdout}") from None
    # the idle session, agent view and the daemon live on
    assert process_start(fine["child_pid"]) is not None and process_start(daemon) is not None and view.isalive()
    audit = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    stalls = [(r["session_id"], r["action"]) for r in audit if r.get("event") == "stall"]
    assert stalls == [(hung["session_id"], "kill")], stalls
    wait_until(lambda: [s["short_id"] for s in service_sessions(env) if s["agent_view"]] == [fine["short_id"]],
               timeout=60, what="the service to drop the killed session only")
    assert exit_tui(view) == 0
