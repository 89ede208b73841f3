"""What `approve`/`deny` say about an id that waits no more (answered: how, when, by whom;
expired; never known here), from the audit log; and `--scope forever` (and `agent`/`session`,
whose grant an ask rule beats as well) refused under an ask rule that matches the call (naming the
rule's file:line), in `approve`, the console and the desk.

Requests are made by `claudeguardctl hook` run as the CLI runs it (a PreToolUse event on
stdin, an ask rule sending the call to the channel), each in a process of its own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from claudeguard.plan.hooks import ctl_command
from tests.shim_helpers import ctl, pending, wait_pending


@pytest.fixture
def env(tmp_path):
    cfg = tmp_path / "guard.toml"
    cfg.write_text('[permissions]\nallow = ["Bash(git status)"]\nask = ["Bash(git push *)"]\n'
                   '[approval]\ntimeout = "1m"\n')
    (tmp_path / "xdg" / "claudeguard").mkdir(parents=True)
    return {"CLAUDEGUARD_CONFIG": str(cfg), "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"),
            "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}


@pytest.fixture
def hooks():
    """Hook processes a test starts, each stopped by its pid at the end."""
    started: list[subprocess.Popen] = []

    def start(env: dict, command: str, **extra: str) -> subprocess.Popen:
        event = {"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/tmp", "tool_name": "Bash",
                 "tool_input": {"command": command}, "tool_use_id": f"toolu_{len(started)}", **extra}
        proc = subprocess.Popen([*ctl_command(), "hook"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(event).encode())
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() reads the answer only
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)


def _decision(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=60)
    return json.loads(out)["hookSpecificOutput"]["permissionDecision"]


def _audit(env: dict) -> list[dict]:
    with open(Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_forever_under_a_matching_ask_rule_is_refused_naming_it_and_nothing_is_written(env, hooks):
    user_file = Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
    user_file.write_text("# mine\n[permissions]\n")
    hook = hooks(env, "git push origin main")
    req = wait_pending(env)
    refused = ctl(env, "approve", req["id"], "--scope", "forever")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"claudeguardctl: {req['id']}: not answered: --scope forever would write Bash(git push origin main) to "
        f"[permissions].allow, but an ask rule matches this call and wins over every allow rule: Bash(git push *) "
        f"({env['CLAUDEGUARD_CONFIG']}:3); answer --scope once, or narrow that rule\n")
    assert user_file.read_text() == "# mine\n[permissions]\n"  # nothing written
    assert [r["id"] for r in pending(env)] == [req["id"]]  # nothing answered: it still waits
    assert ctl(env, "deny", req["id"], "--scope", "forever").returncode == 0  # a deny rule wins over ask: fine
    assert _decision(hook) == "deny"
    assert 'deny = ["Bash(git push origin main)"]' in user_file.read_text()


@pytest.mark.parametrize(("scope", "whom"), [("session", "the session"), ("agent", "this agent type")])
def test_a_grant_under_a_matching_ask_rule_is_refused_naming_it_and_the_call_still_waits(env, hooks, scope, whom):
    # A grant is an allow rule of the session, and ask beats allow: "for the session" would
    # answer this call and ask again at the next one, in silence.
    hook = hooks(env, "git push origin main")
    req = wait_pending(env)
    refused = ctl(env, "approve", req["id"], "--scope", scope)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"claudeguardctl: {req['id']}: not answered: --scope {scope} would allow Bash(git push origin main) for "
        f"{whom}, but an ask rule matches this call and wins over every allow rule: Bash(git push *) "
        f"({env['CLAUDEGUARD_CONFIG']}:3), so the next such call is asked again; answer --scope once, or narrow "
        f"that rule\n")
    assert [r["id"] for r in pending(env)] == [req["id"]]  # nothing answered: it still waits
    assert ctl(env, "deny", req["id"], "--scope", scope).returncode == 0  # a deny grant wins over ask: fine
    assert _decision(hook) == "deny"
    rows = [r for r in _audit(env) if r.get("request_id") == req["id"] and r.get("decided_by") == "human"]
    assert [(r["decision"], r["scope"]) for r in rows] == [("deny", scope)]


def test_a_grant_where_no_ask_rule_matches_is_answered(env, hooks):
    hook = hooks(env, "make", agent_type="general-purpose", agent_id="a1")  # no rule decides it: to the channel
    req = wait_pending(env)
    done = ctl(env, "approve", req["id"], "--scope", "session")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{req['id']} approved (session): Bash(make)\n"
    assert _decision(hook) == "allow"


def test_forever_where_no_ask_rule_matches_still_writes_the_rule(env, hooks):
    user_file = Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
    hook = hooks(env, "make", agent_type="general-purpose", agent_id="a1")  # no rule decides it: to the channel
    req = wait_pending(env)
    done = ctl(env, "approve", req["id"], "--scope", "forever")
    assert done.returncode == 0, done.stderr
    assert _decision(hook) == "allow"
    assert 'allow = ["Bash(make)"]' in user_file.read_text()


def test_an_id_answered_already_says_how_when_and_by_whom(env, hooks):
    hook = hooks(env, "git push origin main")
    req = wait_pending(env)
    first = ctl(env, "approve", req["id"])
    assert first.returncode == 0, first.stderr
    assert _decision(hook) == "allow"
    row = next(r for r in _audit(env) if r.get("request_id") == req["id"] and r.get("decided_by") == "human")
    who = row["answered_by"]
    for given in (req["id"], req["id"][:8]):
        again = ctl(env, "approve", given)
        assert again.returncode == 1 and again.stdout == ""
        assert again.stderr == (f"claudeguardctl: {req['id']}: already answered at {row['time']}: approved (once) "
                                f"from pid {who['pid']} ({who['tty'] or 'no tty'})\n")


def test_an_id_that_expired_says_so_with_its_time(env, hooks, tmp_path):
    Path(env["CLAUDEGUARD_CONFIG"]).write_text('[permissions]\nask = ["Bash(git push *)"]\n[approval]\ntimeout = 1\n')
    hook = hooks(env, "git push origin main")
    assert _decision(hook) == "deny"  # nobody answered within 1 s
    row = next(r for r in _audit(env) if r.get("decided_by") == "timeout")
    late = ctl(env, "deny", row["request_id"])
    assert late.returncode == 1 and late.stdout == ""
    assert late.stderr == (f"claudeguardctl: {row['request_id']}: expired at {row['time']}: nobody answered before "
                           f"its deadline; denied by approval.on_timeout\n")


def test_an_id_never_seen_here_says_so_and_where_it_looked(env):
    unknown = ctl(env, "approve", "abcdefghijklmnop")
    assert unknown.returncode == 1 and unknown.stdout == ""
    log = Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl"
    assert unknown.stderr == (f"claudeguardctl: abcdefghijklmnop: no such pending request, and the audit log ({log}) "
                              f"knows of no request with this id either (a mistyped id, or one of another machine "
                              f"or log dir)\n")


def test_the_desk_offers_no_forever_under_a_matching_ask_rule_and_refuses_it(env, hooks, monkeypatch):
    from claudeguard.desk import start_desk
    from claudeguard.desk.local import LocalSource
    from tests.test_desk import answer, call, csrf_of, login

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    hook = hooks(env, "git push origin main")
    req = wait_pending(env)
    desk = start_desk(LocalSource(config_file=str(Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"),
                                  machine="test-host"))
    try:
        cookie = login(desk)
        status, _, data = call(desk, "GET", f"/{desk.base}/api/state", cookie=cookie)
        assert status == 200
        row = json.loads(data)["requests"]["requests"][0]
        assert row["forever"] is None
        assert row["forever_why"] == (f"an ask rule matches this call and wins over every allow rule: Bash(git push *) "
                                      f"({env['CLAUDEGUARD_CONFIG']}:3): the next run would ask again; narrow that "
                                      f"rule")
        assert row["grant_why"] == (f"an ask rule matches this call and wins over every allow rule: Bash(git push *) "
                                    f"({env['CLAUDEGUARD_CONFIG']}:3): the next such call would be asked again; "
                                    f"narrow that rule")
        status, _, data = answer(desk, cookie, csrf_of(desk, cookie), {"id": req["id"], "answer": "session"})
        assert status != 200 and b"not answered: --scope session would allow" in data
        status, _, data = answer(desk, cookie, csrf_of(desk, cookie), {"id": req["id"], "answer": "forever"})
        assert status != 200 and b"not answered: --scope forever would write" in data
        assert [r["id"] for r in pending(env)] == [req["id"]]
        status, _, data = answer(desk, cookie, csrf_of(desk, cookie), {"id": req["id"], "answer": "once"})
        assert status == 200, data
    finally:
        desk.stop()
    assert _decision(hook) == "allow"
    assert not (Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml").exists()



def test_the_consoles_f_key_is_refused_the_same_way(env, hooks, monkeypatch):
    from claudeguard import channel
    from claudeguard.commands.console import _answer as console_key

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    hook = hooks(env, "git push origin main")
    wait_pending(env)
    req = channel.list_pending()[0]
    assert console_key(req, "f", None) == (
        f"{req.id}: not answered: --scope forever would write Bash(git push origin main) to [permissions].allow, but "
        f"an ask rule matches this call and wins over every allow rule: Bash(git push *) "
        f"({env['CLAUDEGUARD_CONFIG']}:3); answer --scope once, or narrow that rule")
    assert console_key(req, "y", None) == f"{req.id}: approved (once)"
    assert _decision(hook) == "allow"
