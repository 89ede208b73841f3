"""``claudeguard``: parse guard options, load the config, find the real CLI, inject, supervise.

The start-up path imports only what the run needs: ``--version``, ``--help`` and sub-commands
such as ``doctor`` or ``mcp`` are exec'd untouched after a config read; only a real session
loads the policy, the channel and the watchdog.
"""

from __future__ import annotations

import os
import sys

from claudeguard import stages
from claudeguard.errors import ConfigError, UsageError, run_main
from claudeguard.switches import guard_disabled, planner_on, service_on

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from contextlib import ExitStack
    from typing import Callable

    from claudeguard.config.load import Config
    from claudeguard.gate.server import GateServer
    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.plan.hooks import HttpHooks
    from claudeguard.plan.keeper import SessionKeeper
    from claudeguard.plan.options import GuardOptions
    from claudeguard.plan.report import EndOptions, Run
    from claudeguard.service.client import Registration
    from claudeguard.shim.activity import Feed
    from claudeguard.shim.planned import Asked, Planned
    from claudeguard.shim.pty_relay import PtySession
    from claudeguard.shim.supervise import Supervisor


def main(argv: list[str] | None = None, first: Asked | None = None) -> int:
    return run_main("claudeguard", lambda: _main(sys.argv[1:] if argv is None else argv, first))


def run(first: Asked | None = None) -> None:
    """The ``claudeguard`` command (``bin/claudeguard``): ``main()``, then out at once. ``first``:
    the planner's request ``bin/claudeguard`` sent before importing this (``planned.ask_first``).

    The interpreter's own teardown (freeing ~170 modules' objects one by one) would only delay
    the caller, by ~10 ms after every session (bench/RESULTS.md); nothing here needs it: the
    session's threads are daemons and stopped by then, every file is written with ``os.write``
    and closed, and no ``atexit`` handler is registered on this path. Only stdout and stderr
    hold buffered text, so they are flushed first (a reader gone from stdout: exit 120, as the
    interpreter itself would do)."""
    stages.mark("imported")
    code = main(first=first)
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        code = code or 120
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    stages.mark("end")
    stages.write()
    os._exit(code if isinstance(code, int) else 1)


