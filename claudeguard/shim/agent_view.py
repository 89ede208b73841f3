"""``claudeguard agents`` (2.1.330 agent view): every session dispatched from it is guarded for
its whole life, like a ``claudeguard --bg`` session.

Agent view applies its ``--settings`` to every session it dispatches (``claude agents --help``;
recorded in each job's ``respawnFlags``), and those sessions run under Claude Code's daemon with
the daemon's environment, not ours. So the launcher registers one background guard session (the
**view**) with the resident service, writes the guard's settings (HTTP hooks carrying the secret
literally, the policy's CLI rules as settings ``permissions``: agent view takes no
``--allowedTools``) into a 0600 file merged with the caller's ``--settings``, puts
``--settings=<file>`` after the ``agents`` word, runs agent view on the user's terminal, and
hands the view to the service (``attach``), which splits the sessions' hooks per session and
watches each one (``service/agent_view.py``). The launcher exits with agent view's code; the
sessions live on, guarded.

No service (``CLAUDEGUARD_SERVICE=0``, or it cannot be had): one line says the dispatched
sessions are not guarded, and lockdown refuses; nothing is started half-guarded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from claudeguard.errors import UsageError
from claudeguard.files import remove_tree, write_atomic
from claudeguard.paths import log_dir_text, runtime_dir
from claudeguard.plan import verified
from claudeguard.plan.argv import (
    DROPPED, absolute_rule, child_environ, cli_allow_rules, cli_flags, load_settings_value, merge_settings,
    repo_code_argv,
)
from claudeguard.plan.claude_args import command_args
from claudeguard.plan.discovery import RECURSION_VAR, exec_passthrough
from claudeguard.plan.hooks import HttpHooks, ctl_command, guard_settings
from claudeguard.plan.session import session_snapshot
from claudeguard.plan.settings_sources import protected_rules
from claudeguard.service.client import Registration, ServiceError
from claudeguard.procs import process_start
from claudeguard.shim.background import config_dir, end_launch, watch_settings
from claudeguard.shim.session_commands import check_agent_view
from claudeguard.switches import service_on

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.plan.report import EndOptions

SETTINGS = "settings.json"


def opens_agent_view(args: ClaudeArgs) -> bool:
    """``claude agents`` without ``--json``/``--help`` (read as the CLI's table reads them, not as
    another option's value): the TUI that dispatches sessions."""
    return args.subcommand == "agents" and "--json" not in args.command_options and not args.help


def plan(real: str, args: ClaudeArgs, cfg: Config, cwd: str, *, session_id: str,
         http: HttpHooks) -> tuple[list[str], dict[str, Any]]:
    """Agent view's argv (the guard's ``--settings`` placed after ``agents``, the caller's
    ``--settings`` taken out: merged into ours) and the settings to write."""
    index = args.subcommand_index if args.subcommand_index is not None else len(args.argv)
    own = command_args(args)  # agents' own options, as the CLI's table reads them
    # the mode its sessions get allows no more than `default`; the hook allows what the
    # asked-for one would (plan/argv.py, "Fail closed by construction")
    front, tail = cli_flags(own, cfg, cwd)
    ours = guard_settings(cfg, ctl_command(), cwd, http, session_id)
    deny = [absolute_rule(r.rule, r.root, cwd) for r in cfg.rules.get("permissions.deny", [])]
    deny += protected_rules(own, cfg, cwd)
    perms = {k: v for k, v in (("allow", cli_allow_rules(cfg, cwd)), ("deny", deny)) if v}
    if perms:
        ours["permissions"] = perms
    # Untrusted repository code stays off in the sessions it dispatches (plan.repo_code): agent
    # view takes --setting-sources and --plugin-dir for them as a session does.
    front += repo_code_argv(tail, own, ours, cwd)
    caller: dict[str, Any] = {}
    settings_at = [i for i, _ in own.options.get("--settings", [])]
    if settings_at:
        word = tail[settings_at[-1]]
        value = word.partition("=")[2] if "=" in word else (tail[settings_at[-1] + 1]
                                                            if settings_at[-1] + 1 < len(tail) else "")
        caller = load_settings_value(value)
    for i in sorted(settings_at, reverse=True):  # the CLI would keep only the last one
        del tail[i:i + (1 if "=" in tail[i] else 2)]
    tail = [w for w in tail if w != DROPPED]
    # last among its options: the CLI keeps the last --settings, and 2.1.197's early settings
    # loader finds one where commander reads another option's value (plan/argv.py)
    end = tail.index("--") if "--" in tail else len(tail)
    return ([real, *args.argv[:index], "agents", *front, *tail[:end], "<settings>", *tail[end:]],
            merge_settings(caller, ours))


def run_agent_view(real: str, args: ClaudeArgs, cfg: Config, cwd: Path, end: EndOptions | None, *,
                   dry_run: bool = False) -> int:
    if end is not None:
        raise UsageError("--guard-report and --guard-fail-on do not apply to agent view (claude agents): "
                         "its sessions outlive it; run it without them")
    session_id = os.urandom(8).hex()
    if dry_run:
        argv, settings = plan(real, args, cfg, str(cwd), session_id=session_id,
                              http=HttpHooks("PORT", "<secret made at start>", literal=True))
        argv[argv.index("<settings>")] = "--settings=<session dir>/settings.json"
        print(json.dumps({"argv": argv, "env": {}, "guarded": True, "settings": settings}, indent=2))
        return 0
    if not service_on():
        return _unguarded(real, args, cfg, "the guard service is off (CLAUDEGUARD_SERVICE=0)", exec_passthrough,
                          RECURSION_VAR)
    verified.check(cfg, real)  # its sessions run on this CLI: as for a session (plan.session.load_checked)

    # Bad input (an unreadable caller --settings) stops us before the service or a dir is touched.
    plan(real, args, cfg, str(cwd), session_id=session_id, http=HttpHooks("PORT", "-", literal=True))
    session_dir = runtime_dir("sessions", session_id)
    token = os.urandom(24).hex()
    registration: Registration | None = None
    attached = False
    try:
        snapshot = session_snapshot(cfg, command_args(args), session_id=session_id, cwd=str(cwd),
                                    interactive=False)
        snapshot.update({"hooks": "http", "log_dir": log_dir_text(), "kind": "background"})
        write_atomic(session_dir / "session.json", json.dumps(snapshot))
        settings_file = str(session_dir / SETTINGS)
        # "agent_view" is added once agent view runs: a service starting now adopts no half-made view.
        record: dict[str, Any] = {"token": token, "config_dir": config_dir(dict(os.environ)),
                                  "watch": watch_settings(cfg)}
        write_atomic(session_dir / "background.json", json.dumps(record))
        registration = Registration(session_id, str(session_dir), token, kind="background")
        try:
            port = registration.open()
        except (ServiceError, OSError, ValueError) as exc:
            registration = None
            return _unguarded(real, args, cfg, f"the guard service cannot be had ({exc})", exec_passthrough,
                              RECURSION_VAR,
                              cleanup=session_dir)
        argv, settings = plan(real, args, cfg, str(cwd), session_id=session_id,
                              http=HttpHooks(port, token, literal=True))
        write_atomic(Path(settings_file), json.dumps(settings, separators=(",", ":")))
        argv[argv.index("<settings>")] = "--settings=" + settings_file
        # The daemon agent view may start keeps this environment for every session it runs
        # later: nothing of a guard session goes into it (the secret is in the settings file).
        env = {k: v for k, v in child_environ(os.environ, {}, cfg).items() if not k.startswith("CLAUDEGUARD_SESSION")}
        # Not through procs: agent view is the user's TUI on this terminal, waited for here (its exit
        # code is the launcher's).
        proc = subprocess.Popen(argv, env=env)
        record["agent_view"] = {"settings": settings_file, "pid": proc.pid, "start": process_start(proc.pid)}
        record["port"] = port
        write_atomic(session_dir / "background.json", json.dumps(record))
        reply = registration.request({"op": "attach", "session_id": session_id})
        if not reply.get("ok"):
            print(f"claudeguard: the guard service did not take agent view: {reply.get('error')}; stopping it",
                  file=sys.stderr)
            proc.terminate()
            proc.wait()
            return 1
        attached = True
        # This launcher holds the hooks' socket for the view's life, and hands it to the next
        # service if this one dies (the dispatched sessions' hooks name that port).
        registration.keep_linked()
        return _wait(proc)
    finally:
        end_launch(registration, session_id, session_dir, handed_over=attached)


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """Agent view owns the terminal (raw mode: Ctrl-C is a key to it, not a signal). A signal
    sent to this launcher is passed on; the exit code is agent view's (128+N for a signal)."""
    def forward(signum: int, _frame: object) -> None:
        try:
            proc.send_signal(signum)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's own: agent view gets it too
    code = proc.wait()
    return 128 - code if code < 0 else code


def _unguarded(real: str, args: ClaudeArgs, cfg: Config, why: str,
               exec_passthrough: Callable[[list[str], dict[str, str]], None], recursion_var: str,
               cleanup: Path | None = None) -> int:
    """Never pretend: one line before agent view runs unguarded; under lockdown, refused."""
    if cleanup is not None:
        remove_tree(str(cleanup))
    check_agent_view(args, cfg, why)
    exec_passthrough([real, *args.argv], dict(os.environ, **{recursion_var: str(os.getpid())}))
    return 0
