"""The resident service under the real CLIs: killed in the middle of a session, no call gets
more than the policy allows, and no call is allowed without an answer (issue 11). The service
answers both the hooks and the `-p` asker (the permission-prompt tool, MCP over HTTP, on 2.1.197;
the PermissionRequest hook on 2.1.330), so a call that waited in it is denied by the CLI when it
dies; later calls are answered by the restarted service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from claudeguard.service.files import process_start
from claudeguard.testing.cli_install import newest_under_test
from tests.shim_helpers import (
    GUARD, ctl, guarded_env, pending, results_of, wait_pending, write_user_config,
)
from tests.shim_helpers import wait_until as shared_wait_until


def echo(word: str) -> dict:
    return {"name": "Bash", "input": {"command": f"echo {word} > {word}.txt", "description": f"echo {word}"}}


def rm(word: str) -> dict:
    return {"name": "Bash", "input": {"command": f"rm -f {word}.txt", "description": f"rm {word}"}}


def service_record(env: dict) -> dict | None:
    try:
        return json.loads((Path(env["CLAUDEGUARD_RUNTIME_DIR"]) / "service" / "service.json").read_text())
    except (OSError, ValueError):
        return None


def wait_until(predicate, timeout: float = 60, what: str = "condition"):  # type: ignore[no-untyped-def]
    return shared_wait_until(predicate, timeout, what, interval=0.05)


def test_killing_the_service_mid_session_allows_nothing_unanswered(real_claude, cli_version, offline_env,
                                                                   model_server):
    server = model_server([
        {"match": "KILLSVC", "turns": [{"tool_use": echo("one")}, {"tool_use": rm("keep")}, {"tool_use": echo("two")},
                                       {"text": "fin"}]},
    ])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="60")
    write_user_config(env, '[permissions]\nask = ["Bash(echo *)"]\ndeny = ["Bash(rm *)"]\n')
    (offline_env.cwd / "keep.txt").write_text("kept\n")
    proc = subprocess.Popen(GUARD + ["-p", "KILLSVC go", "--output-format", "stream-json", "--verbose"], env=env,
                            cwd=offline_env.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = wait_pending(env, lambda r: "one" in r["summary"], timeout=60)
        old = service_record(env)
        assert old is not None and first["session_id"]
        os.kill(old["pid"], signal.SIGKILL)  # the service dies while the call waits in it
        wait_until(lambda: process_start(old["pid"]) is None, what="the killed service to go")
        # The launcher starts a new service and registers its session again.
        new = wait_until(lambda: (r := service_record(env)) and r["pid"] != old["pid"]
                         and process_start(r["pid"]) and r,
                         what="a new service")
        # The call that waited in the dead service is never run without an answer: its hook
        # call died with the service, and the CLI asks its -p asker (the prompt tool on 2.1.197,
        # the PermissionRequest hook on 2.1.330: both the service's, on the same port). The
        # launcher holds that port's socket, so the asker's call waits on it until the new
        # service takes it over and asks once more (and we deny). The next calls are asked by
        # the new service (and we approve). Nothing runs that the policy or a human did not
        # allow.
        approved: list[str] = []
        asked_again: list[str] = []
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            waiting = pending(env)
            assert len(waiting) <= 1, waiting
            for req in waiting:
                assert req["id"] not in approved + asked_again  # never asked twice
                assert not (offline_env.cwd / "two.txt").exists()
                if "one" in req["summary"]:
                    assert not asked_again and not approved, req  # the -p asker's call, once
                    assert ctl(env, "deny", req["id"]).returncode == 0
                    asked_again.append(req["id"])
                    continue
                assert "two" in req["summary"], req
                assert ctl(env, "approve", req["id"]).returncode == 0
                approved.append(req["id"])
            time.sleep(0.1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert (offline_env.cwd / "keep.txt").read_text() == "kept\n"
    assert not (offline_env.cwd / "one.txt").exists()
    assert (offline_env.cwd / "two.txt").exists() == bool(approved)
    assert pending(env) == []
    rows = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    decided = [(r["summary"].split()[2], r["decision"], r["decided_by"]) for r in rows]
    # rm: denied by the new service's hook (audited) or by the CLI's own flag (not audited)
    assert [d for d in decided if d[0] != "-f"] == ([("one", "deny", "human")] * len(asked_again)
                                                    + [("two", "allow", "human")] * len(approved)), decided
    assert all(d == ("-f", "deny", "rule") for d in decided if d[0] == "-f"), decided
    status = json.loads(ctl(env, "service", "status", "--json").stdout)
    assert status["pid"] == new["pid"] and status["sessions"] == []  # the launcher unregistered at exit


class _BrokenHook(BaseHTTPRequestHandler):
    """A service that takes the PermissionRequest and fails it: HTTP 500, or no answer in time."""

    mode = "500"
    posted: list[dict] = []

    def do_POST(self) -> None:
        _BrokenHook.posted.append(json.loads(self.rfile.read(int(self.headers.get("content-length") or 0))))
        if _BrokenHook.mode == "slow":
            time.sleep(4)  # past the entry's timeout (2 s)
        self.send_response(500)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


# 2.1.197 does not fire PermissionRequest in -p: 2.1.330, or the newest version under test after it
@pytest.mark.parametrize("cli_version", [newest_under_test("2.1.330")])
@pytest.mark.parametrize("mode", ["refused", "500", "slow"])
def test_an_unanswered_print_mode_permission_request_is_a_deny(real_claude, offline_env, model_server, run_claude,
                                                               mode):
    # The guard's own PermissionRequest entry of a 2.1.330 -p plan (the dry run's), pointed at a
    # service that is gone (nothing listens), fails (500), or does not answer within the timeout.
    server = model_server([{"match": "PRGONE", "turns": [{"tool_use": echo("made")}, {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    dry = subprocess.run(GUARD + ["--guard-dry-run", "-p", "x"], env=env, cwd=offline_env.cwd, capture_output=True,
                         text=True, timeout=60)
    argv = json.loads(dry.stdout)["argv"]
    [settings] = [json.loads(a.split("=", 1)[1]) for a in argv if a.startswith("--settings=")]
    entry = settings["hooks"]["PermissionRequest"][0]["hooks"][0]
    assert entry["type"] == "http" and ":PORT/" in entry["url"]
    _BrokenHook.mode, _BrokenHook.posted = mode, []
    listener = ThreadingHTTPServer(("127.0.0.1", 0), _BrokenHook)
    port = listener.server_address[1]
    if mode == "refused":
        listener.server_close()  # the port was ours a moment ago: nothing listens on it now
    else:
        threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        entry.update(url=entry["url"].replace("PORT", str(port)), timeout=2)
        hooks = {"PermissionRequest": [{"matcher": "*", "hooks": [entry]}]}
        proc = run_claude([str(real_claude), "-p", "PRGONE go", "--output-format", "stream-json", "--verbose",
                           "--settings=" + json.dumps({"hooks": hooks})],
                          dict(env, CLAUDEGUARD_HOOK_TOKEN="secret"), offline_env.cwd, timeout=90)
    finally:
        if mode != "refused":
            listener.shutdown()
            listener.server_close()
    assert proc.returncode == 0, proc.stderr
    assert len(_BrokenHook.posted) == (0 if mode == "refused" else 1)
    assert not (offline_env.cwd / "made.txt").exists()
    [denial] = results_of(proc)[-1]["permission_denials"]
    assert denial["tool_input"]["command"] == "echo made > made.txt"
