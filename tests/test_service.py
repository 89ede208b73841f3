"""The resident guard service (claudeguard.service): started on demand, one per user, private,
restarted cleanly after a crash, retired on upgrade, idle exit; its HTTP endpoint's secret,
body limit and malformed input. The launcher runs in front of a stand-in CLI
(tests/data/hook_poster.py) that posts what a real CLI would not; the real CLIs are in
test_service_real.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claudeguard.service.files import process_start
from tests.shim_helpers import ctl
from tests.shim_helpers import remove_at_once
from tests.shim_helpers import wait_until as shared_wait_until

GUARD = [sys.executable, "-m", "claudeguard"]
POSTER = Path(__file__).parent / "data" / "hook_poster.py"


def wait_until(predicate, timeout: float = 60, what: str = "condition"):  # type: ignore[no-untyped-def]
    return shared_wait_until(predicate, timeout, what, interval=0.02)


@pytest.fixture
def env(tmp_path: Path) -> dict:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    (tmp_path / "home").mkdir()
    poster = tmp_path / "claude"
    poster.write_text(f"#!{sys.executable}\n" + POSTER.read_text())
    poster.chmod(0o755)
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "CLAUDEGUARD_RUNTIME_DIR": str(runtime), "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
            "CLAUDEGUARD_CLAUDE": str(poster), "OUT": str(tmp_path / "out.json"),
            "PYTHONPATH": str(Path(__file__).parent.parent), "CLAUDEGUARD_AUTO_VERIFY": "0"}


def service_dir(env: dict) -> Path:
    return Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "service"


def record(env: dict) -> dict | None:
    try:
        return json.loads((service_dir(env) / "service.json").read_text())
    except (OSError, ValueError):
        return None


def live_pids(env: dict) -> list[int]:
    """Every live service process of this runtime dir (by its open log file), not only the
    recorded one: a test of "one service" must see a second one if it exists."""
    log = str(service_dir(env) / "service.log")
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                # the service itself, not its planner (claudeguard.service.planner, same log)
                if b"claudeguard.service" in args and os.readlink(f"/proc/{entry}/fd/2") == log:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def guard(env: dict, posts: list[dict], *argv: str, **extra: str) -> dict:
    proc = subprocess.run(GUARD + ["-p", "x", *argv], env=dict(env, POSTS=json.dumps(posts), **extra),
                          capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(Path(env["OUT"]).read_text())


def pre_tool_use(command: str) -> dict:
    return {"event": "PreToolUse", "body": {"hook_event_name": "PreToolUse", "session_id": "cli-1", "tool_name": "Bash",
                                            "tool_input": {"command": command}, "tool_use_id": "toolu_1", "cwd": "/"}}


def audit_rows(env: dict) -> list[dict]:
    path = Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def write_config(env: dict, text: str) -> None:
    path = Path(env["XDG_CONFIG_HOME"]) / "claudeguard" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_first_launch_starts_it_and_its_hooks_answer(env):
    write_config(env, '[permissions]\nallow = ["Bash(echo *)"]\ndeny = ["Bash(rm *)"]\n')
    out = guard(env, [pre_tool_use("echo hi"), pre_tool_use("rm -rf x")])
    assert [r["status"] for r in out["results"]] == [200, 200]
    assert out["results"][0]["answer"]["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert out["results"][1]["answer"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    rec = record(env)
    assert rec is not None and rec["port"] == out["port"] and live_pids(env) == [rec["pid"]]
    assert [(r["decision"], r["decided_by"]) for r in audit_rows(env)] == [("allow", "rule"), ("deny", "rule")]
    # private: the directory 0700, the socket and the record 0600
    assert service_dir(env).stat().st_mode & 0o777 == 0o700
    assert (service_dir(env) / "control.sock").stat().st_mode & 0o777 == 0o600
    assert (service_dir(env) / "service.json").stat().st_mode & 0o777 == 0o600
    # the launcher has exited: its session is gone from the service
    status = json.loads(ctl(env, "service", "status", "--json").stdout)
    assert status["sessions"] == [] and status["pid"] == rec["pid"]


def test_a_second_launch_reuses_the_service_and_the_session_ends_with_its_launcher(env):
    guard(env, [])
    first = record(env)
    out = guard(env, [{"event": "SubagentStop", "body": {"hook_event_name": "SubagentStop"}}])
    assert out["results"][0]["status"] == 200
    assert record(env)["pid"] == first["pid"] and live_pids(env) == [first["pid"]]


def test_without_the_secret_401_and_nothing_posted(env):
    write_config(env, '[permissions]\nask = ["Bash(echo *)"]\n')
    posts = [dict(pre_tool_use("echo a"), token="none"), dict(pre_tool_use("echo b"), token="wrong")]
    out = guard(env, posts)
    assert [r["status"] for r in out["results"]] == [401, 401]
    assert audit_rows(env) == []
    channel = Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "channel"
    assert not channel.exists() or list(channel.iterdir()) == []


def test_an_unknown_session_gets_401(env):
    guard(env, [])
    port = record(env)["port"]
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/hook/0123456789abcdef/PreToolUse", body=b"{}",
                 headers={"Authorization": "Bearer " + "1" * 48})
    assert conn.getresponse().status == 401
    conn.close()


def test_a_request_waits_for_its_sessions_registration_with_a_bound(env, monkeypatch):
    # A launcher that knows the port from the record starts the CLI first and registers while
    # it starts: the service holds the session's requests until then, and checks the secret.
    import http.client
    import threading

    from claudeguard.files import write_atomic
    from claudeguard.paths import runtime_dir
    from claudeguard.service.client import Registration
    from claudeguard.service.server import REGISTRATION_WAIT_S

    guard(env, [])
    port = record(env)["port"]
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", env["CLAUDEGUARD_RUNTIME_DIR"])
    monkeypatch.setenv("HOME", env["HOME"])  # the home whose service the runtime dir holds (its slot)
    sid, token = "0123456789abcdef", "a1" * 24
    session_dir = runtime_dir("sessions", sid)
    write_atomic(session_dir / "session.json", json.dumps({"session_id": sid, "policy": {}, "approval": {},
                                                           "log_dir": env["CLAUDEGUARD_LOG_DIR"]}))
    answers: dict[str, tuple[int, float]] = {}

    def post(name: str, secret: str, session: str = sid) -> None:
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", f"/hook/{session}/Stop", body=b'{"hook_event_name": "Stop"}',
                     headers={"Authorization": f"Bearer {secret}"})
        answers[name] = (conn.getresponse().status, time.monotonic() - started)
        conn.close()

    def waiting() -> int:
        return json.loads(ctl(env, "service", "status", "--json").stdout)["waiting"]

    early = threading.Thread(target=post, args=("early", token))
    early.start()
    wait_until(lambda: waiting() == 1, what="the request waiting for its session")
    registration = Registration(sid, str(session_dir), token, cli_pid=os.getpid())  # this process posts its hooks
    try:
        assert registration.open() == port
        early.join(60)
        assert answers["early"][0] == 200
        post("wrong secret", "b2" * 24)  # registered: no wait, the secret decides
        assert answers["wrong secret"][0] == 401 and answers["wrong secret"][1] < REGISTRATION_WAIT_S
    finally:
        registration.close()
    post("never registered", token, "fedcba9876543210")
    status, waited = answers["never registered"]
    assert status == 401 and REGISTRATION_WAIT_S <= waited < REGISTRATION_WAIT_S + 5
    assert waiting() == 0


def test_a_launcher_registers_after_the_cli_starts_only_with_a_live_service_of_its_version(env, monkeypatch):
    from claudeguard.service import files
    from claudeguard.shim.main import _register_with_service

    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", env["CLAUDEGUARD_RUNTIME_DIR"])
    monkeypatch.setenv("HOME", env["HOME"])  # the home whose service the runtime dir holds (its slot)
    assert files.known_port() is None  # no service yet: the launcher starts one and registers first
    guard(env, [])
    rec = record(env)
    registration, hooks = _register_with_service("0123456789abcdef", "unused")
    assert registration is None and hooks.port == rec["port"] and len(hooks.token) == 48
    files.write_record(str(service_dir(env)), dict(rec, version="0.0.0+other"))
    assert files.known_port() is None  # another version's port is never injected


def test_malformed_and_oversized_bodies_are_denied_with_a_reason(env):
    write_config(env, '[permissions]\nallow = ["Bash(echo *)"]\n')
    posts = [{"event": "PreToolUse", "body": "{not json"},
             {"event": "PreToolUse", "body": "[1, 2]"},
             dict(pre_tool_use("echo hi"), length=9 * 1024 * 1024)]
    out = guard(env, posts)
    answers = [r["answer"]["hookSpecificOutput"] for r in out["results"]]
    assert [a["permissionDecision"] for a in answers] == ["deny", "deny", "deny"]
    assert "malformed hook input" in answers[0]["permissionDecisionReason"]
    assert "not a JSON object" in answers[1]["permissionDecisionReason"]
    assert "refused (limit 8388608)" in answers[2]["permissionDecisionReason"]


def test_two_launchers_at_once_end_up_with_one_service(env):
    procs = [subprocess.Popen(GUARD + ["-p", "x"], env=dict(env, POSTS="[]", OUT=env["OUT"] + str(i)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(4)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    rec = record(env)
    assert live_pids(env) == [rec["pid"]]
    ports = {json.loads(Path(env["OUT"] + str(i)).read_text())["port"] for i in range(4)}
    assert ports == {rec["port"]}


def test_after_a_crash_a_stale_record_and_socket_are_replaced(env):
    guard(env, [])
    old = record(env)
    os.kill(old["pid"], signal.SIGKILL)
    wait_until(lambda: process_start(old["pid"]) is None, what="the killed service to go")
    assert (service_dir(env) / "service.json").exists() and (service_dir(env) / "control.sock").exists()  # stale
    out = guard(env, [{"event": "SubagentStop", "body": {"hook_event_name": "SubagentStop"}}])
    new = record(env)
    assert new["pid"] != old["pid"] and live_pids(env) == [new["pid"]]
    assert out["results"][0]["status"] == 200
    # No session was running: nobody held the old port's socket, and nothing names that port;
    # the new service listens on a new one (a port held by a launcher comes back: below).
    assert new["port"] != old["port"]


def test_a_service_of_another_version_is_retired_not_used(env):
    # A service of "another version": the same code with its fingerprint replaced. Its planner
    # is a process of this code (the launcher's), which must not prepare the launcher's session
    # with the old service's port: it refuses, as the planner of an upgraded-in-place install does.
    code = ("import sys; import claudeguard.service.files as f; f.fingerprint = lambda: '0.0.0+old'; "
            "from claudeguard.service.server import main; sys.exit(main(['--detach']))")
    (service_dir(env)).mkdir(mode=0o700)
    log = os.open(service_dir(env) / "service.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    subprocess.run([sys.executable, "-c", code], env=env, stderr=log, check=True, timeout=30)
    os.close(log)
    old = wait_until(lambda: record(env), what="the old service's record")
    assert old["version"] == "0.0.0+old"
    # its planner is up (the launcher asks it first): the race the CI once lost, now every time
    wait_until(lambda: (service_dir(env) / "plan.sock").exists(), what="the old service's planner")
    out = guard(env, [{"event": "SubagentStop", "body": {"hook_event_name": "SubagentStop"}}])
    new = record(env)
    assert new["version"] != "0.0.0+old" and new["pid"] != old["pid"] and out["port"] == new["port"]
    # the old one had no session: it gives up its slot and exits
    wait_until(lambda: process_start(old["pid"]) is None, what="the retired service to exit")
    assert live_pids(env) == [new["pid"]]


def test_a_retired_services_desk_keeps_serving_its_open_page_then_it_exits(env):
    # Two installs (two code versions) in one home: the newer launcher retires the older service.
    # A desk page open on the older one keeps working (its URL printed earlier does not die);
    # once the page closes, the retired service exits.
    import http.client
    import urllib.parse

    from claudeguard.service import client

    code = ("import sys; import claudeguard.service.files as f; f.fingerprint = lambda: '0.0.0+old'; "
            "from claudeguard.service.server import main; sys.exit(main(['--detach']))")
    service_dir(env).mkdir(mode=0o700)
    log = os.open(service_dir(env) / "service.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    subprocess.run([sys.executable, "-c", code], env=env, stderr=log, check=True, timeout=30)
    os.close(log)
    old = wait_until(lambda: record(env), what="the old service's record")
    sock = client._connect_control(str(service_dir(env)))
    try:
        reply = client.request(sock, {"op": "desk"})
    finally:
        sock.close()
    assert reply["ok"], reply
    url = urllib.parse.urlsplit(reply["url"])
    login = http.client.HTTPConnection("127.0.0.1", reply["port"], timeout=10)
    login.request("GET", f"{url.path}?{url.query}")
    answered = login.getresponse()
    assert answered.status == 303
    cookie = answered.getheader("Set-Cookie").split(";")[0]
    base = answered.getheader("Location")
    login.close()
    page = http.client.HTTPConnection("127.0.0.1", reply["port"], timeout=10)
    page.request("GET", base + "api/events", headers={"Cookie": cookie})
    events = page.getresponse()  # the page's event stream, held open (by this reference: its socket)
    assert events.status == 200
    try:
        guard(env, [{"event": "SubagentStop", "body": {"hook_event_name": "SubagentStop"}}])
        new = record(env)
        assert new["version"] != "0.0.0+old" and new["pid"] != old["pid"]
        # retired (its slot is the successor's), and its desk still answers the page
        state = http.client.HTTPConnection("127.0.0.1", reply["port"], timeout=10)
        state.request("GET", base + "api/state", headers={"Cookie": cookie})
        answered = state.getresponse()
        assert answered.status == 200, answered.read()[:300]
        state.close()
        assert process_start(old["pid"]) is not None
    finally:
        events.close()
        page.close()
    wait_until(lambda: process_start(old["pid"]) is None, what="the retired service to exit once the page closed")
    assert live_pids(env) == [new["pid"]]


def test_it_exits_when_idle_and_stop_stops_it(env):
    guard(env, [], CLAUDEGUARD_SERVICE_IDLE="0.5")
    # (on a loaded machine it may be gone before its record is read: half a second idle)
    wait_until(lambda: not live_pids(env), timeout=60, what="the idle service to exit")
    assert not (service_dir(env) / "service.json").exists() and not (service_dir(env) / "control.sock").exists()
    assert ctl(env, "service", "status").returncode == 1
    started = ctl(env, "service", "start")
    assert started.returncode == 0, started.stderr
    pid = record(env)["pid"]
    stopped = ctl(env, "service", "stop")
    assert stopped.returncode == 0 and process_start(pid) is None
    assert sorted(p.name for p in service_dir(env).iterdir()) == ["run.lock", "service.log", "start.lock"]


def test_another_user_cannot_reach_the_control_socket(env):
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")  # CI runs as root; see .ci/run
    guard(env, [])
    sock_path = str(service_dir(env) / "control.sock")
    code = ("import os, socket, sys; os.setgid(65534); os.setuid(65534); s = socket.socket(socket.AF_UNIX); "
            "\ntry:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(7)\nsys.exit(0)")
    proc = subprocess.run([sys.executable, "-c", code, sock_path], timeout=30)
    assert proc.returncode == 7


def test_service_off_falls_back_to_command_hooks(env):
    write_config(env, '[permissions]\nallow = ["Bash(echo *)"]\n')
    proc = subprocess.run(GUARD + ["--guard-dry-run", "-p", "x"], env=dict(env, CLAUDEGUARD_SERVICE="0"),
                          capture_output=True,
                          text=True, timeout=30)
    settings = json.loads(next(a.split("=", 1)[1]
                               for a in json.loads(proc.stdout)["argv"] if a.startswith("--settings=")))
    assert settings["hooks"]["PreToolUse"][0]["hooks"][0]["type"] == "command"
    assert record(env) is None


def test_the_runtime_dir_removed_under_it_is_published_again_not_doubled(env):

    guard(env, [])
    first = record(env)
    remove_at_once(env["CLAUDEGUARD_RUNTIME_DIR"])
    again = wait_until(lambda: record(env), timeout=60, what="the record published again")
    assert again["pid"] == first["pid"] and again["port"] == first["port"]
    assert service_dir(env).stat().st_mode & 0o777 == 0o700
    out = guard(env, [{"event": "SubagentStop", "body": {"hook_event_name": "SubagentStop"}}])
    assert out["results"][0]["status"] == 200 and out["port"] == first["port"]
    assert live_pids(env) == [first["pid"]]


def test_a_retired_service_does_not_publish_its_slot_again(tmp_path, monkeypatch):
    """A retire that lands while the main loop checks the slot: the check must not find the
    socket gone and publish it again (the successor would then find the slot taken and exit,
    and the launcher would wait for a service that never comes)."""
    import contextlib
    import fcntl

    from claudeguard.service import files
    from claudeguard.service.server import Service

    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", str(runtime))
    # What publishing again would also do, recorded instead of done in this test process: start
    # a planner, and point stderr at the service log.
    done: list[str] = []
    monkeypatch.setattr("claudeguard.service.planner.start", lambda directory, port, version: done.append("planner"))
    monkeypatch.setattr(os, "dup2", lambda fd, fd2: done.append(f"dup2 to {fd2}"))
    directory = files.service_dir()
    service = Service(directory)
    service.slot.run_lock = os.open(os.path.join(directory, files.RUN_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(service.slot.run_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    service._bind_control()
    files.write_record(directory, {"pid": os.getpid(), "start": files.process_start(os.getpid()), "version": "old",
                                   "port": 1})
    service.retire()
    try:
        service._keep_slot()  # the main loop's check, begun before the retire was seen
        # no socket, no record; only the word for doctor that a retired service still serves
        assert sorted(os.listdir(directory)) == sorted([files.RUN_LOCK, f"retired-{os.getpid()}.json"])
        assert [r["pid"] for r in files.read_retired(directory)] == [os.getpid()]
    finally:  # a record published again names this process: the fixture would stop it
        for name in (files.RECORD, files.CONTROL, f"retired-{os.getpid()}.json"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
    successor = os.open(os.path.join(directory, files.RUN_LOCK), os.O_RDWR)
    try:
        fcntl.flock(successor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the slot is free
    finally:
        os.close(successor)
    assert done == []


def test_the_prompt_tool_is_served_over_http_with_the_secret(env):
    write_config(env, '[permissions]\nallow = ["Bash(echo *)"]\ndeny = ["Bash(rm *)"]\n')
    def rpc(method, params=None, msg_id=1, **extra):
        msg = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if msg_id is not None:
            msg["id"] = msg_id
        return dict({"event": "mcp", "body": msg}, **extra)
    call = {"name": "approve",
            "arguments": {"tool_name": "Bash", "input": {"command": "echo hi"}, "tool_use_id": "toolu_9"}}
    deny = {"name": "approve",
            "arguments": {"tool_name": "Bash", "input": {"command": "rm x"}, "tool_use_id": "toolu_8"}}
    seen = pre_tool_use("echo hi")  # the hook notes the call first, as the CLI's PreToolUse does
    seen["body"]["tool_use_id"] = "toolu_9"
    out = guard(env,
                [seen, rpc("initialize", {"protocolVersion": "2025-06-18"}),
                 rpc("notifications/initialized", msg_id=None),
                      rpc("server/discover", msg_id=2), rpc("tools/list", msg_id=3), rpc("tools/call", call, msg_id=4),
                      rpc("tools/call", deny, msg_id=5), dict(rpc("tools/list"), token="none"),
                      dict(rpc("tools/list"), token="wrong")])
    res = out["results"][1:]
    assert [r["status"] for r in res] == [200, 202, 200, 200, 200, 200, 401, 401]
    assert res[0]["answer"]["result"]["serverInfo"]["name"] == "claudeguard" and res[0]["mode"] == "0o600"
    assert res[1]["answer"] is None and res[2]["answer"]["result"] == {}
    assert [t["name"] for t in res[3]["answer"]["result"]["tools"]] == ["approve"]
    assert json.loads(res[4]["answer"]["result"]["content"][0]["text"]) == {"behavior": "allow",
                                                                            "updatedInput": {"command": "echo hi"}}
    assert json.loads(res[5]["answer"]["result"]["content"][0]["text"])["behavior"] == "deny"
    # the secret is in the 0600 file, never in argv
    proc = subprocess.run(GUARD + ["--guard-dry-run", "-p", "x"], env=env, capture_output=True, text=True, timeout=30)
    assert "Bearer <secret made at start>" in proc.stdout


class Heard:
    """A Registration's listener: the service's events, in order."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def message(self, msg: dict) -> None:
        self.events.append(msg)

    def lost(self) -> None:
        self.events.append({"event": "lost"})

    def registered(self) -> None:
        self.events.append({"event": "registered"})


