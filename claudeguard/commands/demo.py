"""``claudeguardctl demo``: the whole flow offline, with no API key.

Starts the embedded scripted model, runs the real CLI under claudeguard (installing the pinned
CLI with npm into the user cache when no ``claude`` is found, and saying so), has a background
subagent ask for a Bash command, shows the request waiting in the approval channel, answers it
(from the terminal when there is one, else automatically after a few seconds), and prints what
happened and where the audit log is.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from claudeguard.channel import audit, list_pending
from claudeguard.commands.answer import answer_request
from claudeguard.commands.cli import parser as command_parser
from claudeguard.errors import GuardError
from claudeguard.paths import runtime_root
from claudeguard.plan.discovery import find_claude
from claudeguard.procs import ask_version
from claudeguard.testing.cli_install import cli_path, cli_root, install_cli
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable

    from claudeguard.channel.model import Request

DEMO_CLI_VERSION = "2.1.330"
REPORT = "demo-report.txt"
SCENARIO = [
    {"match": "DEMO-MAIN", "turns": [
        {"tool_use": {"name": "Agent", "input": {
            "description": "Write the demo report",
            "prompt": "DEMO-SUBAGENT: write the demo report file",
            "subagent_type": "general-purpose",
            "run_in_background": True,
        }}},
        {"text": "I started a background agent to write the report."},
    ]},
    {"match": "DEMO-SUBAGENT", "turns": [
        {"tool_use": {"name": "Bash", "input": {
            "command": f"echo 'written by a background subagent, approved through claudeguard' > {REPORT}",
            "description": "Write the demo report",
        }}},
        {"text": "The report is written."},
    ]},
]


def _step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _find_cli() -> str:
    try:
        return find_claude(None)
    except GuardError:
        pass

    path = cli_path(DEMO_CLI_VERSION)
    if path is None:
        print(f"No `claude` found: installing Claude Code {DEMO_CLI_VERSION} with npm into {cli_root()} (one time) ...",
              flush=True)
        path = install_cli(DEMO_CLI_VERSION)
    return str(path)


def main(argv: list[str]) -> int:
    parser = command_parser("demo")
    parser.add_argument("--auto-after", type=float, metavar="SECONDS", default=3.0,
                        help="seconds before answering automatically without a terminal")
    parser.add_argument("--deny", action="store_true", help="answer the request with a deny instead")
    args = parser.parse_args(argv[1:])

    claude = _find_cli()

    version = ask_version(claude)
    print(f"claudeguard demo: real Claude Code CLI {claude} ({version}), offline against an embedded scripted model")
    tmp = Path(tempfile.mkdtemp(prefix="claudeguard-demo-"))
    proc: subprocess.Popen[str] | None = None
    try:
        work = tmp / "work"
        work.mkdir()
        key = "sk-ant-demo-offline-key-0123456789abcdef"
        prepare_home(tmp / "home", cwd=work, api_key=key)
        with ModelServer(SCENARIO) as server:
            env = offline_env(tmp / "home", server.url, key)
            # The demo uses your real approval channel and audit log, so `claudeguardctl pending`
            # in another terminal sees the request too.
            env["CLAUDEGUARD_RUNTIME_DIR"] = str(runtime_root())
            env["CLAUDEGUARD_LOG_DIR"] = str(audit.audit_path().parent)
            env["CLAUDEGUARD_CLAUDE"] = claude
            argv = [sys.executable, "-m", "claudeguard", "-p", "DEMO-MAIN: have a background agent write the report",
                    "--permission-mode", "default", "--output-format", "stream-json", "--verbose",
                    "--guard-approval-timeout", "120"]
            _step("Running: claude -p ... (through claudeguard; the model asks for a background subagent)")
            # Not procs.capture: the demo answers the run's request while it runs.
            proc = subprocess.Popen(argv, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            request = _wait_for_request(list_pending, proc, timeout=90)
            if request is None:
                out, err = proc.communicate(timeout=30)
                print(f"the request never reached the channel; claudeguard said: {err.strip()[-400:]}")
                return 1
            _step("A background subagent is waiting for approval in the channel (claudeguardctl pending):")
            print(f"    id       {request.id}\n    session  {request.session_id}\n    agent    {request.agent_type} "
                  f"({request.agent_id})\n"
                  f"    tool     {request.tool}\n    summary  {request.summary}\n    deadline "
                  f"{request.deadline_s:.0f} s")
            decision = _ask(request, args.auto_after, args.deny)

            answer_request(request.id, decision, scope="once",
                           message="not in the demo" if decision == "deny" else None,
                           file=None, by="claudeguardctl demo", quiet=True)
            print(f"    answered: {'approve' if decision == 'allow' else 'deny'} (claudeguardctl "
                  f"{'approve' if decision == 'allow' else 'deny'} {request.id})")
            out, err = proc.communicate(timeout=120)
        _step("What happened")
        results = [m
                   for m in (json.loads(line) for line in out.splitlines() if line.startswith("{"))
                   if m.get("type") == "result"]
        report = work / REPORT
        print(f"    claude exited {proc.returncode}; final answer: {results[-1].get('result') if results else '?'}")
        if report.exists():
            print(f"    the subagent's command ran: {REPORT} says {report.read_text().strip()!r}")
        else:
            print(f"    the subagent's command did not run ({REPORT} was not written)")
        session = request.session_id
        events = [e for e in audit.read_events() if e.get("session_id") == session]
        print(f"    audit log: {audit.audit_path()}  "
              f"({len(events)} decisions for this session; `claudeguardctl audit`)")
        for event in events:
            print(f"      {event.get('decision'):5} by {event.get('decided_by'):7} "
                  f"{event.get('agent_type') or 'main':16} {event.get('summary')}")
        ok = proc.returncode == 0 and (report.exists() == (decision == "allow"))
        return 0 if ok else 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_for_request(list_pending: Callable[[], list[Request]], proc: subprocess.Popen[str],
                      timeout: float) -> Request | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for req in list_pending():
            if req.tool == "Bash" and "demo-report" in req.summary:
                return req
        time.sleep(0.1)  # the demo's own progress loop; the waiting side uses the FIFO
    return None


def _ask(request: Request, auto_after: float, deny: bool) -> str:
    default = "deny" if deny else "allow"
    if not os.isatty(0):
        print(f"    no terminal: answering '{'deny' if deny else 'approve'}' automatically in {auto_after:g} s")
        time.sleep(auto_after)
        return default
    print("    approve it? [Y/n] (auto-approves in 60 s) ", end="", flush=True)
    ready, _, _ = select.select([sys.stdin], [], [], 60)
    if not ready:
        print()
        return default
    return "deny" if sys.stdin.readline().strip().lower().startswith("n") else "allow"
