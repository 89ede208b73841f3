"""What may run: the one line that refuses a command line the guard read (``refusal``: an
unknown word or option under lockdown, a misread, a command that runs tools no hook reaches,
repository code, writes later sessions honour), and the check the launcher and the planner make
before anything starts (``check_command``). ``plan.claude_args`` reads the command line.
"""

from __future__ import annotations

from claudeguard.plan.claude_args import LOCKDOWN_REFUSES, MISREAD, UNGUARDED, UNKNOWN

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.config.load import Config
    from claudeguard.plan.claude_args import ClaudeArgs


def refusal(args: ClaudeArgs, lockdown: str | None, allow_unguarded: bool) -> str | None:
    """The one line that refuses this run, or None. ``lockdown``: where lockdown was set (None:
    off); ``allow_unguarded``: ``[security] allow_unguarded`` (never under lockdown)."""
    what = f"claude {args.command_line()}" if args.command else "this command line"
    if args.kind == UNKNOWN:
        if lockdown:
            return (f"{what} is refused: {args.why} (read with its argv table, claudeguard/cli_tables): "
                    f"lockdown ({lockdown})")
        if args.why_unguarded and not allow_unguarded:
            return (f"{what} is refused: {args.why}, and `{args.why_unguarded}`; set [security] "
                    f"allow_unguarded = true to run it unguarded")
        return None
    if args.kind == MISREAD:
        return f"{what} is refused: {args.why}"
    if args.kind == UNGUARDED:
        if lockdown:
            return f"{what} is refused: it {args.why}: lockdown ({lockdown})"
        if not allow_unguarded:
            return f"{what} is refused: it {args.why}; set [security] allow_unguarded = true to run it unguarded"
        return None
    if args.kind in LOCKDOWN_REFUSES and lockdown:
        return f"{what} is refused: it {args.why}: lockdown ({lockdown})"
    return None


def check_command(args: ClaudeArgs, cfg: Config | None) -> None:
    """Refuse (UsageError, exit 2, before anything starts) what ``refusal`` names; say in one
    line on stderr that a run let through by ``allow_unguarded`` is not guarded. ``cfg`` None:
    no config file exists (no lockdown, no allow_unguarded)."""
    lockdown = cfg.lockdown.source if cfg is not None and cfg.lockdown.value else None
    allow = bool(cfg is not None and cfg.security().get("allow_unguarded"))
    line = refusal(args, lockdown, allow)
    if line is not None:
        from claudeguard.errors import UsageError

        raise UsageError(line)
    if args.kind == UNGUARDED or (args.kind == UNKNOWN and args.why_unguarded):
        import sys

        print(f"claudeguard: claude {args.command_line()} runs unguarded: it {args.why} "
              f"([security] allow_unguarded)", file=sys.stderr, flush=True)
