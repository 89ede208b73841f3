"""``claudeguardctl demo``: the whole flow offline, with no API key.

Starts the embedded scripted model, runs the real CLI under claudeguard (installing the pinned
CLI with npm into the user cache when no ``claude`` is found, and saying so), has a background
subagent ask for a Bash command, shows the request waiting in the approval channel, answers it
(from the terminal when there is one, else automatically after a few seconds; or whoever answers
it first from another shell, the console or the desk: the demo then stops counting and says who
did), and prints what happened and where the audit log is.

The run's request waits in the user's own channel (their ``pending``, console and desk see it),
but the demo's session has a throwaway HOME: it runs its own guard service (a service slot of its
home in the user's runtime dir, claudeguard/home.py), stopped and removed when the demo ends, and
its decisions go to an audit log of its own (``<state dir>/demo``), never into the user's log or
``audit --suggest``.
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

from claudeguard import home
from claudeguard.channel import audit, list_pending
from claudeguard.commands.answer import answer_request
from claudeguard.commands.audit import answerer
from claudeguard.commands.cli import parser as command_parser
from claudeguard.errors import GuardError, NotFoundError
from claudeguard.paths import runtime_dir, state_dir_text
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
DEMO_LOG = "demo"  # the demo's own audit log dir, in the state dir: never your sessions' log
CHECK_EVERY_S = 0.5  # how often the countdown looks whether someone answered elsewhere
ROW_WAIT_S = 30.0  # for the decision row of a request answered elsewhere (its waiter writes it)
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
    log_dir = os.path.join(state_dir_text(), DEMO_LOG)
    proc: subprocess.Popen[str] | None = None
    env: dict[str, str] | None = None
    try:
        work = tmp / "work"
        work.mkdir()
        key = "sk-ant-demo-offline-key-0123456789abcdef"
        prepare_home(tmp / "home", cwd=work, api_key=key)
        with ModelServer(SCENARIO) as server:
            env = offline_env(tmp / "home", server.url, key)
            # The demo uses your real approval channel, so that `claudeguardctl pending`, the
            # console or the desk in another terminal sees the request and may answer it; its
            # decisions go to its own audit log (DEMO_LOG), never into yours or your suggestions.
            # Made (and marked yours) here first: the demo's throwaway home only borrows it.
            env["CLAUDEGUARD_RUNTIME_DIR"] = str(runtime_dir())
            env["CLAUDEGUARD_LOG_DIR"] = os.environ["CLAUDEGUARD_LOG_DIR"] = log_dir
            env["CLAUDEGUARD_CLAUDE"] = claude
            argv = [sys.executable, "-m", "claudeguard", "-p", "DEMO-MAIN: have a background agent write the report",
                    "--permission-mode", "default", "--output-format", "stream-json", "--verbose",
                    "--guard-approval-timeout", "120"]
            _step("Running: claude -p ... (through claudeguard; the model asks for a background subagent)")
            # Not procs.capture: the demo answers the run's request while it runs.
            proc = subprocess.Popen(argv, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            request = _wait_for_request(list_pending, proc, timeout=90)
            decision: str | None
            if isinstance(request, dict):  # answered from elsewhere before this loop saw it wait
                _step("A background subagent's request was answered from elsewhere before the demo showed it:")
                decision = _answered_elsewhere(str(request["request_id"]))
                session = str(request.get("session_id"))
            elif request is None:
                out, err = proc.communicate(timeout=30)
                print(f"the request never reached the channel; claudeguard said: {err.strip()[-400:]}")
                return 1
            else:
                decision = _show_and_answer(request, args.auto_after, args.deny)
                session = request.session_id or ""
            out, err = proc.communicate(timeout=120)
        _step("What happened")
        report_ran = _what_happened(out, proc.returncode, work, session, log_dir)
        ok = proc.returncode == 0 and (report_ran == (decision == "allow"))
        return 0 if ok else 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if env is not None:
            _stop_service(env)
        shutil.rmtree(tmp, ignore_errors=True)


def _show_and_answer(request: Request, auto_after: float, deny: bool) -> str | None:
    """Show the waiting request, answer it (the person at the terminal, or on its own after
    ``auto_after``); the decision that was taken, here or elsewhere."""
    _step("A background subagent is waiting for approval in the channel (claudeguardctl pending):")
    print(f"    id       {request.id}\n    session  {request.session_id}\n    agent    {request.agent_type} "
          f"({request.agent_id})\n"
          f"    tool     {request.tool}\n    summary  {request.summary}\n    deadline "
          f"{request.deadline_s:.0f} s")
    print(f"    answer it here, or from another shell: claudeguardctl approve {request.id} "
          f"(or deny, the console, the desk)")
    decision = _ask(request, auto_after, deny)
    if decision is not None:
        try:
            answer_request(request.id, decision, scope="once",
                           message="not in the demo" if decision == "deny" else None,
                           file=None, by="claudeguardctl demo", quiet=True)
            print(f"    answered: {'approve' if decision == 'allow' else 'deny'} (claudeguardctl "
                  f"{'approve' if decision == 'allow' else 'deny'} {request.id})")
        except NotFoundError:
            decision = None  # answered elsewhere in the same moment: said below
    if decision is None:
        decision = _answered_elsewhere(request.id)
    return decision


def _what_happened(out: str, code: int | None, work: Path, session: str, log_dir: str) -> bool:
    """Say how the run ended, whether the subagent's command ran, and the audit log's decisions;
    whether the command ran."""
    results = [m
               for m in (json.loads(line) for line in out.splitlines() if line.startswith("{"))
               if m.get("type") == "result"]
    report = work / REPORT
    print(f"    claude exited {code}; final answer: {results[-1].get('result') if results else '?'}")
    if report.exists():
        print(f"    the subagent's command ran: {REPORT} says {report.read_text().strip()!r}")
    else:
        print(f"    the subagent's command did not run ({REPORT} was not written)")
    events = [e for e in audit.read_events() if e.get("session_id") == session]
    print(f"    audit log: {audit.audit_path()}, the demo's own ({len(events)} decisions for this session; "
          f"`CLAUDEGUARD_LOG_DIR={log_dir} claudeguardctl audit`): your sessions' log and "
          f"`claudeguardctl audit --suggest` never see it")
    for event in events:
        print(f"      {event.get('decision'):5} by {event.get('decided_by'):7} "
              f"{event.get('agent_type') or 'main':16} {event.get('summary')}")
    return report.exists()


def _stop_service(env: dict[str, str]) -> None:
    """Stop the demo home's own guard service (its slot in your runtime dir) and remove the
    slot: nothing the demo started outlives it, and your own service is never touched."""
    root = env["CLAUDEGUARD_RUNTIME_DIR"]
    slot = home.service_slot(root, env)
    if slot == "service":
        return  # your own home's slot (a demo run with your HOME): your service stays
    # Not through procs.capture: what `service stop` prints is dropped, not kept (the demo says its own).
    subprocess.run([sys.executable, "-m", "claudeguard.commands.ctl", "service", "stop"], env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    shutil.rmtree(os.path.join(root, slot), ignore_errors=True)


def _answered_elsewhere(request_id: str) -> str:
    """Say who answered the request from elsewhere (its decision row in the demo's audit log,
    which its waiter writes once it has taken the answer); the decision, "allow" or "deny"."""
    deadline = time.monotonic() + ROW_WAIT_S
    row: dict[str, object] | None = None
    while row is None and time.monotonic() < deadline:
        row = next((e for e in audit.read_events() if e.get("request_id") == request_id and e.get("decision")), None)
        if row is None:
            time.sleep(0.1)  # the waiter writes the row as it hands the answer to the CLI
    if row is None:
        print(f"    answered elsewhere (claudeguardctl audit --json has no row for {request_id} yet)")
        return "allow"
    decision = "deny" if row.get("decision") == "deny" else "allow"
    word = "approved" if decision == "allow" else "denied"
    who = answerer(row.get("answered_by")).strip() or f"by {row.get('decided_by')}"
    by = row.get("answered_by")
    command = by.get("command") if isinstance(by, dict) else None
    print(f"    answered elsewhere: {word} {who}" + (f": {command}" if command else ""))
    return decision


def _wait_for_request(list_pending: Callable[[], list[Request]], proc: subprocess.Popen[str],
                      timeout: float) -> Request | dict[str, object] | None:
    """The demo's request waiting in the channel; or its decision row in the demo's audit log
    when someone answered it from elsewhere between two of these looks (a script answering at
    once); None when neither came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for req in list_pending():
            if req.tool == "Bash" and "demo-report" in req.summary:
                return req
        row = next((e for e in audit.read_events() if e.get("tool") == "Bash" and e.get("request_id")
                    and e.get("decision") and "demo-report" in str(e.get("summary"))), None)
        if row is not None:
            return dict(row)
        if proc.poll() is not None:
            return None
        time.sleep(0.1)  # the demo's own progress loop; the waiting side uses the FIFO
    return None


def _still_waits(request_id: str) -> bool:
    try:
        return any(r.id == request_id for r in list_pending())
    except GuardError:
        return False


def _ask(request: Request, auto_after: float, deny: bool) -> str | None:
    """The demo's answer, or None when someone answered it elsewhere first (checked twice a
    second while it counts down or waits for the keyboard)."""
    default = "deny" if deny else "allow"
    tty = os.isatty(0)
    if tty:
        print("    approve it? [Y/n] (auto-approves in 60 s) ", end="", flush=True)
        auto_after = 60.0
    else:
        print(f"    no terminal: answering '{'deny' if deny else 'approve'}' automatically in {auto_after:g} s")
    end = time.monotonic() + auto_after
    while True:
        left = end - time.monotonic()
        if left <= 0:
            if tty:
                print()
            return default
        if not _still_waits(request.id):
            if tty:
                print()
            return None
        if tty:
            ready, _, _ = select.select([sys.stdin], [], [], min(left, CHECK_EVERY_S))
            if ready:
                return "deny" if sys.stdin.readline().strip().lower().startswith("n") else "allow"
        else:
            time.sleep(min(left, CHECK_EVERY_S))