def _main(argv: list[str], first: Asked | None = None) -> int:
    """Read argv once (the guard's options, then ``_read_start``), then one route: the guard's
    own --help/--version, a pass-through with no config file (exec'd at once), a session the
    service's planner prepared, else the config read here and a pass-through, a dry run, a --bg
    dispatch or a session."""
    from claudeguard.plan.discovery import check_recursion, take_cli

    # Prepared by the service's warm planner (service/planner.py): the config, the checks, the
    # session file and the CLI's argv, without importing and running all of that here first.
    # A `-p` run asks before its argv is read here (bin/claudeguard's first step, else below),
    # so that the planner prepares on the other core meanwhile (~2.4 ms of the start: the CLI's
    # table, finding the CLI).
    asked = first
    try:
        check_recursion()
        if guard_disabled():
            _drop(asked)
            return _disabled(argv)
        from claudeguard.plan.options import split_argv

        opts, rest = split_argv(argv)
        # `<wrapper> <absolute path of the CLI> <args...>` (VS Code's claudeCode.claudeProcessWrapper,
        # CI actions, the SDKs' cli_path): that CLI, ahead of CLAUDEGUARD_CLAUDE, the config and PATH
        opts.cli, rest = take_cli(rest)
        if opts.help or opts.version:  # the guard's own: `--help` and `--version` stay the CLI's
            from claudeguard.shim.guard_info import guard_help, guard_version

            _drop(asked)
            return guard_help() if opts.help else guard_version(opts.cli, os.getcwd())
        if asked is not None and not _asks_early(opts, rest):
            _drop(asked)  # not a run the planner is asked for this early
            asked = None
        if asked is None:
            asked = _ask_early(argv, opts, rest)
        stages.mark("asked")
        start = _read_start(opts, rest)
        plannable = not start.args.passthrough and _plannable(start.args, start.opts)
        stages.mark("argv")
    except BaseException:
        _drop(asked)
        raise
    if asked is not None and not plannable:
        _drop(asked)  # not a session the planner prepares after all: nothing of it stays
        asked = None
    if _unconfigured_passthrough(start):
        _exec(start.first, start)  # the fast path of `claude --version`, `claude auth status`
    if plannable:
        if asked is None:  # a plannable run that does not name -p asks now
            from claudeguard.shim.planned import send_request

            asked = send_request(argv, start.cwd)
        if asked is not None and not start.args.uses_pty:
            _ready_to_start()  # while the planner prepares: its answer is what the launch waits on
        # None: the planner could not answer, and this process prepares the session below.
        planned = asked.answer() if asked is not None else None
        stages.mark("answered")
        if planned is not None:
            return _run_session(_launch_of(planned), planned.real, start.args, start.cwd, start.end, opts=start.opts)
    from claudeguard.plan.once import one_plan

    session_id = os.urandom(8).hex()  # what secrets.token_hex does, without its ~8 ms of imports
    # The config's checks and the session's plan read each file once, as the planner's do
    # (plan/once.py); the scope ends before anything runs on (a pass-through, the CLI).
    with one_plan():
        cfg, real = _load(start)
        if start.args.passthrough:
            launch = None
        elif start.opts.dry_run:
            return _dry_run(start, cfg, real, session_id)
        elif start.args.has("--bg"):
            from pathlib import Path

            from claudeguard.shim.background import run_background

            return run_background(real, start.args, cfg, Path(start.cwd), session_id, start.end)
        else:
            launch = _own_launch(real, start.args, cfg, start.cwd, session_id)
    if launch is None:
        return _passthrough(start, cfg, real)
    return _run_session(launch, real, start.args, start.cwd, start.end, opts=start.opts)


def _ready_to_start() -> None:
    """What starting the CLI on pipes takes (the supervisor's modules, libc's ``prctl``), made
    while the launcher would otherwise wait for the planner's answer (~2 ms of the start, of
    which this is ~1.5, bench/RESULTS.md). Needed by every route that follows: the planner's
    session and the one this process prepares when the planner gives none."""
    from claudeguard.shim.child import libc_prctl
    from claudeguard.shim.supervise import Supervisor  # noqa: F401 (imported for its start)

    libc_prctl()


class _Start:
    """The launcher's argv, read once: the guard's options, the CLI's argv (``rest``) as the CLI
    found before any config reads it (``args``), that CLI (``first``; None: a config may name
    it), the cwd, the end-of-run options, and the environment a pass-through is exec'd with."""

    __slots__ = ("opts", "rest", "first", "args", "cwd", "end", "exec_env")

    def __init__(self, opts: GuardOptions, rest: list[str], first: str | None, args: ClaudeArgs, cwd: str,
                 end: EndOptions | None, exec_env: dict[str, str]) -> None:
        self.opts, self.rest, self.first, self.args = opts, rest, first, args
        self.cwd, self.end, self.exec_env = cwd, end, exec_env


def _read_start(opts: GuardOptions, rest: list[str]) -> _Start:
    from claudeguard.plan.claude_args import read_args
    from claudeguard.plan.discovery import RECURSION_VAR, find_claude

    first = opts.cli or _cli_without_config(find_claude)
    # argv as the installed CLI reads it (its version's table; load_checked reads it again when
    # the config names another CLI)
    args = read_args(rest, first)
    cwd = os.getcwd()
    end = None
    # Options are checked always; the variables only for a session: `claude --version` passes
    # through without reading them (a pass-through writes no report).
    if opts.report is not None or opts.fail_on is not None or (
            not args.passthrough and (os.environ.get("CLAUDEGUARD_REPORT") or os.environ.get("CLAUDEGUARD_FAIL_ON"))):
        from claudeguard.plan.report import EndOptions

        end = EndOptions.parse(opts, os.environ, cwd)  # a bad value stops us before anything starts
    return _Start(opts, rest, first, args, cwd, end, dict(os.environ, **{RECURSION_VAR: str(os.getpid())}))


