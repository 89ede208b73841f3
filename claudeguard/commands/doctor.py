"""``claudeguardctl doctor [--verify [--json]]``: find the real CLI and its version, prove that the
flags the guard injects are accepted by it (a real offline run against the embedded scripted
model: the MCP prompt server connects and the hooks fire), check the runtime dir's ownership and
mode, and say whether the installed CLI passed ``doctor --verify`` on this machine (and which
versions did), and which protections of the sandbox hold on this machine and what stays open
(``sandbox``). ``--verify`` runs that proof (``commands/verify.py``) and records its result."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from claudeguard.commands import verify as verifying
from claudeguard.commands.cli import parser as command_parser
from claudeguard.commands.homes import other_homes, other_installs
from claudeguard.config.load import env_overrides, load_config
from claudeguard.config.trust import command_for
from claudeguard.errors import GuardError, InsecurePathError
from claudeguard.files import write_atomic
from claudeguard.paths import check_private_dir, guard_paths, legacy_note, runtime_dir
from claudeguard.plan import sandbox as box
from claudeguard.plan.box_enter import RAN_SUFFIX, find_compiler, program_path
from claudeguard.plan import settings_sources as ss
from claudeguard.plan import verified
from claudeguard.plan.argv import build_plan, cli_sandbox_sources
from claudeguard.plan.claude_args import parse_claude_args, table_for, table_note
from claudeguard.plan.discovery import find_claude
from claudeguard.plan.repo_code import treat
from claudeguard.plan.session import session_snapshot
from claudeguard.procs import ask_version, capture
from claudeguard.testing.model_server import ModelServer
from claudeguard.testing.offline_home import offline_env, prepare_home

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.config.load import Config
    from claudeguard.paths import GuardPaths

TESTED_VERSIONS = ("2.1.197", "2.1.330")
PROBE = "claudeguard-doctor-probe"


def _say(ok: bool, what: str) -> bool:
    print(f"{'ok  ' if ok else 'FAIL'}  {what}")
    return ok


def _warn(what: str) -> None:
    """Something that holds the guard back without stopping it (doctor's exit code stays 0)."""
    print(f"warn  {what}")


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
        for line in str(exc).splitlines():  # a file's mistakes all at once, file:line each
            _say(False, f"config: {line}")
        return 1
    good &= settings_sources(cfg)
    good &= trust(cfg)
    dirs_ok, insecure = private_dirs(cfg)
    good &= dirs_ok
    if not insecure:
        note = legacy_note()
        if note:
            print(f"      {note}")
        for line in other_homes(str(runtime_dir())) + other_installs():
            print(f"note  {line}")
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
    # Each check below on its own: one that fails (a dir not private, say) is said, and the
    # others are still reported; the exit code says that one failed.
    good &= _step("verified", insecure, lambda: verified_line(cfg, real))
    _launcher()
    good &= _step("sandbox", insecure, lambda: sandbox(cfg, version))
    good &= _step("fleet", insecure, lambda: fleet(cfg))
    good &= _step("injected flags", insecure, lambda: probe(real, cfg, version))
    return 0 if good else 1


def _step(name: str, insecure: list[str], check: Callable[[], bool]) -> bool:
    """``check()``, or one line when it raised: a FAIL, or a skip where it needs a dir that
    ``private_dirs`` found others could enter (said there, with its chmod)."""
    try:
        return check()
    except InsecurePathError as exc:
        blocked = next((path for path in insecure if str(exc).startswith(path) or f" {path}:" in str(exc)), None)
        if blocked is None:
            return _say(False, f"{name}: {exc}")
        print(f"skip  {name}: not checked while {blocked} is not private (above)")
        return False
    except GuardError as exc:
        return _say(False, f"{name}: {exc}")


def private_dirs(cfg: Config) -> tuple[bool, list[str]]:
    """The guard's private dirs (the runtime dir, the state dir, the log dir): each owned by you
    with no group or other access. A wrong mode is said with the exact ``chmod`` that fixes it;
    every dir is reported, and the checks after it go on (those that need a dir not private are
    skipped, ``_step``). Returns (all fine, the dirs that are not private)."""
    paths = guard_paths(cfg=cfg)
    ok, insecure = True, []
    for what, path in (("runtime dir", paths.runtime), ("state dir", paths.state_dir), ("log dir", paths.log_dir)):
        try:
            if what == "runtime dir":
                runtime_dir()  # made 0700 when missing, and its parents' safety checked
            elif not os.path.lexists(path):
                print(f"      {what}: {path} (made 0700 at first use)")
                continue
            check_private_dir(path)
        except InsecurePathError as exc:
            ok = _say(False, f"{what}: {str(exc).removeprefix('runtime dir ')}{_fix(path)}")
            insecure.append(path)
            continue
        _say(True, f"{what}: {path} (mode 0700, owned by uid {os.getuid()})")
    return ok, insecure


def _fix(path: str) -> str:
    """``; fix: chmod 700 PATH`` for a dir of ours whose mode lets others in; nothing for one a
    chmod does not fix (another owner, a symlink)."""
    try:
        st = os.lstat(path)
    except OSError:
        return ""
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
        return f"; fix: chmod 700 {shlex.quote(path)}"
    return ""


def fleet(cfg: Config) -> bool:
    """The fleet, when the config names one: its settings (one line per mistake, file:line), its
    credential readable (a 0600 file of ours, or the variable set; the desk's approver's too,
    with a warning when sessions may run unboxed), Redis answering, and a warning for redis://
    to a host that is not loopback (requests can hold secrets)."""
    if not cfg.fleet_configured():
        return True
    try:
        from claudeguard.fleet.client import FleetClient  # noqa: PLC0415 - the optional extra, only with a fleet
        from claudeguard.fleet.config import from_config, url_warning  # noqa: PLC0415 - as above
        from claudeguard.fleet.conn import FAILURES, describe_failure  # noqa: PLC0415 - as above

        found = from_config(cfg)
        assert found is not None
        found.password()  # the file's mode and owner, or the variable: one line when wrong
    except GuardError as exc:
        return _say(False, f"fleet: {exc}")
    if found.approver is not None:
        try:
            found.approver.password()  # the desk's approver: its file or variable, as the member's
        except GuardError as exc:
            return _say(False, f"fleet: {exc}")
        if cfg.security()["sandbox"] != "require":
            _warn(f"fleet: fleet.approver ({found.approver.acl_user}) lets this machine's desk answer any machine's "
                  "requests, this one's included: keep its sessions boxed ([security] sandbox = \"require\"), or a "
                  "command run unboxed reads what you can read, its password file included")
    warning = url_warning(found)
    if warning:
        _warn(f"fleet: {warning}")
    if cfg.sandbox()["network"] == "host":
        print(f"      fleet: the box's network is the host's: a boxed command can reach {found.host}:{found.port}; "
              "only credentials it never sees (stripped from its environment, their file hidden) keep it out")
    client = FleetClient(found)
    try:
        client.conn.ping()
    except FAILURES as exc:  # not on any call's way: sessions run, answered locally
        _warn(f"fleet: {found.describe()}: {describe_failure(exc)} (local answers work; requests are published "
              "when it answers)")
        return True
    finally:
        client.close()
    return _say(True, f"fleet: {found.describe()}")


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
approval channel's root: CLAUDEGUARD_RUNTIME_DIR, else /tmp/claudeguard-<uid> (-<key> for a HOME
other than yours: see README); another home's guard in use beside this one is named in a note.
--verify's result is kept per CLI version and binary SHA-256 in the state dir
($XDG_STATE_HOME/claudeguard/verified-cli.json); a guarded run of a CLI that has not passed it
starts it in the background, and [security] require_verified_cli = true refuses such a CLI."""


def verify_command(*, as_json: bool) -> int:
    """``doctor --verify``: one line per check (or the JSON), exit 0 when every check passed."""
    cfg = load_config(Path.cwd(), env_overrides())
    real = find_claude(cfg.claude_path())
    # Progress on stderr (a line when the runs start, one per check as it ends): stdout keeps
    # the listing (or the JSON) for scripts.
    record = verifying.verify(real, progress=lambda text: print(f"claudeguardctl doctor: {text}", file=sys.stderr,
                                                                flush=True))
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


# What a Bash call the policy allows can do to the guard without the box (issue 24's attacks),
# and what stays open with it.
OPEN_WITHOUT_BOX = (
    "read the runtime dir (sessions, the settings file with the hook secret, the channel), your config and "
    "the audit log",
    "reach the approval channel and the service's control socket (the waiter's check of who answers is then "
    "the only line against an answer from inside the session)",
    "rewrite your config file and Claude Code's settings files for the next run",
    "read /proc/<pid>/environ of the CLI and of your other processes, and signal or ptrace them",
    "kill the guard service and answer on its hook port (the session then ends as compromised)",
    "write anything your user may write: ~/.bashrc, ~/.claude/settings.json, other projects, .git/hooks",
)
OPEN_WITH_BOX = (
    "the host network: a boxed command reaches the internet and this machine's loopback ports "
    "(the guard's hook port answers only the session's secret)",
    "reading your other files (~/.ssh, ~/.aws, other projects): only the guard's own are hidden",
    "the CLI's own tools (Read, Edit, Write, ...) run in the CLI, outside the box: the guard's "
    "built-in rule covers the guard's files there",
)


def sandbox(cfg: Config, version: str | None) -> bool:
    """The box (plan/sandbox.py) on this machine: does bubblewrap run (probed again, not from the
    cache), what is hidden, the widenings, what the CLI at ``version`` puts in the box, what
    stays open; without the box, which attacks stay possible. False where a session would be
    refused (lockdown or "require" without the box)."""
    chosen = box.mode(cfg)
    where = f"lockdown ({cfg.lockdown.source})" if cfg.lockdown.value else \
        f"security.sandbox = \"{chosen}\" ({cfg.source('security.sandbox')})"
    print("      Claude Code's own sandbox: off in every guarded session (its proxy refuses the guard's hooks); "
          "claudeguard's own box confines Bash instead")
    for at, managed in cli_sandbox_sources(parse_claude_args([]), os.getcwd()):
        if not managed:
            print(f"      {at}: sandbox.enabled: overridden (off) in guarded sessions")
        elif cfg.lockdown.value or not cfg.security()["allow_settings_override"]:
            return _say(False, f"sandbox: {at}: sandbox.enabled from managed settings wins over the guard's: "
                               f"sessions are refused (every call would run unguarded)")
        else:
            _warn(f"sandbox: {at}: sandbox.enabled from managed settings: the guard's hooks are refused by its proxy "
                  f"(let through by security.allow_settings_override)")
    paths = guard_paths(cfg=cfg)
    try:
        box.check_config(cfg, paths)
    except GuardError as exc:
        return _say(False, f"sandbox: {exc}")
    if chosen == "off":
        _warn(f"sandbox: off by {where}: Bash calls run with all of your user's rights")
        _open_without()
        return True
    found = box.availability(cfg, dict(os.environ), paths, cached=False)
    if found.bwrap is None:
        if chosen == "require":
            _say(False, f"sandbox: {where} needs it, and {found.reason}: sessions are refused")
        else:
            _warn(f"sandbox: none here ({found.reason}): sessions run without it ({where})")
        _open_without()
        return chosen != "require"
    ok = _say(True, f"sandbox: bubblewrap {found.bwrap} runs a box here ({where}); every Bash call of a session "
                    f"runs in it, whoever allows it")
    settings = cfg.sandbox()
    hidden = ", ".join(f"{what} {path}" for path, what in box.guard_dirs_and_files(paths))
    print(f"      hidden in the box: {hidden}")
    print("      in the box: a read-only root; the project (its git root), its git dirs and a /tmp of the session's "
          "own writable; .claude/, .git/hooks, .git/config, .mcp.json read-only; its own pid and IPC namespaces; no "
          "capabilities" + ("" if settings["allow_unix_sockets"] else "; no Unix sockets (seccomp)"))
    print(f"      network: {settings['network']}" + (" (no network at all)" if settings["network"] == "none" else ""))
    for entry in settings["allow_write"]:
        there = os.path.exists(os.path.expanduser(entry))
        print(f"      widening: allow_write {entry} ({cfg.source('sandbox.allow_write')})"
              + ("" if there else ": does not exist, not bound"))
    if settings["allow_unix_sockets"]:
        _warn(f"sandbox: allow_unix_sockets ({cfg.source('sandbox.allow_unix_sockets')}): a boxed command reaches "
              f"every Unix socket it can see (docker.sock, your D-Bus session: programs started outside the box)")
    if box.framed_version(version):
        print(f"      CLI {version}: Bash, background Bash and ! commands run in the box; your hooks, MCP stdio "
              f"servers and status line run outside it, as without the guard")
    else:
        print(f"      CLI {version or '(version unknown)'}: not measured ({box.FRAMED_VERSIONS[0]}..."
              f"{box.FRAMED_VERSIONS[1]} are): everything the CLI starts through its shell prefix runs in the box, "
              f"your hooks and MCP stdio servers too")
    for line in OPEN_WITH_BOX:
        print(f"      open with the box: {line}")
    _session_box(paths)
    ok &= _box_runs(cfg, paths)
    return ok


def _session_box(paths: GuardPaths) -> None:
    """Whether a session keeps one box that its calls enter (plan/box_enter.py), or each call
    starts a bwrap of its own (~5 ms more a call): the entry built, buildable, or neither."""
    program = program_path(paths.state_dir, os.environ)
    if os.access(program, os.X_OK):
        way = "from the CLI's shell" if os.path.exists(program + RAN_SUFFIX) else \
            "through the box script until a session has run a call in it"
        print(f"      the session's box: each Bash call enters one box kept for the session, {way} ({program})")
    elif find_compiler(os.environ):
        print("      the session's box: its entry is built at the next session (once per machine); until then each "
              "Bash call starts a box of its own")
    else:
        _warn("sandbox: no C compiler (cc, gcc or clang) to build the session box's entry: each Bash call starts a "
              "bubblewrap box of its own, ~5 ms more a call (install gcc to keep one box a session)")


def _open_without() -> None:
    for line in OPEN_WITHOUT_BOX:
        print(f"      open without the box: a Bash call the policy allows can {line}")


def _box_runs(cfg: Config, paths: GuardPaths) -> bool:
    """Build a session's box for a scratch project and run a command through it as the CLI
    would: bwrap must be its pid 1, and the runtime dir out of its reach."""
    session_dir = runtime_dir("sessions", "doctor-box-" + secrets.token_hex(6))
    work = Path(tempfile.mkdtemp(prefix="claudeguard-doctor-box-"))
    try:
        prepared = box.prepare(cfg, dict(os.environ), str(work), str(session_dir), session_id="doctor",
                               cli_version=None, own=[])
        if prepared.box is None:
            return _say(False, "sandbox: the box could not be built")
        cwd_file = work / "x-cwd"
        # The marker is quoted apart: the command's own text shows in pid 1's cmdline.
        command = (f"eval 'cat /proc/1/cmdline; echo; ls {paths.runtime} >/dev/null 2>&1 && "
                   f"echo RUNTIME-\"OPEN\"; true' < /dev/null{box.FRAME}{cwd_file}")
        proc = capture([prepared.box["prefix"], command], env=dict(os.environ), cwd=str(work), timeout=30)
        pid1 = proc.stdout.split("\0")[0].strip()
        good = proc.returncode == 0 and pid1.endswith("bwrap") and "RUNTIME-OPEN" not in proc.stdout
        return _say(good, "sandbox: a command run through the box as the CLI runs it: bwrap is its pid 1 and "
                          "the runtime dir is out of reach" if good else
                    f"sandbox: the box did not hold (exit {proc.returncode}: {(proc.stderr or proc.stdout)[:300]})")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _say(False, f"sandbox: the box could not be run: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(session_dir, ignore_errors=True)


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
        refused = f.action in (ss.REFUSE, ss.UNGUARDED) or (f.action in (ss.STRICT, ss.WARN) and lockdown)
        if refused and f.action == ss.UNGUARDED and cfg.security()["allow_unguarded"]:
            verdict = "let through by security.allow_unguarded: only the guard's deny rules hold"
            refused = False
        elif refused and override and f.action != ss.UNGUARDED:
            verdict = "let through by security.allow_settings_override: the guard is not in force"
        elif refused:
            verdict = "claudeguard refuses to start here" + (" (lockdown)" if lockdown else "")
        elif f.action in (ss.STRICT, ss.WARN):
            verdict = "refused under lockdown only"
        elif f.action == ss.OVERRIDDEN:
            verdict = "no effect on this run"
        else:
            verdict = "no effect on the guard"
        ok &= _say(not refused, f"Claude settings: {f.line()}: {verdict}")
    return ok


def trust(cfg: Config) -> bool:
    """The project's files the user has not trusted here: a config whose loosening is ignored,
    repository code that does not run (refused under lockdown: a FAIL)."""
    lockdown = bool(cfg.lockdown.value)
    ok = True
    for path, what in cfg.untrusted:
        print(f"      note: {path}: not trusted, so its loosening is ignored ({'; '.join(what)}); {command_for(path)}")
    for code in treat(parse_claude_args([]), os.getcwd()).untrusted:
        verdict = "refused by lockdown" if lockdown else "not run"
        ok &= _say(not lockdown, f"repository code: {code.path}: {', '.join(code.what)}: {verdict} until trusted "
                                 f"({command_for(code.path)})")
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
            try:
                plan = build_plan(real, args, cfg, session_id=session_id, session_dir=str(session_dir), cwd=str(work),
                                  run={"cli_version": version})
            except InsecurePathError:
                raise  # a dir private_dirs found open: said there with its chmod (_step)
            except GuardError as exc:  # a session would be refused here (lockdown without the sandbox)
                return _say(False, f"injected flags: a session is refused here: {exc}")
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
