"""The resident service under the real CLIs: killed in the middle of a session, no call gets
more than the policy allows, and no call is allowed without an answer (issue 11). The service
answers both the hooks and the permission-prompt tool (MCP over HTTP), so a call that waited in
it is denied by the CLI when it dies; later calls are answered by the restarted service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from claudeguard.service.files import process_start
from tests.shim_helpers import GUARD, ctl, guarded_env, pending, wait_pending, write_user_config
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


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    return shared_wait_until(predicate, timeout, what, interval=0.05)


def test_killing_the_service_mid_session_allows_nothing_unanswered(real_claude, offline_env, model_server):
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
        # and its prompt tool (both the service) are gone, and the CLI denies it. The next
        # calls race the restart: the new service asks (and we approve), or, while none
        # listens, the CLI denies them (--disallowedTools for rm; the unreachable prompt tool
        # for echo). Either way nothing runs that the policy or a human did not allow.
        approved = []
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            waiting = pending(env)
            assert len(waiting) <= 1 and all("two" in r["summary"] for r in waiting), waiting
            for req in waiting:
                assert req["id"] not in approved  # never asked twice
                assert not (offline_env.cwd / "two.txt").exists()
                assert ctl(env, "approve", req["id"]).returncode == 0
                approved.append(req["id"])
            time.sleep(0.1)
        out, err = proc.communicate(timeout=30)
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
    assert [d for d in decided if d[0] != "-f"] == [("two", "allow", "human")] * len(approved), decided
    assert all(d == ("-f", "deny", "rule") for d in decided if d[0] == "-f"), decided
    status = json.loads(ctl(env, "service", "status", "--json").stdout)
    assert status["pid"] == new["pid"] and status["sessions"] == []  # the launcher unregistered at exit