def _unconfigured_passthrough(start: _Start) -> bool:
    """A pass-through (not `agents`, which opens agent view, guarded) of a CLI found without a
    config, with no guard option and no config file: no lockdown and no allow_unguarded apply,
    so only what runs unguarded is refused (``check_command``, raising) and it is exec'd."""
    opts = start.opts
    if (not start.args.passthrough or start.args.subcommand == "agents" or start.first is None
            or opts.dry_run or opts.profile or opts.config or opts.values):
        return False
    from claudeguard.config.find import any_config

    if any_config(start.cwd):
        return False
    from claudeguard.plan.may_run import check_command

    check_command(start.args, None)
    return True


def _exec(real: str | None, start: _Start) -> None:
    """Become the CLI with the argv untouched (an exec: never returns; a GuardError if it cannot)."""
    from claudeguard.plan.discovery import exec_passthrough

    assert real is not None
    exec_passthrough([real, *start.rest], start.exec_env)


def _load(start: _Start) -> tuple[Config, str]:
    """The config and the real CLI, checked (``plan.session.load_checked``). A broken config
    stops everything that may run a tool (lockdown or not: fail closed); `--version` and
    `--help` run nothing, so they pass through to the CLI with one line saying why."""
    from claudeguard.plan.session import load_checked

    args = start.args
    try:
        return load_checked(start.opts, args, start.cwd)
    except ConfigError as exc:
        if not (args.prints_only and start.first is not None and not start.opts.dry_run):
            raise
        errors = str(exc).splitlines()
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        asked = "--help" if args.help else "--version"
        print(f"claudeguard: config error: {errors[0]}{more}; {asked} passed through to the real CLI "
              f"(claudeguardctl config show lists every error)", file=sys.stderr, flush=True)
        _exec(start.first, start)
        raise  # not reached: exec_passthrough became the CLI, or raised


def _passthrough(start: _Start, cfg: Config, real: str) -> int:
    """A CLI sub-command or flag that runs no session: lockdown's and the command's checks, then
    agent view (guarded through the service), the plan of a dry run, or the CLI exec'd."""
    from claudeguard.plan.argv import check_lockdown
    from claudeguard.plan.may_run import check_command
    from claudeguard.shim.agent_view import opens_agent_view
    from claudeguard.shim.session_commands import check_subcommand_lockdown

    args = start.args
    check_lockdown(args, cfg)
    check_command(args, cfg)
    check_subcommand_lockdown(args, cfg)
    if opens_agent_view(args):  # its dispatched sessions are guarded through the service
        from pathlib import Path

        from claudeguard.shim.agent_view import run_agent_view

        return run_agent_view(real, args, cfg, Path(start.cwd), start.end, dry_run=start.opts.dry_run)
    if start.opts.dry_run:
        return _print_plan([real, *start.rest], {}, guarded=False)
    _exec(real, start)
    return 0  # not reached: exec_passthrough became the CLI, or raised


def _dry_run(start: _Start, cfg: Config, real: str, session_id: str) -> int:
    """``--guard-dry-run``: the CLI's argv and environment as a session would start it."""
    from claudeguard.plan.argv import build_plan
    from claudeguard.plan.discovery import print_cli_version
    from claudeguard.plan.hooks import HttpHooks

    http = HttpHooks("PORT", "<secret made at start>") if service_on() else None
    plan = build_plan(real, start.args, cfg, session_id=session_id, session_dir=None, cwd=start.cwd, http=http,
                      run={"cli_version": print_cli_version(real, start.args)})
    return _print_plan(plan.argv, plan.env_additions, guarded=True)


def _cli_without_config(find_claude: Callable[..., str]) -> str | None:
    """The real CLI as found before any config is read (``CLAUDEGUARD_CLAUDE``, else PATH), or
    None: a config file may still name it (``claude.path``), and then the argv is read again."""
    from claudeguard.errors import GuardError

    try:
        return find_claude(None, offer=False)
    except GuardError:
        return None


