"""The gate server: a hook call inside a guarded session is answered by the supervisor's server;
a hook whose process goes away has its waiting request withdrawn; without a server the hook
decides in its own process with the same answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from claudeguard import channel
from claudeguard.gate import server as gate_server
from claudeguard.plan.hooks import ctl_command
from tests.shim_helpers import wait_until


@pytest.fixture
def session(tmp_path, monkeypatch):
    # A deep runtime dir: the socket path is longer than a Unix socket address may be. The hook
    # is told its session dir on its command line (HOOK); the runtime dir is the one it is in.
    runtime = tmp_path / ("d" * 60) / ("e" * 40) / "rt"
    session_dir = runtime / "sessions" / "sess"
    session_dir.mkdir(parents=True, mode=0o700)
    os.chmod(runtime, 0o700)
    os.chmod(runtime / "sessions", 0o700)
    snapshot = {"session_id": "sess", "cwd": str(tmp_path),
                "policy": {"permissions": {"deny": [{"rule": "Bash(rm *)", "source": "cfg:1", "root": "/"}]}},
                "approval": {"timeout": 30, "on_timeout": "deny"}, "print_mode": True}
    (session_dir / "session.json").write_text(json.dumps(snapshot))
    snapshot["log_dir"] = str(tmp_path / "log")
    (session_dir / "session.json").write_text(json.dumps(snapshot))
    env = {"CLAUDEGUARD_RUNTIME_DIR": str(runtime), "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return session_dir, env


def hook_command(session_dir) -> list[str]:  # type: ignore[no-untyped-def]
    return [*ctl_command(), "hook", "--session-dir", str(session_dir)]


class CountingServer(gate_server.GateServer):
    served = 0

    def _serve(self, conn):  # type: ignore[no-untyped-def]
        CountingServer.served += 1
        super()._serve(conn)


def _event(command: str, **extra: object) -> bytes:
    return json.dumps({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/tmp", "tool_name": "Bash",
                       "tool_input": {"command": command}, "tool_use_id": "toolu_x", **extra}).encode()


def test_hook_is_answered_by_the_server(session):
    session_dir, env = session
    assert len(os.fsencode(str(session_dir / "gate.sock"))) > 108
    server = CountingServer(str(session_dir))
    server.start()
    try:
        assert oct((session_dir / "gate.sock").stat().st_mode & 0o777) == "0o600"
        out = subprocess.run(hook_command(session_dir), input=_event("rm -rf /"), env=env,
                             capture_output=True, timeout=30)
        assert out.returncode == 0 and out.stderr == b""
        decision = json.loads(out.stdout)["hookSpecificOutput"]
        assert decision["permissionDecision"] == "deny" and "Bash(rm *)" in decision["permissionDecisionReason"]
        assert CountingServer.served == 1
        # nothing to say: the server answers OK with an empty body, the hook prints nothing
        out = subprocess.run(hook_command(session_dir), input=json.dumps({"hook_event_name": "Stop"}).encode(), env=env,
                             capture_output=True, timeout=30)
        assert (out.returncode, out.stdout) == (0, b"")
        assert CountingServer.served == 2
    finally:
        server.close()
    assert not (session_dir / "gate.sock").exists()


def test_without_a_server_the_hook_decides_the_same(session):
    session_dir, env = session
    out = subprocess.run(hook_command(session_dir), input=_event("rm -rf /"), env=env, capture_output=True, timeout=30)
    assert json.loads(out.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_hook_that_goes_away_has_its_request_withdrawn(session):
    session_dir, env = session
    server = gate_server.GateServer(str(session_dir))
    server.start()
    try:
        hook = subprocess.Popen(hook_command(session_dir), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        hook.stdin.write(_event("make deploy", agent_type="general-purpose", agent_id="a1"))
        hook.stdin.close()
        wait_until(channel.list_pending, 60, "the subagent's call to reach the channel")
        hook.send_signal(signal.SIGKILL)  # the CLI gave up on its hook
        hook.wait(timeout=60)
        wait_until(lambda: not channel.list_pending(), 60, "the request to go with its hook")
    finally:
        server.close()


def _pty_session(session_dir) -> None:  # type: ignore[no-untyped-def]
    snapshot = json.loads((session_dir / "session.json").read_text())
    snapshot.update(print_mode=False, pty=True, pid=os.getpid())  # this test stands for the launcher
    (session_dir / "session.json").write_text(json.dumps(snapshot))


def _permission_request(command: str) -> bytes:
    return json.dumps({"hook_event_name": "PermissionRequest", "session_id": "s", "cwd": "/tmp", "tool_name": "Bash",
                       "tool_input": {"command": command}}).encode()


def _held_request(hook: subprocess.Popen):  # type: ignore[no-untyped-def]
    held = wait_until(lambda: channel.list_pending("sess", held=True) or hook.poll() is not None, 60,
                      "the hook to post a held request")
    assert hook.poll() is None, "the hook ended without posting a held request"
    assert channel.list_pending() == []  # approvers do not see it yet
    return held[0]


@pytest.mark.parametrize("word", ["go", "drop"])
def test_a_pty_sessions_permission_request_waits_for_its_dialogs_owner(session, word):
    # The hook in its own process (command hooks): the router of the pty session owns the dialog.
    session_dir, env = session
    _pty_session(session_dir)
    hook = subprocess.Popen(hook_command(session_dir), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        hook.stdin.write(_permission_request("make deploy"))
        hook.stdin.close()
        request = _held_request(hook)
        assert request.kind == "permission" and request.extra["via"] == "dialog"
        channel.tell_waiter(request.id, word)
        if word == "go":
            wait_until(channel.list_pending, 60, "the released request to be published")
            channel.answer(request.id, "allow")
            out = json.loads(hook.stdout.read())["hookSpecificOutput"]
            assert out["hookEventName"] == "PermissionRequest" and out["decision"]["behavior"] == "allow"
        else:
            assert hook.stdout.read() == b""  # answered at the keyboard: no decision
        assert hook.wait(timeout=60) == 0
        assert channel.list_pending() == [] and channel.list_pending(held=True) == []
    finally:
        if hook.poll() is None:
            hook.kill()
            hook.wait()


def test_a_held_request_whose_launcher_is_gone_is_withdrawn(session):
    session_dir, env = session
    _pty_session(session_dir)
    gone = subprocess.Popen(["true"])
    gone.wait()
    snapshot = json.loads((session_dir / "session.json").read_text())
    (session_dir / "session.json").write_text(json.dumps(dict(snapshot, pid=gone.pid)))
    out = subprocess.run(hook_command(session_dir), input=_permission_request("make deploy"), env=env,
                         capture_output=True, timeout=30)
    assert (out.returncode, out.stdout) == (0, b"")
    assert channel.list_pending() == [] and channel.list_pending(held=True) == []


# --- -p on 2.1.330: the PermissionRequest hook is the asker (no permission-prompt tool) ---------


def _asker(session_dir, asker: str | None) -> None:  # type: ignore[no-untyped-def]
    snapshot = json.loads((session_dir / "session.json").read_text())
    snapshot["asker"] = asker  # what the launcher writes (plan/hooks.print_asker)
    (session_dir / "session.json").write_text(json.dumps(snapshot))


def _hook_once(env: dict, payload: bytes) -> subprocess.Popen:
    session_dir = os.path.join(env["CLAUDEGUARD_RUNTIME_DIR"], "sessions", "sess")
    hook = subprocess.Popen(hook_command(session_dir), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert hook.stdin is not None
    hook.stdin.write(payload)
    hook.stdin.close()
    return hook


def _audit_rows(env: dict) -> list[dict]:
    path = os.path.join(env["CLAUDEGUARD_LOG_DIR"], "audit.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("asker", [None, "prompt-tool", "caller", "none"])
def test_a_print_mode_permission_request_is_not_ours_unless_we_are_the_asker(session, asker):
    session_dir, env = session
    _asker(session_dir, asker)
    hook = _hook_once(env, _permission_request("make deploy"))
    assert hook.stdout is not None and hook.stdout.read() == b"" and hook.wait(timeout=60) == 0
    assert channel.list_pending() == [] and channel.list_pending(held=True) == []


@pytest.mark.parametrize("verb", ["allow", "deny"])
def test_the_print_mode_asker_posts_at_once_not_held_and_answers_in_its_shape(session, verb):
    session_dir, env = session
    _asker(session_dir, "permission-request")
    payload = json.loads(_permission_request("make deploy"))
    payload.update(agent_id="a7", agent_type="general-purpose")  # a foreground subagent's call
    hook = _hook_once(env, json.dumps(payload).encode())
    try:
        [request] = wait_until(channel.list_pending, 60, "the request to be published")
        assert channel.list_pending(held=True) == []  # published at once: nothing holds it
        assert request.extra["via"] == "permission-request"
        assert (request.agent_type, request.agent_id, request.input) == ("general-purpose", "a7",
                                                                         {"command": "make deploy"})
        channel.answer(request.id, verb, message=None if verb == "allow" else "not now")
        assert hook.stdout is not None
        out = json.loads(hook.stdout.read())["hookSpecificOutput"]
        assert hook.wait(timeout=60) == 0
    finally:
        if hook.poll() is None:
            hook.kill()
            hook.wait()
    # no updatedInput: 2.1.330 -p denies such an allow when one of its own ask rules matches
    want = {"behavior": "allow"} if verb == "allow" else {"behavior": "deny", "message": "not now"}
    assert out == {"hookEventName": "PermissionRequest", "decision": want}
    [row] = _audit_rows(env)
    assert row["answered_by"]["pid"] == os.getpid() and row["answered_by"]["uid"] == os.getuid()  # who answered
    assert (row["via"], row["decision"], row["decided_by"], row["agent_id"]) == ("permission-request", verb, "human",
                                                                                 "a7")
    assert channel.list_pending() == []


def test_the_print_mode_asker_reuses_the_answer_pre_tool_use_got_and_decides_rules_at_once(session):
    session_dir, env = session
    _asker(session_dir, "permission-request")
    from claudeguard.decision import Decision
    from claudeguard.gate.decide import answer_record
    from claudeguard.gate.session import load_session, record_answer

    kept = Decision("allow", "claudeguard: approved by a human (once)", decided_by="human", scope="once",
                    request_id="r1")
    record_answer(load_session(str(session_dir)), "toolu_x", {"agent_type": None, "agent_id": None, "tool": "Bash"},
                  answer_record(kept, {"command": "make deploy"}))
    for command, behavior in (("make deploy", "allow"), ("rm -rf build", "deny")):
        hook = _hook_once(env, _permission_request(command))
        assert hook.stdout is not None
        out = json.loads(hook.stdout.read())["hookSpecificOutput"]
        assert hook.wait(timeout=60) == 0
        assert out["decision"]["behavior"] == behavior, out
    assert channel.list_pending() == [] and channel.list_pending(held=True) == []
    from claudeguard.gate.session import recall_call

    assert recall_call(load_session(str(session_dir)), "toolu_x")["answer"]["used"] is True  # taken once
    # the reused answer is audited where it was given (PreToolUse); the rule's deny here
    assert [r["decided_by"] for r in _audit_rows(env)] == ["rule"]