def test_the_service_watches_a_registered_child_and_refuses_a_reused_pid(env, monkeypatch):
    from claudeguard.paths import runtime_dir
    from claudeguard.service.client import Registration

    for key in ("CLAUDEGUARD_RUNTIME_DIR", "CLAUDEGUARD_LOG_DIR", "HOME", "XDG_CONFIG_HOME", "PYTHONPATH"):
        monkeypatch.setenv(key, env[key])
    directory = runtime_dir("sessions", "00000000000000aa")
    (directory / "session.json").write_text(json.dumps({"session_id": "00000000000000aa", "policy": {}, "cwd": "/"}))
    child = subprocess.Popen(["sleep", "60"])
    link = Registration("00000000000000aa", str(directory), os.urandom(24).hex())
    heard = link.listener = Heard()
    try:
        link.open()
        watch = {"op": "watch", "session_id": "00000000000000aa", "pid": os.getpid(), "child_pid": child.pid,
                 "config": {"sample_interval": 0.1, "stall_after": 300}, "cwd": "/", "argv": ["claude"]}
        assert link.send(dict(watch, child_start="not its start"))
        wait_until(lambda: heard.events, what="the refusal")
        assert heard.events == [{"event": "watching", "ok": False, "error": "no such child process"}]
        assert link.send(dict(watch, child_start=process_start(child.pid)))
        wait_until(lambda: len(heard.events) == 2, what="the answer")
        assert heard.events[1]["ok"] is True and heard.events[1]["pid"] == record(env)["pid"]
        status = wait_until(lambda: (directory / "status.json").exists()
                            and json.loads((directory / "status.json").read_text()),
                            what="the service's status file")
        assert (status["watcher"], status["watcher_pid"], status["pid"], status["child_pid"]) == \
               ("service", record(env)["pid"], os.getpid(), child.pid)
        assert status["state"] != "exited"
        assert link.send({"op": "watch-end", "session_id": "00000000000000aa", "code": 0})
        wait_until(lambda: heard.events[-1] == {"event": "watch-ended"}, what="the end")
        final = json.loads((directory / "status.json").read_text())
        assert (final["state"], final["exit_code"]) == ("exited", 0)
    finally:
        link.close()
        child.kill()
        child.wait()