def _ask_early(argv: list[str], opts: GuardOptions, rest: list[str]) -> Asked | None:
    """The planner asked at once, for a run that names `-p` and that nothing known yet keeps
    from the planner (``_plannable``'s checks that need no argv reading); None otherwise (a run
    that turns out to be one the planner prepares asks it then, as before)."""
    if not _asks_early(opts, rest):
        return None
    from claudeguard.shim.planned import send_request

    return send_request(argv, os.getcwd())


def _drop(asked: Asked | None) -> None:
    """A request sent to the planner that this run does not take: its session dir goes."""
    if asked is not None:
        asked.drop()


def _asks_early(opts: GuardOptions, rest: list[str]) -> bool:
    return ("-p" in rest or "--print" in rest) and "--bg" not in rest and _planner_on(opts)


def _plannable(args: ClaudeArgs, opts: GuardOptions) -> bool:
    """A session the planner prepares: the service's hooks, pipes (no pty of ours, whose relay
    wants the config before the CLI starts), not a dry run or a --bg dispatch."""
    return not args.has("--bg") and not args.uses_pty and _planner_on(opts)


def _planner_on(opts: GuardOptions) -> bool:
    """What lets the planner prepare any run at all: the service on, the planner not turned off
    (``switches.planner_on``), not a dry run (printed by this process)."""
    return not opts.dry_run and planner_on()


DROPPED = "\0dropped\0"  # plan.argv.DROPPED: a variable the plan removes from the CLI's environment


def _print_plan(argv: list[str], env: dict[str, str], *, guarded: bool) -> int:
    import json

    shown = {k: (None if v == DROPPED else v) for k, v in env.items()}  # null: removed from the CLI's environment
    print(json.dumps({"argv": argv, "env": shown, "guarded": guarded}, indent=2))
    return 0


def _disabled(argv: list[str]) -> int:
    """CLAUDEGUARD_DISABLE=1: the real CLI with the arguments untouched, unless lockdown forbids."""
    from pathlib import Path

    from claudeguard.config.load import env_overrides, load_config
    from claudeguard.plan.discovery import RECURSION_VAR, exec_passthrough, find_claude, take_cli

    cfg = load_config(Path.cwd(), env_overrides())
    if cfg.lockdown.value:
        raise UsageError(f"CLAUDEGUARD_DISABLE is refused: lockdown ({cfg.lockdown.source})")
    given, argv = take_cli(argv)
    real = find_claude(cfg.claude_path(), given=given)
    exec_passthrough([real, *argv], dict(os.environ, **{RECURSION_VAR: str(os.getpid())}))
    return 0


class _Launch:
    """One session on its way: what the plan step made (its dir, the CLI's argv, the session
    file, who answers its hooks) and what the start step started (a plain class: the start path
    stays without dataclasses)."""

    __slots__ = ("session_id", "session_dir", "argv", "env_add", "snapshot_text", "port_token", "registration", "cfg",
                 "sup", "pty", "child_pid", "run", "monitor", "files", "box_end", "planned", "untrusted", "dropped")

    def __init__(self, session_id: str, cfg: Config | None) -> None:
        self.session_id = session_id
        self.cfg = cfg  # None when the planner prepared the session: read once the CLI started
        self.session_dir = ""
        self.argv: list[str] = []
        self.env_add: dict[str, str] = {}
        self.snapshot_text = ""
        self.files: dict[str, str] = {}  # what the plan wrote into the session dir besides session.json
        self.port_token: tuple[int, str] | None = None  # the service's hooks, when the CLI names its port
        self.registration: Registration | None = None
        self.sup: PtySession | Supervisor | None = None
        self.pty: PtySession | None = None
        self.child_pid = 0
        self.run: Run | None = None  # the run's report: only for a run that started (exit 2 starts nothing)
        self.monitor: Feed | None = None
        self.box_end: Callable[[], None] | None = None  # ends the session's box (its thread joins at the undo)
        self.planned: Planned | None = None  # the planner's plan, when it made one
        # What the plan left out as untrusted (the report's rows) and the settings sources the CLI
        # is not given (the settings watch's): the plan's reading, not read again. None: unknown
        # (an answer without them), read once the CLI runs.
        self.untrusted: list[dict[str, object]] | None = None
        self.dropped: list[str] | None = None


