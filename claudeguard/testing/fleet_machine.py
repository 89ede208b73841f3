"""One simulated machine of a fleet, for the fleet's tests and bench: a process with its own
HOME, ``CLAUDEGUARD_RUNTIME_DIR`` and log dir, which plays the service's part. It posts real
channel requests (``claudeguard.channel.requests.post``), waits on each in a thread of its own,
and tells a ``FleetLink`` what the service will tell it (``request_posted``, ``request_done``,
``heartbeat``); the link applies fleet answers through the channel's answer path
(``service.fleet.checked_apply``, as the service does).

``FleetMachine(root, name, url=..., username=..., password=...)`` starts it (the credential
goes in its environment, never its argv) and reads what it reports, one JSON object per line:
``ready``, ``posted {tag, id, sha}``, ``applied {id, ref, applied, reason, t}`` (each call of
``apply_answer``), ``done {id, decision, scope, by, decided_by, answered_by, t}``, ``answered {id, ok,
message}``, ``status {...}``, ``stopped``. Commands go to its stdin, one JSON object per line:
``post {tag, n, timeout, tool, input, kind, choices}``, ``answer {id, decision, scope, username,
password_file}`` (this machine's human answers a fleet request, as an approver),
``sessions {sessions}``, ``status``, ``stop``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

from claudeguard import channel
from claudeguard.errors import GuardError
from claudeguard.fleet.client import FleetClient
from claudeguard.fleet.config import fleet_settings
from claudeguard.fleet.link import FleetLink
from claudeguard.service.fleet import checked_apply
from claudeguard.fleet.model import done_from_answer, request_view

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable

    from claudeguard.fleet.model import AnsweredBy, AnswerFields, Outcome


class FleetMachine:
    """The test's handle on one machine process."""

    def __init__(self, root: Path, name: str, *, url: str, username: str, password: str | None,
                 prefix: str = "cgtest", heartbeat_s: float = 0.5) -> None:
        self.name = name
        self.root = root / name
        self.env = dict(os.environ)
        for key in ("HOME", "CLAUDEGUARD_RUNTIME_DIR", "CLAUDEGUARD_LOG_DIR"):
            sub = {"HOME": "home", "CLAUDEGUARD_RUNTIME_DIR": "run", "CLAUDEGUARD_LOG_DIR": "log"}[key]
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
            self.env[key] = str(self.root / sub)
        self.env["CLAUDEGUARD_FLEET_URL"] = url
        self.env.pop("CLAUDEGUARD_FLEET_PASSWORD", None)
        if password is not None:
            self.env["CLAUDEGUARD_FLEET_PASSWORD"] = password
        args = [sys.executable, "-m", "claudeguard.testing.fleet_machine", "--machine", name, "--username", username,
                "--prefix", prefix, "--heartbeat", str(heartbeat_s)]
        # Not through procs: a test machine process, talked to through its pipes and stopped by its handle.
        self.proc: subprocess.Popen[str] = subprocess.Popen(
            args, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.root / "stderr", "w"),
            text=True, bufsize=1, start_new_session=True)
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(lambda e: e["ev"] == "ready", 30, "ready")

    @property
    def audit_file(self) -> Path:
        return self.root / "log" / "audit.jsonl"

    @property
    def runtime_dir(self) -> str:
        return self.env["CLAUDEGUARD_RUNTIME_DIR"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"ev": "eof"})
            self._cond.notify_all()

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e["ev"] == kind]

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float, what: str,
                 count: int = 1) -> list[dict[str, Any]]:
        """The first ``count`` events that ``match``, waiting up to ``timeout`` s."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if match(e)]
                if len(found) >= count:
                    return found[:count]
                errors = [e for e in self.events if e["ev"] == "error"]
                if errors:
                    raise AssertionError(f"{self.name}: {errors[0]['error']} (while waiting for {what})")
                if self.events and self.events[-1]["ev"] == "eof":
                    raise AssertionError(f"{self.name}: the machine process ended while waiting for {what} "
                                         f"({self.root / 'stderr'})")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: timed out after {timeout:g} s waiting for {what} "
                                         f"({len(found)} of {count})")
                self._cond.wait(left)

    def post(self, n: int = 1, *, timeout: float = 60, tool: str = "Bash", tool_input: dict[str, Any] | None = None,
             kind: str = "permission", choices: list[str] | None = None, tag: str | None = None) -> list[str]:
        """Post ``n`` requests (inputs made distinct); their ids, once all are published."""
        tag = tag or f"t{len(self.events)}-{time.monotonic_ns()}"
        self.send({"op": "post", "tag": tag, "n": n, "timeout": timeout, "tool": tool,
                   "input": tool_input if tool_input is not None else {"command": f"echo {tag}"}, "kind": kind,
                   "choices": choices})
        events = self.wait_for(lambda e: e["ev"] == "posted" and e["tag"] == tag, 30, f"{n} posted", n)
        return [e["id"] for e in events]

    def done(self, request_id: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(lambda e: e["ev"] == "done" and e["id"] == request_id, timeout, f"{request_id} done")[0]

    def audit(self) -> list[dict[str, Any]]:
        try:
            lines = self.audit_file.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def stop(self) -> None:
        """Ask it to stop (its link takes its keys down); SIGKILL by pid after 10 s."""
        if self.proc.poll() is None:
            try:
                self.send({"op": "stop"})
            except (BrokenPipeError, ValueError):
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._reader.join(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except (BrokenPipeError, ValueError):
                    pass


# -- the machine process ---------------------------------------------------------------------------

_out_lock = threading.Lock()
# Held while an answer from the fleet is applied and its ``applied`` event written: the waiter,
# woken by that answer, takes it before writing ``done``, so a test that has seen a call's
# ``done`` has also seen the ``applied`` of the answer that ended it (no race between the two).
_applying = threading.Lock()


def _emit(event: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(event, default=str) + "\n")
        sys.stdout.flush()


def _wait_one(link: Any, machine: str, tag: str, k: int, command: dict[str, Any]) -> None:
    try:
        _post_and_wait(link, machine, tag, k, command)
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        _emit({"ev": "error", "error": f"{type(exc).__name__}: {exc}"})


def _post_and_wait(link: Any, machine: str, tag: str, k: int, command: dict[str, Any]) -> None:
    tool_input = dict(command["input"])
    if command["n"] > 1:
        tool_input["k"] = k  # each call its own (and so its own call_sha256)
    pending = channel.post(session_id=f"{machine}-session", agent_type=None, agent_id=None, tool=command["tool"],
                           input=tool_input, summary=f"{command['tool']}: {json.dumps(tool_input)[:80]}",
                           cwd=os.environ["HOME"], timeout=float(command["timeout"]),
                           choices=command.get("choices"))  # with choices: a dialog's request
    view = request_view(pending.request, machine)
    link.request_posted(view)
    _emit({"ev": "posted", "tag": tag, "id": pending.request.id, "sha": view["call_sha256"], "t": time.time()})
    started = time.monotonic()
    answer = pending.wait(on_timeout="deny")
    link.request_done(pending.request.id, done_from_answer(answer))
    with _applying:
        pass
    _emit({"ev": "done", "id": pending.request.id, "decision": answer.decision, "scope": answer.scope,
           "by": answer.by, "decided_by": answer.decided_by, "message": answer.message, "choice": answer.choice,
           "answered_by": answer.answered_by,
           "waited_s": time.monotonic() - started, "t": time.time()})


def _answer(args: Any, command: dict[str, Any]) -> None:
    cfg = fleet_settings({"username": command["username"], "password_file": command["password_file"],
                          "machine": args.machine, "prefix": args.prefix})
    assert cfg is not None
    try:
        with FleetClient(cfg) as client:
            verdict = client.answer(command["id"], command["decision"], scope=command.get("scope") or "once")
        _emit({"ev": "answered", "id": command["id"], "ok": True, "message": verdict.get("message")})
    except GuardError as exc:
        _emit({"ev": "answered", "id": command["id"], "ok": False, "message": str(exc)})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fleet_machine")
    parser.add_argument("--machine", required=True)
    parser.add_argument("--username", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--heartbeat", type=float, default=0.5)
    args = parser.parse_args(argv)
    cfg = fleet_settings({"username": args.username, "machine": args.machine, "prefix": args.prefix})
    assert cfg is not None

    def apply(request_id: str, fields: AnswerFields, by: AnsweredBy) -> Outcome:
        with _applying:
            outcome = checked_apply(request_id, fields, by)
            _emit({"ev": "applied", "id": request_id, "ref": by["ref"], "applied": bool(outcome.get("applied")),
                   "reason": outcome.get("reason"), "t": time.time()})
        return outcome

    link = FleetLink(cfg, apply, heartbeat_s=args.heartbeat)
    link.start()
    _emit({"ev": "ready", "pid": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        op = command.get("op")
        if op == "post":
            for k in range(int(command["n"])):
                threading.Thread(target=_wait_one, args=(link, args.machine, command["tag"], k, command),
                                 daemon=True).start()
        elif op == "sessions":
            link.heartbeat(command["sessions"])
        elif op == "answer":  # this machine's human answers a fleet request (as approver: its own ACL user)
            threading.Thread(target=_answer, args=(args, command), daemon=True).start()
        elif op == "status":
            _emit({"ev": "status", **link.status()})
        elif op == "stop":
            break
    link.stop()
    _emit({"ev": "stopped"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
