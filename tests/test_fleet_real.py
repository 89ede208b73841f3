"""The fleet on the real CLIs (both pinned versions), two machines simulated on one host, each
with its own HOME, config, runtime dir, audit log and guard service, and one real redis-server:

- a background subagent's asked call on machine A is approved from machine B with
  ``claudeguardctl pending --fleet`` and ``approve ID``: the call runs on A, and A's audit log
  names B (the approver's ACL user and machine);
- from inside a guarded session on a member, no tool reaches Redis with credentials that can
  answer: the credential is not in the agent's environment, its file is hidden, ``claudeguardctl
  approve`` of a fleet request is refused, and a hand-made answer over the Redis port is refused
  by Redis (no credentials, or a member's, which can write no answer).

Every service, CLI and machine process is stopped by pid (conftest, fleet_helpers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import PREFIX
from tests.shim_helpers import CTL, guarded_env, run_guarded, wait_until, write_user_config

ATTACKER = Path(__file__).parent / "data" / "fleet_attacker.py"


def _member_config(fleet: Any, name: str, password_file: Path | None = None) -> str:
    user, password = fleet.member_user(name)
    text = (f'[fleet]\nurl = "{fleet.server.url}"\nusername = "{user}"\nmachine = "{name}"\nprefix = "{PREFIX}"\n')
    if password_file is not None:
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        text += f'password_file = "{password_file}"\n'
    return text


def _approver_env(fleet: Any, root: Path, name: str, machine: str) -> dict[str, str]:
    """Machine B: its own HOME, config (an approver's ACL user, its password in a 0600 file),
    runtime dir and log dir."""
    user, password = fleet.approver_user(name)
    home = root / machine
    for sub in ("xdg/claudeguard", "run", "log"):
        (home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    pw = home / "approver.pw"
    fd = os.open(pw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    (home / "xdg" / "claudeguard" / "config.toml").write_text(
        f'[fleet]\nurl = "{fleet.server.url}"\nusername = "{user}"\npassword_file = "{pw}"\nmachine = "{machine}"\n'
        f'prefix = "{PREFIX}"\n')
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg"),
            "CLAUDEGUARD_RUNTIME_DIR": str(home / "run"), "CLAUDEGUARD_LOG_DIR": str(home / "log")}


def _ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CTL, *args], env=env, capture_output=True, text=True, timeout=60)


def _audit(env: dict[str, str]) -> list[dict[str, Any]]:
    path = Path(env["CLAUDEGUARD_LOG_DIR"]) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.one_cli
@pytest.mark.newest_cli
def test_a_background_subagents_call_is_approved_from_another_machine(real_claude, offline_env, model_server, fleet,
                                                                     tmp_path):
    server = model_server([
        {"match": "FLEETRUN", "turns": [
            {"tool_use": {"name": "Agent", "input": {"description": "helper", "prompt": "FLEETSUB go",
                                                     "subagent_type": "general-purpose", "run_in_background": True}}},
            {"text": "fin"}]},
        {"match": "FLEETSUB", "turns": [
            {"tool_use": {"name": "Bash", "input": {"command": "echo remote > fleet.txt", "description": "asked"}}},
            {"text": "sub done"}]},
    ])
    env_a = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="40")
    user_a, password_a = fleet.member_user("alpha")
    env_a["CLAUDEGUARD_FLEET_PASSWORD"] = password_a  # password_env's default: the service reads it, the CLI never
    write_user_config(env_a, '[permissions]\nask = ["Bash(echo *)"]\n\n' + _member_config(fleet, "alpha"))
    env_b = _approver_env(fleet, tmp_path, "bob", "bravo")

    seen: list[dict[str, Any]] = []
    answered: list[subprocess.CompletedProcess[str]] = []
    beats: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def approve_from_b() -> None:
        try:
            def listed() -> list[dict[str, Any]]:
                out = _ctl(env_b, "pending", "--fleet", "--json")
                assert out.returncode == 0, out.stderr
                return json.loads(out.stdout)

            items = wait_until(listed, 60, "machine alpha's request in `pending --fleet` on bravo", interval=0.2)
            seen.extend(items)

            def alpha_beat() -> dict[str, Any] | None:  # the service's heartbeat: its session, one call waiting
                out = _ctl(env_b, "ps", "--fleet", "--json")
                row = next((m for m in json.loads(out.stdout) if m["machine"] == "alpha"), None)
                return row if row and row["alive"] and row["pending"] == 1 and row["sessions"] else None

            beats.append(wait_until(alpha_beat, 60, "alpha's heartbeat with its session", interval=0.3))
            answered.append(_ctl(env_b, "approve", items[0]["id"]))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    approver = threading.Thread(target=approve_from_b, daemon=True)
    approver.start()
    proc = run_guarded(env_a, offline_env.cwd, "FLEETRUN go", timeout=150)
    approver.join(70)
    assert not errors, errors
    assert proc.returncode == 0, proc.stderr
    # B saw exactly the one call, with where it waits and the hash of that exact call
    (item,) = seen
    assert item["machine"] == "alpha" and item["tool"] == "Bash" and item["agent_type"] == "general-purpose"
    assert item["input"]["command"] == "echo remote > fleet.txt" and len(item["call_sha256"]) == 64
    (beat,) = beats
    assert [s["session_id"] for s in beat["sessions"]] == [item["session_id"]], beat
    (done,) = answered
    assert done.returncode == 0, done.stderr
    assert f"{item['id']} (alpha) approved (once): applied" in done.stdout
    # the call ran on A
    wait_until(lambda: (offline_env.cwd / "fleet.txt").exists(), 60, "the approved call to run on alpha")
    assert (offline_env.cwd / "fleet.txt").read_text() == "remote\n"
    # A's audit log names B: the approver's ACL user (from the stream's key) and its machine
    rows = _audit(env_a)
    decided = [r for r in rows if r.get("request_id") == item["id"] and r.get("decided_by") == "human"]
    assert len(decided) == 1, rows
    by = decided[0]["answered_by"]
    assert by["via"] == "fleet" and by["acl_user"] == "cg-a-bob" and by["machine"] == "bravo", by
    assert by["uid"] == os.getuid() and by["relayed_by"]["pid"] != by["pid"], by  # B's uid; A's service relayed it
    relayed = [r for r in rows if r.get("event") == "fleet-answer" and r.get("request_id") == item["id"]]
    assert len(relayed) == 1 and relayed[0]["applied"] is True, relayed
    # a second answer from B is refused with who won
    again = _ctl(env_b, "deny", item["id"])
    assert again.returncode == 1 and "already answered by cg-a-bob@bravo" in again.stderr, again
    # nothing of A's left listed in the fleet once the call ended
    assert wait_until(lambda: json.loads(_ctl(env_b, "pending", "--fleet", "--json").stdout) == [], 60,
                      "the fleet listing to empty")


@pytest.mark.one_cli
@pytest.mark.parametrize("box", ["box", "no-box"])
def test_no_tool_in_a_members_session_can_answer_through_the_fleet(real_claude, offline_env, model_server, fleet,
                                                                    tmp_path, box):
    # Machine C (a simulated member) has a call waiting; the agent on member A tries everything:
    # in the box (the default), and without it, to show the layers under it hold on their own.
    charlie = fleet.machine("charlie")
    (rid,) = charlie.post(1, timeout=60, tool_input={"command": "echo charlie"})
    pw_file = tmp_path / "alpha-secrets" / "fleet.pw"
    pw_file.parent.mkdir(mode=0o700)
    out = offline_env.cwd / "attack.json"
    spec = offline_env.cwd / "attack-spec.json"
    spec.write_text(json.dumps({"ctl": CTL, "id": rid, "target": "charlie", "prefix": PREFIX,
                                "host": "127.0.0.1", "port": fleet.server.port, "password_file": str(pw_file),
                                "out": str(out), "python": sys.executable}))
    # The script inside the project: the box's /tmp is its own, and a checkout under /tmp is not in it.
    shutil.copy(ATTACKER, offline_env.cwd / "fleet_attacker.py")
    server = model_server([{"match": "FLEETATTACK", "turns": [
        {"tool_use": {"name": "Bash", "input": {"command": f"python3 fleet_attacker.py {spec}", "description": "x"}}},
        {"text": "done"}]}])
    env_a = guarded_env(offline_env.use(server), real_claude)
    sandbox = '[security]\nsandbox = "off"\n\n' if box == "no-box" else ""
    write_user_config(env_a, sandbox + '[permissions]\nallow = ["Bash(python3 *)"]\n\n'
                      + _member_config(fleet, "alpha", password_file=pw_file))
    started = time.monotonic()
    proc = run_guarded(env_a, offline_env.cwd, "FLEETATTACK go", timeout=150)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(out.read_text())
    assert found["env"] == [], found  # no credential in the agent's environment
    if box == "box":
        # the password file is hidden, and so is the runtime dir: claudeguardctl has nothing to work with
        assert found["password_file"] == "error: Permission denied", found
        assert found["approve_rc"] != 0, found
        assert len(found["answers"]) == 1 and found["answers"][0].startswith("-NOAUTH"), found
    else:
        # without the box the Bash tool reads the file: a member's credential, which can answer nothing
        assert found["password_file"].startswith("read:"), found
        assert found["approve_rc"] == 1 and "answer refused: from inside session" in found["approve_said"], found
        assert found["answers"][0].startswith("-NOAUTH"), found
        member = [r for r in found["answers"][1:] if not r.startswith("-WRONGPASS")]
        assert member and all(r.startswith("-NOPERM") for r in member), found
    # C's call still waits: nothing answered it, and C heard of no answer at all
    assert charlie.of("done") == [] and charlie.of("applied") == [], charlie.events
    assert not [r for r in charlie.audit() if r.get("event") == "fleet-answer"]
    assert time.monotonic() - started < 60