def _run_session(launch: _Launch, real: str, args: ClaudeArgs, cwd: str, end: EndOptions | None, *,
                 opts: GuardOptions) -> int:
    """Start the CLI of a planned session (``_launch_of``, ``_own_launch``) as our child and
    supervise it to the end. What each step set up is undone on the way out, last first: the
    keeper before the session dir goes, the dir last."""
    try:
        _start_child(launch, real, args, cwd)
    except BaseException:
        _abandon(launch)  # nothing else was set up yet
        raise
    # Only now: contextlib and what it imports (collections, functools, ...: 12 modules) would
    # delay the CLI's start. Nothing between the start and here can fail (the supervisor has
    # blocked the signals it forwards).
    import contextlib

    with contextlib.ExitStack() as undo:
        undo.callback(_remove_dir, launch.session_dir)
        if launch.registration is not None:
            undo.callback(launch.registration.close)
        try:
            _start_session(launch, real, args, cwd, end, opts, undo)
            stages.mark("started")
            return _supervise(launch)
        except BaseException as exc:
            if launch.run is not None:
                launch.run.finish(getattr(exc, "exit_code", 1), failed=True)
            raise


def _remove_dir(path: str) -> None:
    from claudeguard.files import remove_tree  # not shutil: its imports were ~3 ms of every session's end

    remove_tree(path)


def _abandon(launch: _Launch) -> None:
    """Undo the plan step of a session whose CLI did not start: its registration, its dir."""
    if launch.registration is not None:
        launch.registration.close()
    if launch.session_dir:
        _remove_dir(launch.session_dir)


def _launch_of(planned: Planned) -> _Launch:
    """The session the service's planner prepared: its dir, session file and the CLI's argv (the
    config is taken from the plan once the CLI has started)."""
    launch = _Launch(planned.session_id, None)
    launch.planned = planned
    launch.session_dir = planned.session_dir
    launch.argv, launch.env_add, launch.snapshot_text = planned.argv, planned.env, planned.snapshot
    launch.files = planned.files
    launch.untrusted, launch.dropped = planned.untrusted, planned.dropped
    launch.port_token = (planned.port, planned.token)
    return launch


def _own_launch(real: str, args: ClaudeArgs, cfg: Config, cwd: str, session_id: str) -> _Launch:
    """The session planned here: its dir, the session file and the CLI's argv (and the session
    registered with the service, when its port is not known before the CLI starts); what it made
    is undone when it fails."""
    launch = _Launch(session_id, cfg)
    try:
        _make_plan(launch, real, args, cwd)
    except BaseException:
        _abandon(launch)
        raise
    return launch


def _make_plan(launch: _Launch, real: str, args: ClaudeArgs, cwd: str) -> None:
    cfg = launch.cfg
    assert cfg is not None
    from claudeguard.plan.argv import build_plan
    from claudeguard.plan.discovery import print_cli_version
    from claudeguard.plan.session import session_dir_of, write_session

    launch.session_dir = session_dir = session_dir_of(launch.session_id)
    version = print_cli_version(real, args)
    written = write_session(cfg, args, session_dir, session_id=launch.session_id, cwd=cwd, stdin_tty=os.isatty(0),
                            exec_pid=os.getpid(), cli_version=version)
    launch.registration, http = _register_with_service(launch.session_id, session_dir, _to_verify(real))
    if http is None:
        written.write("command")
    launch.snapshot_text = written.text
    plan = build_plan(real, args, cfg, session_id=launch.session_id, session_dir=session_dir, cwd=cwd, http=http,
                      run={"cli_version": version,
                           "status_line": bool(written.snapshot.get("pty") and written.snapshot.get("interactive"))})
    launch.argv, launch.env_add, launch.files = plan.argv, plan.env_additions, plan.files
    launch.untrusted, launch.dropped = plan.untrusted, plan.dropped
    launch.port_token = (int(http.port), http.token) if http is not None else None


