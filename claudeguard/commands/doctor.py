"""``claudeguardctl doctor [--verify [--json]]``: find the real CLI and its version, prove that the
flags the guard injects are accepted by it (a real offline run against the embedded scripted
model: the MCP prompt server connects and the hooks fire), check the runtime dir's ownership and
mode, and say whether the installed CLI passed ``doctor --verify`` on this machine (and which
versions did). ``--verify`` runs that proof (``commands/verify.py``) and records its result."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from claudeguard.commands import verify as verifying
from claudeguard.commands.cli import parser as command_parser
from claudeguard.config.load import env_overrides, load_config
from claudeguard.errors import GuardError
from claudeguard.files import write_atomic
from claudeguard.paths import legacy_note, runtime_dir
from claudeguard.plan import settings_sources as ss
from claudeguard.plan import verified
from claudeguard.plan.argv import build_plan
from claudeguard.plan.claude_args import parse_claude_args, table_for, table_note
from claudeguard.plan.discovery import find_claude
from claudeguard.plan.session import session_snapshot
from claudeguard.procs import ask_version, capture
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.config.load import Config

TESTED_VERSIONS = ("2.1.197", "2.1.330")
PROBE = "claudeguard-doctor-probe"


def _say(ok: bool, what: str) -> bool:
    print(f"{'ok  ' if ok else 'FAIL'}  {what}")
    return ok


def main(argv: list[str]) -> int:
    parser = command_parser("doctor", epilog=EPILOG)
    parser.add_argument("--verify", action="store_true",
                        help="prove the guard on the installed CLI, offline (about 10-20 s): deny rules hold for the "
                             "main agent and subagents, an ask reaches the channel and its answer is obeyed, a "
                             "repository's silencing settings are refused, background sessions are guarded; one line "
                             "per check, exit 1 if one fails; the result is recorded for this CLI version and binary")
    parser.add_argument("--json", action="store_true",
                        help='with --verify: print {"cli_version", "ok", "checks": [{"name", "ok", "detail"}]} instead')
    args = parser.parse_args(argv[1:])
    if args.json and not args.verify:
        parser.error("--json goes with --verify")
    if args.verify:
        return verify_command(as_json=args.json)
    good = True
    try:
        cfg = load_config(Path.cwd(), env_overrides())
        files = [str(p) for _, p, exists in cfg.searched if exists] or ["none (defaults)"]
        good &= _say(True, f"config: {', '.join(files)}; lockdown {'on' if cfg.lockdown.value else 'off'}")
    except GuardError as exc:
        _say(False, f"config: {exc}")
        return 1
    good &= settings_sources(cfg)
    try:
        root = runtime_dir()
        good &= _say(True, f"runtime dir: {root} (mode 0700, owned by uid {os.getuid()})")

        note = legacy_note()
        if note:
            print(f"      {note}")
    except GuardError as exc:
        _say(False, f"runtime dir: {exc}")
        return 1
    try:
        real = find_claude(cfg.claude_path())
    except GuardError as exc:
        _say(False, f"real CLI: {exc}")
        return 1

    try:
        version: str | None = ask_version(real)
        good &= _say(True, f"real CLI: {real} version {version}")
    except GuardError as exc:
        version = None
        good &= _say(False, f"real CLI: {real} version ? ({exc})")
    if version and version not in TESTED_VERSIONS:
        print(f"      note: claudeguard is tested with {', '.join(TESTED_VERSIONS)}; {version} may differ")
    good &= argv_table(version)
    good &= verified_line(cfg, real)
    _launcher()
    good &= probe(real, cfg, version)
    return 0 if good else 1


def argv_table(version: str | None) -> bool:
    """Which checked-in argv table reads this CLI's command line (plan/claude_args.py): its own,
    or, for a version without one, the newest not newer than it (said in a note)."""
    table_version, _ = table_for(version)
    note = table_note(version, table_version)
    if table_version is None:
        return _say(False, f"argv table: none: {note}")
    _say(True, f"argv table: {table_version}" + ("" if note is None else " (another version's)"))
    if note is not None:
        print(f"      note: {note}")
    return True


EPILOG = """\
Prints one line per check (ok / FAIL) and exits 1 if any check failed. The runtime dir is the
approval channel's root: CLAUDEGUARD_RUNTIME_DIR, else /tmp/claudeguard-<uid> (see README).
--verify's result is kept per CLI version and binary SHA-256 in the state dir
($XDG_STATE_HOME/claudeguard/verified-cli.json); a guarded run of a CLI that has not passed it
starts it in the background, and [security] require_verified_cli = true refuses such a CLI."""


def verify_command(*, as_json: bool) -> int:
    """``doctor --verify``: one line per check (or the JSON), exit 0 when every check passed."""
    cfg = load_config(Path.cwd(), env_overrides())
    real = find_claude(cfg.claude_path())
    record = verifying.verify(real, progress=lambda text: print(f"claudeguardctl doctor: {text}", file=sys.stderr))
    assert record is not None  # only a background verification gives way to another
    ok = bool(record.get("ok"))
    checks = record.get("checks", [])
    kept = verified.records().get(record.get("sha256", "")) == record  # not when the binary changed meanwhile
    where = verified.state_path(verified.RECORD_FILE) if kept else None
    if as_json:
        print(json.dumps({"cli_version": record.get("cli_version"), "ok": ok, "checks": checks, "cli": real,
                          "sha256": record.get("sha256"), "duration_s": record.get("duration_s"), "record": where},
                         indent=2))
        return 0 if ok else 1
    for check in checks:
        word = "skip" if check.get("skipped") else ("ok  " if check.get("ok") else "FAIL")
        print(f"{word}  {check.get('name')}: {check.get('detail')}")
    print(f"      Claude Code {record.get('cli_version') or '(version unknown)'} ({real}): "
          f"{'verified' if ok else 'NOT verified'} in {record.get('duration_s')} s; "
          f"{f'recorded in {where}' if where else 'not recorded'}")
    return 0 if ok else 1


def verified_line(cfg: Config, real: str) -> bool:
    """The installed CLI against the verified ones (its hash computed if the cache does not hold
    it); a FAIL only where an unverified CLI is refused (``require_verified_cli``, lockdown)."""
    status = verified.lookup(real, compute=True)
    required = bool(cfg.lockdown.value) or cfg.security()["require_verified_cli"]
    others = sorted({str(r.get("cli_version")) for r in verified.records().values()
                     if r.get("ok") and r.get("sha256") != status.sha256})
    also = f"; also verified here: {', '.join(others)}" if others else ""
    name = f"Claude Code {status.version or '(version unknown)'}"
    if status.state == verified.VERIFIED and status.record is not None:
        return _say(True, f"verified: {name} (sha256 {str(status.sha256)[:12]}) passed doctor --verify at "
                          f"{status.record.get('verified_at')}{also}")
    said = (f"{name} failed doctor --verify ({status.failed_check()})" if status.state == verified.FAILED
            else f"{name} (sha256 {str(status.sha256)[:12]}) has not passed doctor --verify on this machine")
    if required:
        return _say(False, f"not verified: {said}: guarded runs are refused "
                           f"({'lockdown' if cfg.lockdown.value else 'security.require_verified_cli'}); run "
                           f"`claudeguardctl doctor --verify`{also}")
    print(f"note  not verified: {said}; run `claudeguardctl doctor --verify`{also}")
    return True


def settings_sources(cfg: Config) -> bool:
    """Claude Code's own settings sources for this directory and user, and each key in them that
    would silence the guard or loosen the mode (see claudeguard/plan/settings_sources.py)."""
    args = parse_claude_args([])
    srcs = ss.sources(args, os.getcwd(), dict(os.environ))
    shown = [f"{s.name} {s.where} ({'loaded' if s.loaded else s.note})"
             for s in srcs if s.loaded or s.note != "missing"]
    print(f"      Claude settings sources: {'; '.join(shown) or 'none'}")
    lockdown = bool(cfg.lockdown.value)
    override = cfg.security()["allow_settings_override"] and not lockdown
    ok = True
    for f in ss.findings(args, srcs, mode_chosen=ss.mode_chosen(args, cfg)) + ss.env_findings(args, dict(os.environ)):
        refused = f.action == ss.REFUSE or (f.action == ss.STRICT and lockdown)
        if refused and override:
            verdict = "let through by security.allow_settings_override: the guard is not in force"
        elif refused:
            verdict = "claudeguard refuses to start here" + (" (lockdown)" if lockdown else "")
        elif f.action == ss.STRICT:
            verdict = "refused under lockdown only"
        elif f.action == ss.OVERRIDDEN:
            verdict = "no effect on this run"
        else:
            verdict = "no effect on the guard"
        ok &= _say(not refused, f"Claude settings: {f.line()}: {verdict}")
    return ok


def _launcher() -> None:
    """Which `claudeguard` this installation runs (the script of bin/, a plain Python script)."""
    beside = os.path.join(os.path.dirname(sys.executable), "claudeguard")
    path = beside if os.path.isfile(beside) else shutil.which("claudeguard")
    if not path:
        print("      note: no claudeguard command beside this Python or on PATH")
        return
    _say(True, f"launcher: {path}")


def probe(real: str, cfg: Config, version: str | None = None) -> bool:
    """Run the real CLI offline with the injected flags against the embedded model (a -p run,
    injected as a session on ``version`` is: who asks there depends on it)."""
    # Read of a file in the working folder: a tool every version has and runs without asking.
    scenario: list[dict[str, Any]] = [{"match": PROBE,
                                       "turns": [{"tool_use": {"name": "Read", "input": {"file_path": "PROBE_FILE"}}},
                                                 {"text": "probe-ok"}]}]
    session_id = "doctor-" + secrets.token_hex(6)
    session_dir = runtime_dir("sessions", session_id)
    tmp = Path(tempfile.mkdtemp(prefix="claudeguard-doctor-"))
    try:
        work = tmp / "work"
        work.mkdir()
        (work / "probe.txt").write_text("claudeguard doctor\n")
        scenario[0]["turns"][0]["tool_use"]["input"]["file_path"] = str(work / "probe.txt")
        key = "sk-ant-doctor-offline-" + secrets.token_hex(8)
        prepare_home(tmp / "home", cwd=work, api_key=key)
        args = parse_claude_args(["-p", f"{PROBE} run", "--output-format", "stream-json", "--verbose"])
        with ModelServer(scenario) as server:
            plan = build_plan(real, args, cfg, session_id=session_id, session_dir=str(session_dir), cwd=str(work),
                              cli_version=version)
            snapshot = session_snapshot(cfg, args, session_id=session_id, cwd=str(work), interactive=False,
                                        cli_version=version)
            write_atomic(session_dir / "session.json", json.dumps(snapshot))
            env = offline_env(tmp / "home", server.url, key)
            env.update(plan.env_additions)
            # the probe's own runtime and log dirs stay the user's: the hook must find the session
            for var in ("CLAUDEGUARD_RUNTIME_DIR", "CLAUDEGUARD_LOG_DIR", "XDG_RUNTIME_DIR"):
                if var in os.environ:
                    env[var] = os.environ[var]
                else:
                    env.pop(var, None)
            env["CLAUDEGUARD_RUNTIME_DIR"] = str(runtime_dir())
            try:
                proc = capture(plan.argv, env=env, cwd=str(work), timeout=90)
            except subprocess.TimeoutExpired:
                return _say(False, "injected flags: the probe run did not finish within 90 s")
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        init: dict[str, Any] = next((m for m in lines if m.get("type") == "system" and m.get("subtype") == "init"), {})
        result: dict[str, Any] = next((m for m in reversed(lines) if m.get("type") == "result"), {})
        ok = _say(proc.returncode == 0 and result.get("result") == "probe-ok",
                  f"injected flags accepted (exit "
                  f"{proc.returncode}{'' if proc.returncode == 0 else ': ' + proc.stderr.strip()[-120:]})")
        if snapshot.get("asker") == "prompt-tool":
            servers = {s.get("name"): s.get("status") for s in init.get("mcp_servers", [])}
            ok &= _say(servers.get("claudeguard") == "connected",
                       f"permission-prompt MCP server: {servers.get('claudeguard', 'missing')}")
        else:  # 2.1.330 and later: the PermissionRequest hook asks in -p (docs/design.md, "Who asks in -p")
            print(f"      -p asks through: {snapshot.get('asker')} (no MCP prompt server on {version})")
        events = (session_dir / "events.jsonl").read_text() if (session_dir / "events.jsonl").exists() else ""
        fired = '"tool-start"' in events and '"Read"' in events
        ok &= _say(fired, "hooks fire (PreToolUse reached claudeguardctl hook)")
        return ok
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(session_dir, ignore_errors=True)