def test_a_launcher_that_stops_reading_fails_the_services_send_and_loses_its_connection():
    """The service's end of a control connection (the one sampling thread writes to it) never
    hangs on a launcher that stopped reading: the send fails within the bound, and the launcher
    sees its connection end, as after a crash (then it watches on its own)."""
    import socket as socket_mod

    import threading

    from claudeguard.service.watch import Link

    service_end, launcher_end = socket_mod.socketpair()
    sent: list[int] = []
    try:
        link = Link(service_end)
        line = {"event": "calm", "pad": "x" * 65536}

        def fill() -> None:  # nobody reads launcher_end: the buffers fill, then a send must fail
            while link.send(line):
                sent.append(1)

        writer = threading.Thread(target=fill, daemon=True)
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive(), "a send hung on a peer that does not read"
        assert sent
        launcher_end.settimeout(10)
        drained = b""
        while chunk := launcher_end.recv(1 << 20):  # what made it, then the end of the connection
            drained += chunk
        assert drained.count(b"\n") >= len(sent)
    finally:
        service_end.close()
        launcher_end.close()


def test_a_post_with_the_secret_from_anyone_but_the_sessions_cli_is_refused(env, monkeypatch):
    # Attack 3 without the sandbox: a tool read the session's settings file (the secret is in
    # it). The service takes a foreground session's hook posts from its CLI's process only.
    import http.client

    from claudeguard.files import write_atomic
    from claudeguard.paths import runtime_dir
    from claudeguard.service.client import Registration

    guard(env, [])
    port = record(env)["port"]
    monkeypatch.setenv("CLAUDEGUARD_RUNTIME_DIR", env["CLAUDEGUARD_RUNTIME_DIR"])
    monkeypatch.setenv("HOME", env["HOME"])  # the home whose service the runtime dir holds (its slot)
    sid, token = "0123456789abcdee", "c3" * 24
    session_dir = runtime_dir("sessions", sid)
    write_atomic(session_dir / "session.json", json.dumps({"session_id": sid, "policy": {}, "approval": {},
                                                           "log_dir": env["CLAUDEGUARD_LOG_DIR"]}))
    cli = subprocess.Popen(["sleep", "60"])  # the session's "CLI": not this process
    registration = Registration(sid, str(session_dir), token, cli_pid=cli.pid)
    try:
        assert registration.open() == port
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", f"/hook/{sid}/PreToolUse", body=json.dumps(pre_tool_use("echo hi")["body"]).encode(),
                     headers={"Authorization": f"Bearer {token}"})
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
    finally:
        registration.close()
        cli.kill()
        cli.wait()
    assert resp.status == 403
    assert body["error"].startswith(f"hook post refused: posted by pid {os.getpid()} (") and \
        body["error"].endswith("), not the session's Claude Code")
    rows = audit_rows(env)
    assert [r["event"] for r in rows] == ["hook-refused"] and rows[0]["session_id"] == sid  # nothing decided
