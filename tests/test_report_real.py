"""The end-of-run report and ``--guard-fail-on`` on the real CLI (both pinned versions): exact
counts for a run with every kind of decision, exit 3 against 0, and the report of a run the
watchdog found stalled (warned: exit 3 with ``stall``; killed: 124 stays)."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from tests.shim_helpers import GUARD, ctl, guarded_env, pending, write_user_config

POLICY = '[permissions]\nallow = ["Bash(echo rule *)"]\ndeny = ["Bash(rm *)"]\nask = ["Bash(echo ask *)"]\n'


def bash(command: str) -> dict:
    return {"tool_use": {"name": "Bash", "input": {"command": command, "description": command}}}


class ByCommand(threading.Thread):
    """Approves requests whose command ends in "yes", denies "no", leaves the rest to time out."""

    def __init__(self, env: dict) -> None:
        super().__init__(daemon=True)
        self.env = env
        self.stop = threading.Event()
        self.answered: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            for req in pending(self.env):
                command = req["input"].get("command", "")
                if req["id"] in self.answered or not command.endswith(("yes", "no")):
                    continue
                verb = "approve" if command.endswith("yes") else "deny"
                assert ctl(self.env, verb, req["id"]).returncode == 0
                self.answered.append(req["id"])
            self.stop.wait(0.1)


def run(env: dict, cwd, prompt: str, *guard: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(GUARD + [*guard, "-p", prompt, "--output-format", "stream-json", "--verbose"],
                          env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def stdout_is_stream_json(proc: subprocess.CompletedProcess) -> list[dict]:
    lines = [json.loads(line) for line in proc.stdout.splitlines()]  # every line: nothing of ours on stdout
    assert lines and lines[-1]["type"] == "result"
    return lines


def test_report_counts_every_kind_of_decision_and_fail_on_exits_3(real_claude, cli_version, offline_env, model_server):
    server = model_server([{"match": "REPORTALL", "turns": [
        bash("echo rule one"), bash("rm -rf junk"), bash("echo ask yes"), bash("echo ask no"), bash("echo ask late"),
        {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_APPROVAL_TIMEOUT="8")
    write_user_config(env, POLICY)
    approver = ByCommand(env)
    approver.start()
    try:
        proc = run(env, offline_env.cwd, "REPORTALL go", "--guard-report", "run.json", "--guard-fail-on",
                   "timeout,stall")
    finally:
        approver.stop.set()
        approver.join(timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert stdout_is_stream_json(proc)[-1]["is_error"] is False
    report = json.loads((offline_env.cwd / "run.json").read_text())
    assert report["counts"] == {"allowed_by_rule": 1, "denied_by_rule": 1, "asked": 3, "approved_by_human": 1,
                                "denied_by_human": 1, "timed_out": 1, "stalls": 0}
    assert (report["exit_code"], report["child_exit_code"], report["fail_on"]) == (3, 0, ["timeout"])
    assert report["cli_version"] == cli_version
    assert [(c["summary"], c["decision"], c["decided_by"]) for c in report["calls"]] == [
        ("Bash: echo rule one", "allow", "rule"), ("Bash: rm -rf junk", "deny", "rule"),
        ("Bash: echo ask yes", "allow", "human"), ("Bash: echo ask no", "deny", "human"),
        ("Bash: echo ask late", "deny", "timeout")]
    assert {c["session_id"] for c in report["calls"]} == {report["session_id"]}
    assert report["stalls"] == [] and report["duration_s"] >= 8
    # The calls are this run's rows of the audit log, the same objects `audit --json` prints.
    logged = [json.loads(line) for line in ctl(env, "audit", "--json").stdout.splitlines()]
    assert [e for e in logged if e.get("session_id") == report["session_id"]] == report["calls"]
    # One line for cron's mail, and nothing else of ours on stderr but one line for each call
    # that waited for a human, at most once each: the one that timed out surely; the two a human
    # answered when the watchdog's sample saw them wait (the test's answer may come first, or,
    # on a busy machine, later).
    waiting = [line for line in proc.stderr.splitlines() if line.startswith("claudeguard: waiting for approval ")]
    assert sum("Bash: echo ask late;" in line for line in waiting) == 1, proc.stderr
    for call in ("yes", "no"):
        assert sum(f"Bash: echo ask {call};" in line for line in waiting) <= 1, proc.stderr
    assert all("Bash: echo ask " in line for line in waiting) and len(waiting) <= 3, proc.stderr
    ours = [line for line in proc.stderr.splitlines() if line.startswith("claudeguard:") and line not in waiting]
    assert ours == [f"claudeguard: session {report['session_id']}: 1 call denied by rule, 1 call denied by a human, "
                    "1 call timed out unanswered; exit 3 (--guard-fail-on timeout) (claudeguardctl audit "
                    "--json for details)"]


@pytest.mark.one_cli
def test_a_clean_run_exits_0_with_every_fail_on_word_from_the_environment(real_claude, offline_env, model_server):
    server = model_server([{"match": "REPORTCLEAN", "turns": [bash("echo rule two"), {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude, CLAUDEGUARD_REPORT="clean.json",
                      CLAUDEGUARD_FAIL_ON="denied,timeout,stall,asked")
    write_user_config(env, POLICY)
    proc = run(env, offline_env.cwd, "REPORTCLEAN go")
    assert proc.returncode == 0, proc.stderr
    stdout_is_stream_json(proc)
    report = json.loads((offline_env.cwd / "clean.json").read_text())
    assert report["counts"] == {"allowed_by_rule": 1, "denied_by_rule": 0, "asked": 0, "approved_by_human": 0,
                                "denied_by_human": 0, "timed_out": 0, "stalls": 0}
    assert (report["exit_code"], report["child_exit_code"], report["fail_on"]) == (0, 0, [])
    assert "claudeguard:" not in proc.stderr


@pytest.mark.one_cli
def test_a_denied_call_fails_only_when_asked_to(real_claude, offline_env, model_server):
    server = model_server([{"match": "REPORTDENY", "turns": [bash("rm -rf junk"), {"text": "fin"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, POLICY)
    plain = run(env, offline_env.cwd, "REPORTDENY go", "--guard-fail-on", "timeout,stall,asked")
    strict = run(env, offline_env.cwd, "REPORTDENY go", "--guard-fail-on", "denied", "--guard-report", "deny.json")
    assert (plain.returncode, strict.returncode) == (0, 3), (plain.stderr, strict.stderr)
    report = json.loads((offline_env.cwd / "deny.json").read_text())
    assert report["counts"]["denied_by_rule"] == 1 and report["fail_on"] == ["denied"]


def test_a_warned_stall_is_reported_and_fails_with_stall(real_claude, offline_env, model_server):
    # A 15 s gap in the answer and a 3 s threshold: the watchdog warns (the idle CLI's timers can
    # end an episode early and start another), then the answer completes and the CLI exits 0.
    server = model_server([{"match": "REPORTSLOW", "turns": [{"slow": {"text": "slow answer", "chunk_delay": 15}}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, "[watchdog]\nsample_interval = 0.5\n")
    proc = run(env, offline_env.cwd, "REPORTSLOW go", "--guard-stall-after", "3", "--guard-fail-on", "stall",
               "--guard-report", "slow.json")
    assert proc.returncode == 3, proc.stderr
    assert stdout_is_stream_json(proc)[-1]["result"] == "slow answer"
    report = json.loads((offline_env.cwd / "slow.json").read_text())
    warned = [line[len("claudeguard: "):]
              for line in proc.stderr.splitlines() if line.startswith("claudeguard: stalled: ")]
    assert warned and report["counts"]["stalls"] == len(warned) == len(report["stalls"])
    assert [s["diagnosis"] for s in report["stalls"]] == warned  # one entry per episode the watchdog reported
    assert {s["action"] for s in report["stalls"]} == {"warn"} and all(s["time"].endswith("Z")
                                                                       for s in report["stalls"])
    assert report["child_exit_code"] == 0 and report["fail_on"] == ["stall"]
    assert proc.stderr.splitlines()[-1] == (f"claudeguard: session {report['session_id']}: {len(warned)} "
                                            f"stall{'s' if len(warned) > 1 else ''}; "
                                            "exit 3 (--guard-fail-on stall) (claudeguardctl audit --json for details)")


@pytest.mark.one_cli
def test_a_killed_stall_writes_the_report_and_keeps_124(real_claude, offline_env, model_server):
    server = model_server([{"match": "REPORTHUNG", "turns": [{"stall_after_text": "Let me th"}]}])
    env = guarded_env(offline_env.use(server), real_claude)
    write_user_config(env, "[watchdog]\nsample_interval = 0.5\nkill_grace = 2\n")
    started = time.monotonic()
    proc = run(env, offline_env.cwd, "REPORTHUNG go", "--guard-stall-after", "3", "--guard-on-stall", "kill",
               "--guard-fail-on", "stall,denied", "--guard-report", "hung.json", timeout=90)
    assert proc.returncode == 124, proc.stderr
    assert time.monotonic() - started < 60
    report = json.loads((offline_env.cwd / "hung.json").read_text())
    assert report["exit_code"] == 124 and report["child_exit_code"] not in (0, None) and report["fail_on"] == []
    assert report["counts"]["stalls"] == 1 and [s["action"] for s in report["stalls"]] == ["kill"]
