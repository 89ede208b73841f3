"""``claudeguardctl COMMAND ...``: dispatch to ``claudeguard.commands.<command>.main(argv)``."""

from __future__ import annotations

import sys

from claudeguard.errors import UsageError, run_main

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable

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
    "desk": "desk",
    "hook": "hook",
    "mcp-serve": "mcp_serve",
}

USAGE = "usage: claudeguardctl {" + ",".join(COMMANDS) + "} ..."
NO_OPTIONS = ("console", "hook", "mcp-serve")  # their --help is plain text (commands.cli)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_main("claudeguardctl", lambda: dispatch(argv))


def dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        if len(argv) > 1 and argv[0] == "help" and argv[1] in COMMANDS:
            return dispatch([argv[1], "--help"])  # `claudeguardctl help audit`
        from claudeguard.commands.cli import top_help

        print(top_help(list(COMMANDS)), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        from claudeguard import __version__

        print(f"claudeguardctl {__version__}")
        return 0
    name = COMMANDS.get(argv[0])
    if name is None:
        import difflib  # only for a mistyped command: the hook comes through here on every call

        near = difflib.get_close_matches(argv[0], list(COMMANDS), n=1, cutoff=0.6)
        if near:
            raise UsageError(f"unknown command {argv[0]!r}: did you mean {near[0]}? (claudeguardctl --help lists "
                             f"every command)")
        raise UsageError(f"unknown command {argv[0]!r}; {USAGE}")
    if argv[0] in NO_OPTIONS and len(argv) > 1 and ("--help" in argv[1:] or "-h" in argv[1:]):
        from claudeguard.commands.cli import plain_help

        print(plain_help(argv[0]))
        return 0
    # __import__ rather than importlib: the hook comes through here on every tool call.
    qualified = f"claudeguard.commands.{name}"
    __import__(qualified)
    command_main: Callable[[list[str]], int] = sys.modules[qualified].main
    return command_main(argv)


if __name__ == "__main__":
    sys.exit(main())