def _start_child(launch: _Launch, real: str, args: ClaudeArgs, cwd: str) -> None:
    """Start the CLI: on a pty (the TUI), or on pipes."""
    env = dict(os.environ, **launch.env_add)
    # plan.argv.child_environ without its imports: the plan's DROPPED values, and the fleet's
    # credentials under their default names, never reach the CLI.
    env.pop("CLAUDEGUARD_FLEET_PASSWORD", None)
    env.pop("CLAUDEGUARD_FLEET_APPROVER_PASSWORD", None)
    env = {k: v for k, v in env.items() if v != DROPPED}
    sup: PtySession | Supervisor
    if args.uses_pty:
        assert launch.cfg is not None
        from claudeguard.plan.session import hooks_knowingly_off
        from claudeguard.shim.pty_relay import PtySession, relay_settings

        sup = launch.pty = PtySession(launch.argv, env, relay_settings(
            launch.cfg, session_id=launch.session_id, session_dir=launch.session_dir, cwd=cwd, real_cli=real,
            prompt_given=args.prompt is not None,
            proof_of_life=not hooks_knowingly_off(args, os.environ, launch.cfg, cwd)))
    else:
        from claudeguard.shim.supervise import Supervisor

        sup = Supervisor(launch.argv, env, tap_stdout=True, host_input=args.host_answers)
    launch.sup = sup
    launch.child_pid = sup.start()


def _start_session(launch: _Launch, real: str, args: ClaudeArgs, cwd: str, end: EndOptions | None,
                   opts: GuardOptions, undo: ExitStack) -> None:
    """Around the started CLI: the registration of a session whose port was known, the run's
    report, the settings watch, this process's gate server (command hooks), the watchdog's feed
    and the session dir's keeper."""
    session_id, session_dir, child_pid = launch.session_id, launch.session_dir, launch.child_pid
    sup = launch.sup
    assert sup is not None
    from claudeguard.gate.proof import record_cli

    record_cli(session_dir, child_pid)  # the process an asker stops when no hook ever fired (proof of life)
    launch.box_end = _start_session_box(session_dir, launch.env_add, undo)
    if launch.port_token is not None and launch.registration is None:
        launch.registration = _register_started(session_id, session_dir, *launch.port_token, child_pid,
                                                _to_verify(real), launch.planned.version if launch.planned else None)
        undo.callback(launch.registration.close)
    elif launch.registration is not None:
        launch.registration.guard(child_pid)  # only the service answers on the hooks' port
    from claudeguard.plan.report import Run

    launch.run = Run(session_id=session_id, real_cli=real, end=end,
                     non_interactive=args.print_mode or not os.isatty(0))
    if launch.cfg is None:
        launch.cfg = _planned_config(launch.planned, opts, cwd)
    cfg = launch.cfg
    if launch.untrusted is None or launch.dropped is None:  # not in the planner's answer: read once here
        from claudeguard.plan.repo_code import treat, untrusted

        found = treat(args, cwd)
        launch.untrusted, launch.dropped = untrusted(cfg, found), sorted(found.drop)
    launch.run.untrusted = launch.untrusted  # for the report: what the plan left out, and why
    from claudeguard.plan.settings_watch import Watch

    undo.callback(Watch(args, cfg, cwd, child_pid, session_id=session_id,  # a settings file written mid-session
                        session_dir=session_dir, dropped=launch.dropped).start().stop)
    # After start(): the supervisor has blocked the forwarded signals, and the gate's threads
    # must inherit that mask (only its signal thread may take them). A hook that comes before
    # the server listens decides in its own process.
    gate = _start_gate_server(session_dir, session_id) if launch.port_token is None else None
    if gate is not None:
        undo.callback(gate.close)
    launch.monitor = monitor = _start_watchdog(cfg, args, sup, child_pid, session_id, session_dir, cwd, launch.argv,
                                               launch.registration)
    # Stopped before the gate server closes and the directory goes (it would make them again).
    undo.callback(_start_keeper(session_id, session_dir, launch.snapshot_text, gate, launch.files).stop)
    if launch.pty is not None:
        launch.pty.on_output = None  # the screen is not stream-json
        launch.pty.monitor = monitor
    else:
        from claudeguard.shim.supervise import Supervisor

        if isinstance(sup, Supervisor) and sup.cli_in is not None:
            # the host answers the CLI's prompts over stdio: its prompt is the keyboard
            from claudeguard.shim.host_prompt import HostPrompts

            sup.host = HostPrompts(session_dir, sup.cli_in).start()


