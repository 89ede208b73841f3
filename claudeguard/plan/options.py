"""Split ``--guard-*`` options from the arguments meant for the real CLI.

Guard options may stand anywhere before a ``--``; everything else goes to the CLI in its
original order, byte for byte. An unknown ``--guard-*`` option is a usage error (exit 2)
before anything starts.
"""

from __future__ import annotations

from claudeguard.errors import UsageError

# option -> (takes a value, config key it overrides or a GuardOptions field)
GUARD_OPTIONS: dict[str, tuple[bool, str]] = {
    "--guard-profile": (True, "profile"),
    "--guard-config": (True, "config"),
    "--guard-dry-run": (False, "dry_run"),
    "--guard-stall-after": (True, "watchdog.stall_after"),
    "--guard-on-stall": (True, "watchdog.on_stall"),
    "--guard-approval-timeout": (True, "approval.timeout"),
    "--guard-report": (True, "report"),
    "--guard-fail-on": (True, "fail_on"),
    "--guard-help": (False, "help"),
    "--guard-version": (False, "version"),
}
# What each option means, for --guard-help (and its variable, where it has one).
GUARD_HELP = {
    "--guard-profile": ("NAME", "CLAUDEGUARD_PROFILE", "select [profiles.NAME] from the config"),
    "--guard-config": ("FILE", "CLAUDEGUARD_CONFIG", "one more config file, highest precedence"),
    "--guard-dry-run": ("", "", "print the final argv and environment additions as JSON, start nothing"),
    "--guard-stall-after": ("SECONDS", "CLAUDEGUARD_STALL_AFTER", "the watchdog's threshold for a stalled CLI"),
    "--guard-on-stall": ("warn|interrupt|kill", "CLAUDEGUARD_ON_STALL", "what the watchdog does then"),
    "--guard-approval-timeout": ("SECONDS", "CLAUDEGUARD_APPROVAL_TIMEOUT", "how long a request waits for an answer"),
    "--guard-report": ("FILE", "CLAUDEGUARD_REPORT", "write the end-of-run report (JSON) at exit"),
    "--guard-fail-on": ("LIST", "CLAUDEGUARD_FAIL_ON", "denied,timeout,stall,asked: exit 3 when the CLI exited 0 "
                                                       "but the run had one"),
    "--guard-help": ("", "", "this help (`--help` is the real CLI's)"),
    "--guard-version": ("", "", "claudeguard's version and the real CLI it runs (`--version` is the CLI's)"),
}


class GuardOptions:
    """What the ``--guard-*`` options said (a plain class: dataclasses cost ~10 ms to import on
    the start-up path)."""

    def __init__(self) -> None:
        self.profile: str | None = None
        self.config: str | None = None
        self.dry_run = False
        self.help = False  # --guard-help
        self.version = False  # --guard-version
        self.report: str | None = None  # --guard-report FILE (checked in plan.report)
        self.fail_on: str | None = None  # --guard-fail-on LIST (checked in plan.report)
        self.values: dict[str, str] = {}  # config key -> raw text
        self.given: dict[str, str] = {}  # config key -> option name, for messages
        self.cli: str | None = None  # the real CLI the first argument named (discovery.take_cli)


def split_argv(argv: list[str]) -> tuple[GuardOptions, list[str]]:
    opts = GuardOptions()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if not arg.startswith("--guard-"):
            rest.append(arg)
            i += 1
            continue
        name, eq, inline = arg.partition("=")
        spec = GUARD_OPTIONS.get(name)
        if spec is None:
            known = ", ".join(GUARD_OPTIONS)
            raise UsageError(f"unknown option {name} (guard options: {known})")
        takes_value, target = spec
        if takes_value:
            if eq:
                value = inline
                i += 1
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 2
            else:
                raise UsageError(f"{name} needs a value")
            if target == "profile":
                opts.profile = value
            elif target == "config":
                opts.config = value
            elif target in ("report", "fail_on"):
                setattr(opts, target, value)
            else:
                opts.values[target] = value
                opts.given[target] = name
        else:
            if eq:
                raise UsageError(f"{name} takes no value")
            setattr(opts, target, True)
            i += 1
    return opts, rest
