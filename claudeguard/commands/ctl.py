"""``claudeguardctl COMMAND ...``: dispatch to ``claudeguard.commands.<command>.main(argv)``."""

from __future__ import annotations

import sys

from claudeguard.errors import UsageError, run_main

COMMANDS = {
    "pending": "pending",
    "approve": "answer",
    "deny": "answer",
    "console": "console",
    "ps": "ps",
    "explain": "explain",
    "config": "config",
    "audit": "audit",
    "doctor": "doctor",
    "demo": "demo",
    "service": "service",
    "hook": "hook",
    "mcp-serve": "mcp_serve",
}

USAGE = "usage: claudeguardctl {" + ",".join(COMMANDS) + "} ..."


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_main("claudeguardctl", lambda: dispatch(argv))


def dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        print("commands: " + ", ".join(COMMANDS))
        return 0 if argv else 2
    if argv[0] == "--version":
        from claudeguard import __version__

        print(f"claudeguardctl {__version__}")
        return 0
    name = COMMANDS.get(argv[0])
    if name is None:
        raise UsageError(f"unknown command {argv[0]!r}; {USAGE}")
    # __import__ rather than importlib: the hook comes through here on every tool call.
    qualified = f"claudeguard.commands.{name}"
    __import__(qualified)
    return sys.modules[qualified].main(argv)


if __name__ == "__main__":
    sys.exit(main())