def _planned_config(planned: Planned | None, opts: GuardOptions, cwd: str) -> Config:
    """The config the planner read and checked for this session (what the watchdog, the
    settings watch and the report read): handed over, not read again while the CLI starts (the
    layers' read, TOML and trust records were ~12 ms of this process's CPU beside the CLI's
    start, bench/RESULTS.md), and the same config the plan was made from. Read again only when
    the planner gave none that reads back (not checked again: the planner did, and said any
    warning; the settings watch takes changes from here on)."""
    if planned is not None and planned.config is not None:
        from claudeguard.config.model import Config

        try:
            return Config.from_wire(planned.config)  # type: ignore[arg-type]  # from_wire checks it
        except ValueError:
            pass
    from claudeguard.plan.session import load_config

    return load_config(opts, cwd)


def _start_session_box(session_dir: str, env_add: dict[str, str], undo: ExitStack) -> Callable[[], None] | None:
    """The session's box (plan/box_enter.py), started by a thread of its own once the session's
    first Bash call is on its way (``OnDemand``), and ended with the session. Until it is live,
    and where it cannot start, every Bash call has a bwrap box of its own. Returns what ends it
    without waiting (once the CLI has exited, so that its end overlaps the rest of the
    session's); the undo waits for it."""
    from claudeguard.plan.box_enter import ARGS_FILE, OnDemand

    if not os.path.exists(os.path.join(session_dir, ARGS_FILE)):
        return None  # no sandbox in this session
    box = OnDemand(session_dir, dict(os.environ, **env_add)).start()
    undo.callback(box.stop)
    return box.end


def _supervise(launch: _Launch) -> int:
    """Relay until the CLI exits; then the watchdog's last status and the run's end (its report,
    ``--guard-fail-on``): the exit code (124 when the watchdog killed a stalled CLI)."""
    sup, monitor, run = launch.sup, launch.monitor, launch.run
    assert sup is not None and run is not None
    code: int | None = None
    try:
        code = sup.relay()
        stages.mark("cli-exit")
        if launch.box_end is not None:
            launch.box_end()  # nothing runs in it once the CLI is gone
        sup.leftovers.stop()
    finally:
        sup.close()
        if monitor is not None:
            monitor.stop(code)
    run.child_exit_code = code
    run.stalls = monitor.stalls if monitor is not None else None
    from claudeguard.gate.proof import ended

    why = ended(launch.session_dir)
    if why is not None:  # an asker found no sign of the guard's hooks and stopped the CLI
        print(why, file=sys.stderr, flush=True)
        return run.finish(code or 1, failed=True)
    return run.finish(124 if monitor is not None and monitor.killed else code)


def _to_verify(real: str) -> str | None:
    """The CLI this launcher asks its service to verify in the background (plan/verified.py)."""
    from claudeguard.plan.verified import wants_verification

    return os.path.realpath(real) if wants_verification() else None


