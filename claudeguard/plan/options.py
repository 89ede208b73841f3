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
}


class GuardOptions:
    """What the ``--guard-*`` options said (a plain class: dataclasses cost ~10 ms to import on
    the start-up path)."""

    def __init__(self) -> None:
        self.profile: str | None = None
        self.config: str | None = None
        self.dry_run = False
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
            opts.dry_run = True
            i += 1
    return opts, rest
