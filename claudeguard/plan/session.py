"""A guarded session's plan before its CLI starts: the config and the checks that must hold
(``load_checked``), and the session file its hooks read (``session_file``, written by
``write_session``). The launcher runs this (``shim/main.py``), or the service's planner for it
(``service/planner.py``): the same code, so the same plan and the same errors.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from claudeguard.errors import UsageError
from claudeguard.plan.argv import load_settings_value, session_modes, split_tool_list
from claudeguard.plan.hooks import print_asker

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.config.load import Config, Overrides
    from claudeguard.config.schema import RuleSpec
    from claudeguard.gate.session import Snapshot
    from claudeguard.plan.claude_args import ClaudeArgs
    from claudeguard.plan.options import GuardOptions
    from collections.abc import Mapping


def claude_allow_rules(args: ClaudeArgs, cwd: str, home: str) -> list[RuleSpec]:
    """Allow rules the CLI itself applies (caller's --allowedTools and Claude settings files):
    the hook treats them as allows, so a subagent is not sent to a human for what the CLI allows."""
    entries: list[RuleSpec] = []
    for rule in split_tool_list(args.values("--allowedTools", "--allowed-tools")):
        entries.append({"rule": rule, "source": "--allowedTools", "root": cwd})
    files = [Path(home) / ".claude" / "settings.json", Path(cwd) / ".claude" / "settings.json",
             Path(cwd) / ".claude" / "settings.local.json"]
    for path in files:
        try:
            data: Any = json.loads(path.read_text())  # a settings file: whatever JSON it holds
            rules = data.get("permissions", {}).get("allow", [])
        except (OSError, ValueError, AttributeError):
            continue
        for rule in rules if isinstance(rules, list) else []:
            if isinstance(rule, str):
                entries.append({"rule": rule, "source": str(path), "root": str(path.parent.parent)})
    for value in args.values("--settings"):
        try:
            settings = load_settings_value(value)
        except UsageError:
            continue
        perms = settings.get("permissions")
        rules = perms.get("allow", []) if isinstance(perms, dict) else []
        for rule in rules if isinstance(rules, list) else []:
            if isinstance(rule, str):
                entries.append({"rule": rule, "source": "--settings", "root": cwd})
    from claudeguard.policy.rules import parse_rule

    valid = []
    for entry in entries:
        try:
            parse_rule(entry["rule"])
        except ValueError:
            continue
        valid.append(entry)
    return valid


def session_snapshot(cfg: Config, args: ClaudeArgs, *, session_id: str, cwd: str, interactive: bool,
                     exec_pid: int | None = None, cli_version: str | None = None) -> Snapshot:
    """What the hook and the MCP server need, so they never re-read the config layers.
    ``cli_version`` as for ``build_plan`` (the two must agree on who asks in -p)."""
    from claudeguard.plan.memory_check import rules_held

    spec = cfg.policy_spec()
    spec["claude_allow"] = claude_allow_rules(args, cwd, os.path.expanduser("~"))
    from claudeguard.plan.settings_sources import protected_spec

    spec["protected"] = protected_spec(args, cwd, cfg=cfg)
    if cfg.lockdown.value:
        spec["lockdown"] = True
    asked, by, given = session_modes(args, cfg, cwd)
    dirs = [cwd] + [os.path.join(cwd, os.path.expanduser(d)) for d in args.values("--add-dir")]
    return {
        "mode": {"asked": asked, "by": by, "cli": given, "dirs": dirs},
        # an asker of the guard's ends the session if no hook of the guard's fired before it (gate/proof.py)
        "proof_of_life": not hooks_knowingly_off(args, os.environ, cfg, cwd),
        "session_id": session_id,
        "pid": exec_pid or os.getpid(),
        "cwd": cwd,
        "policy": spec,
        "approval": cfg.approval(interactive=interactive),
        "forever_file": str(cfg.searched[0][1]),
        "print_mode": args.print_mode,
        # who answers a call the CLI asks about in -p (print_asker): the hook answers
        # PermissionRequest in print mode only when it is "permission-request"
        "asker": print_asker(args, cli_version),
        # the caller's own prompt answers first, then the channel (shim/host_prompt.py, issue 35)
        "host": "stdio" if args.host_answers else None,
        "interactive": interactive,
        # the CLI holds its Read rules on the memory files it reads by itself: else the hook checks
        # the memory files a file tool's call makes it read (policy/memory_imports.py)
        "memory_rules_held": rules_held(cli_version),
    }


def hooks_knowingly_off(args: ClaudeArgs, env: Mapping[str, str], cfg: Config | None = None,
                        cwd: str | None = None) -> bool:
    """A session started in a mode that drops every hook but managed ones (``--bare`` anywhere
    before ``--``, ``CLAUDE_CODE_SIMPLE``, ``--safe-mode``), or whose settings silence them and
    the user let that through (``[security] allow_settings_override``): whether it may run at
    all is plan/settings_sources.py's and lockdown's to say; proof of life does not end it."""
    words = args.argv[:args.argv.index("--")] if "--" in args.argv else args.argv
    if ("--bare" in words or args.has("--safe-mode")
            or any(env.get(v, "") not in ("", "0", "false") for v in ("CLAUDE_CODE_SIMPLE", "CLAUDE_CODE_SAFE_MODE"))):
        return True
    if cfg is not None and cwd is not None and cfg.security()["allow_settings_override"]:
        from claudeguard.plan.settings_sources import check

        return bool(check(args, cfg, cwd, dict(env)))  # the findings the opt-out let through
    return False


def overrides(opts: GuardOptions) -> Overrides:
    """The config's overrides: the environment's, then the ``--guard-*`` options'."""
    from claudeguard.config.load import Sourced, env_overrides, parse_value

    out = env_overrides()
    if opts.profile is not None:
        out.profile = Sourced(opts.profile, "--guard-profile")
    if opts.config is not None:
        out.extra_files.append(Sourced(opts.config, "--guard-config"))
    for key, raw in opts.values.items():
        option = opts.given[key]
        out.values[key] = Sourced(parse_value(key, raw, option), option)
    return out


def load_config(opts: GuardOptions, cwd: str) -> Config:
    """The config of a run in ``cwd`` with the guard options ``opts``."""
    from claudeguard.config.load import load_config as load

    return load(Path(cwd), overrides(opts))


def load_checked(opts: GuardOptions, args: ClaudeArgs, cwd: str) -> tuple[Config, str]:
    """The config and the real CLI, with what must hold before anything starts: Claude Code's
    own settings files must not silence the guard (for anything that runs or dispatches a
    session), a session must not loosen what lockdown forbids, and its CLI must have passed
    `doctor --verify` where that is required (``plan.verified``; before the guard service or a
    session dir exists). Run by the launcher, or by the service's planner for it."""
    from claudeguard.plan.discovery import find_claude

    cfg = load_config(opts, cwd)
    real = find_claude(cfg.claude_path(), configured_source=f"claude.path ({cfg.source('claude.path')})",
                       given=opts.cli)
    from claudeguard.plan.claude_args import UNKNOWN, reread
    from claudeguard.plan.may_run import check_command

    reread(args, real)  # the CLI the config names may be another version: its table reads argv
    if args.kind == UNKNOWN:
        check_command(args, cfg)  # under lockdown an unread word is refused; else a session
    if not args.passthrough or args.subcommand == "agents":  # `claude agents` dispatches sessions
        from claudeguard.plan.settings_sources import enforce

        from claudeguard.plan.repo_code import check as check_repo_code

        check_repo_code(args, cfg, cwd)  # untrusted repository code: refused (lockdown), or said
        enforce(args, cfg, cwd)
        for note in cfg.untrusted_notes():  # a project config's loosening left out until trusted
            print(note, file=sys.stderr)
    if not args.passthrough:
        from claudeguard.plan import memory_check

        memory_check.check(args, cfg, cwd, real)  # a CLI that reads its memory imports whatever its rules say
        from claudeguard.plan.argv import check_lockdown

        check_lockdown(args, cfg)
        from claudeguard.plan import sandbox

        sandbox.check(cfg, os.environ)  # the box's widenings; lockdown refused where the box cannot run
        from claudeguard.plan.argv import check_cli_sandbox

        check_cli_sandbox(args, cfg, cwd)  # managed settings that turn the CLI's own sandbox on
    if not args.passthrough and not opts.dry_run:  # last: every other refusal first; a dry run starts nothing
        from claudeguard.plan.verified import check

        check(cfg, real)  # a CLI `doctor --verify` has not passed: one line, or refused (exit 2)
    return cfg, real


def session_file(cfg: Config, args: ClaudeArgs, *, session_id: str, cwd: str, stdin_tty: bool, exec_pid: int,
                 prepared_by: str = "launcher", cli_version: str | None = None) -> Snapshot:
    """The session's ``session.json`` (what its hooks read) but for ``"hooks"``, which the caller
    sets once it knows who answers them. ``prepared_by``: the launcher, or the service's planner
    (for `ps` and the tests: the plan is the same); ``cli_version``: ``discovery.print_cli_version``, the one
    given to ``build_plan`` too."""
    from claudeguard.paths import log_dir_text

    snapshot = session_snapshot(cfg, args, session_id=session_id, cwd=cwd,
                                interactive=not args.print_mode and stdin_tty, exec_pid=exec_pid,
                                cli_version=cli_version)
    snapshot["pty"] = args.uses_pty  # the hooks leave its dialogs' requests to its router (held)
    snapshot["log_dir"] = log_dir_text()  # the service answers for many launchers' environments
    snapshot["prepared_by"] = prepared_by
    return snapshot


def session_dir_of(session_id: str) -> str:
    """The session's directory, made (0700, checked) in the runtime dir."""
    from claudeguard.paths import runtime_dir

    return str(runtime_dir("sessions", session_id))


class Written:
    """A session file as written: its snapshot and the text on disk (a plain class: the launcher
    writes one before its CLI starts)."""

    __slots__ = ("path", "snapshot", "text")

    def __init__(self, path: str, snapshot: Snapshot) -> None:
        self.path = path
        self.snapshot = snapshot
        self.text = ""

    def write(self, hooks: str) -> None:
        """Write the file with ``"hooks"``: ``http`` (the service answers them) or ``command``."""
        from claudeguard.files import write_atomic

        self.snapshot["hooks"] = hooks
        self.text = json.dumps(self.snapshot)
        write_atomic(self.path, self.text)


def write_session(cfg: Config, args: ClaudeArgs, session_dir: str, *, session_id: str, cwd: str, stdin_tty: bool,
                  exec_pid: int, cli_version: str | None, prepared_by: str = "launcher") -> Written:
    """``session_file`` written into ``session_dir`` with ``"hooks": "http"`` (``Written.write``
    rewrites it when they turn out to be commands)."""
    written = Written(os.path.join(session_dir, "session.json"),
                      session_file(cfg, args, session_id=session_id, cwd=cwd, stdin_tty=stdin_tty, exec_pid=exec_pid,
                                   prepared_by=prepared_by, cli_version=cli_version))
    written.write("http")
    return written