def _register_with_service(session_id: str, session_dir: str,
                           verify: str | None = None) -> tuple[Registration | None, HttpHooks | None]:
    """The HTTP hooks to inject, and the session's registration with the resident service.

    When a live service of this version is known from its record, (None, hooks): the CLI
    starts at once and ``_register_started`` registers while it starts (~5 ms sooner; the
    service holds the session's first requests until then, server.REGISTRATION_WAIT_S). Else
    the service is started if needed and the session registered first: (registration, hooks).
    (None, None) when the service is off (CLAUDEGUARD_SERVICE=0) or cannot be had: then the
    hooks are commands answered by this process's gate server, with the same answers, only
    slower (one line says why under CLAUDEGUARD_DEBUG)."""
    if not service_on():
        return None, None
    from claudeguard.service.files import known_port
    from claudeguard.plan.hooks import HttpHooks

    token = os.urandom(24).hex()  # 192 bits; what secrets.token_hex does, without its imports
    port = known_port()
    if port is not None:
        return None, HttpHooks(port, token)
    from claudeguard.service.client import Registration, ServiceError

    registration = Registration(session_id, session_dir, token, verify=verify)
    try:
        port = registration.open()
    except (ServiceError, OSError, ValueError) as exc:
        if os.environ.get("CLAUDEGUARD_DEBUG"):
            print(f"claudeguard: no guard service ({exc}); hooks run as commands", file=sys.stderr)
        return None, None
    return registration, HttpHooks(port, token)


def _register_started(session_id: str, session_dir: str, port: int, token: str, child_pid: int,
                      verify: str | None = None, version: str | None = None) -> Registration:
    """Register a session whose CLI already runs (see ``_register_with_service``), and check
    from then on that only the service answers on the hooks' port."""
    from claudeguard.service.client import Registration

    registration = Registration(session_id, session_dir, token, verify=verify, version=version)
    registration.guard(child_pid)
    registration.open_started(port)
    return registration


def _start_gate_server(session_dir: str, session_id: str) -> GateServer | None:
    """Serve the session's hook calls from this process (see claudeguard.gate.server); without
    it every hook decides in its own process, which is slower but gives the same answers."""
    if os.environ.get("CLAUDEGUARD_GATE_SERVER") == "0":
        return None
    from claudeguard.gate.server import GateServer

    gate = GateServer(session_dir)
    try:
        gate.start()
    except OSError:
        return None  # not worth a line on the user's screen: hooks decide in their own processes
    return gate


def _start_keeper(session_id: str, session_dir: str, snapshot_text: str, gate: GateServer | None,
                  files: dict[str, str]) -> SessionKeeper:
    """Put the session dir back if the runtime dir is removed under the session (plan/keeper.py):
    ``session.json`` and the other files the plan wrote there (the settings file, mcp.json)."""
    from claudeguard.plan.keeper import SessionKeeper

    def restart_gate(gate: GateServer) -> None:
        gate.close()
        gate.start()

    from claudeguard.plan.sandbox import kept_files, restore_box

    kept = kept_files(session_dir)  # the box goes with the dir: put back with it
    restore = [lambda: restore_box(session_dir, kept)]
    if gate is not None:
        restore.append(lambda: restart_gate(gate))
    return SessionKeeper(session_id, session_dir, {**files, "session.json": snapshot_text}, restore).start()


def _start_watchdog(cfg: Config, args: ClaudeArgs, sup: PtySession | Supervisor, child_pid: int, session_id: str,
                    session_dir: str, cwd: str, argv: list[str], registration: Registration | None) -> Feed:
    """The watchdog's feed (shim/activity.py): the service samples and judges a registered
    session; without one, a monitor in this process does."""
    from claudeguard.shim.activity import Feed

    # A session on pipes says each request that waits for a human on stderr; a pty's screen is
    # the CLI's (unless stderr goes elsewhere), and its status line says what waits.
    feed = Feed(child_pid=child_pid, session_id=session_id, session_dir=session_dir, cfg=cfg, args=args, cwd=cwd,
                argv=argv, registration=registration, say_waiting=not args.uses_pty or not os.isatty(2))
    sup.on_output = feed.feed_stdout
    return feed.start()
