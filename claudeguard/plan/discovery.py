"""Find the real Claude CLI, and never ourselves.

Order: the first argument when it is the absolute path of a Claude Code CLI (``take_cli``: how
VS Code's ``claudeCode.claudeProcessWrapper``, CI actions and the Agent SDKs start a wrapper,
``<wrapper> <CLI> <args...>``), then ``CLAUDEGUARD_CLAUDE``, then config ``claude.path``, then
PATH with every entry that is claudeguard skipped (its launchers, ``bin/claude``, symlinks to
any: recognised by the resolved path, or by a small script that names claudeguard). A recursion
token in the child's environment catches any arrangement that still leads back to us.
"""

from __future__ import annotations

import os
import sys

from claudeguard.errors import GuardError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.plan.claude_args import ClaudeArgs

RECURSION_VAR = "CLAUDEGUARD_EXEC_PID"
INSTALL_HINT = (
    "install Claude Code (npm install -g @anthropic-ai/claude-code) or set CLAUDEGUARD_CLAUDE to the real CLI's path"
)


class NotFound(GuardError):
    exit_code = 2


def _own_paths() -> set[str]:
    own = set()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    for candidate in (sys.argv[0], os.path.join(repo, "bin", "claude")):
        try:
            own.add(os.path.realpath(candidate))
        except OSError:
            pass
    return own


def is_claudeguard(path: str, own: set[str] | None = None) -> bool:
    """True when ``path`` is (a link to) claudeguard rather than the real CLI."""
    real = os.path.realpath(path)
    if real in (own if own is not None else _own_paths()):
        return True
    try:
        with open(real, "rb") as fh:
            head = fh.read(4096)
            # The real CLI is a large native binary (or a node script); our launchers are small
            # scripts that mention the package by name.
            if head.startswith(b"#!"):
                return b"claudeguard" in head
    except OSError:
        return False
    return False


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def take_cli(rest: list[str]) -> tuple[str | None, list[str]]:
    """(the real CLI the first argument names, the arguments after it), or (None, ``rest``): the
    first argument counts when it is an absolute path of an executable that is a Claude Code
    CLI by its package or its own answer (``plan.cli_version``, never by its name) and not
    claudeguard. Any other first word, a path to anything else included, stays the CLI's (a
    prompt, as before)."""
    first = rest[0] if rest else ""
    # A regular executable file first: a prompt such as /dev/stdin is never opened to find out.
    if not first.startswith("/") or not _executable(first) or is_claudeguard(first):
        return None, rest
    from claudeguard.plan.cli_version import is_claude_cli

    return (rest[0], rest[1:]) if is_claude_cli(rest[0]) else (None, rest)


def find_claude(configured: str | None = None, *, configured_source: str = "config claude.path",
                given: str | None = None, offer: bool = True) -> str:
    """The real CLI: ``given`` (``take_cli``'s), else ``CLAUDEGUARD_CLAUDE``, the config's
    ``claude.path``, PATH; NotFound (exit 2) with one line when none is, which offers a Claude
    Code CLI installed where PATH does not reach (``plan.candidates``) with its exact config line
    (``offer`` False: the launcher's first look, before a config file may still name one)."""
    if given:
        return given
    env = os.environ.get("CLAUDEGUARD_CLAUDE")
    for value, where in ((env, "CLAUDEGUARD_CLAUDE"), (configured, configured_source)):
        if not value:
            continue
        path = os.path.expanduser(value)
        if not _executable(path):
            raise NotFound(f"{where}={value}: not an executable file; {INSTALL_HINT}")
        if is_claudeguard(path):
            raise NotFound(f"{where}={value} is claudeguard itself, not the real CLI; {INSTALL_HINT}")
        return path
    own = _own_paths()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory or ".", "claude")
        if _executable(candidate) and not is_claudeguard(candidate, own):
            return candidate
    found = None
    if offer:
        from claudeguard.plan.candidates import offer as offered

        found = offered()
    raise NotFound(f"the real Claude CLI was not found on PATH; {found or INSTALL_HINT}")


def check_recursion() -> None:
    """Refuse to run when our parent (spawn) or our own pid (exec) is a claudeguard that meant
    to start the real CLI: PATH or an alias led it back to claudeguard."""
    token = os.environ.get(RECURSION_VAR)
    if not token:
        return
    try:
        pid = int(token)
    except ValueError:
        return
    if pid in (os.getpid(), os.getppid()):
        raise NotFound(f"claudeguard was started as its own child (PATH leads back to it); {INSTALL_HINT}")


def exec_passthrough(argv: list[str], env: dict[str, str]) -> None:
    """Replace this process with the real CLI (no guard): version, help, sub-commands, disable."""
    try:
        # Not through procs: an exec, no new process (this one becomes the real CLI).
        os.execve(argv[0], argv, env)
    except OSError as exc:
        raise GuardError(f"cannot run {argv[0]}: {exc.strerror}") from None


def cli_version(real_cli: str) -> str | None:
    """The real CLI's version, however it is installed (``plan.cli_version``: its package.json,
    else the binary's own answer, cached by its stat key); None for a program that is not a
    Claude Code CLI (the run report, a GitHub step summary)."""
    from claudeguard.plan.cli_version import cli_version as known

    return known(real_cli)


def print_cli_version(real: str, args: ClaudeArgs) -> str | None:
    """The real CLI's version where it decides who asks (-p, ``hooks.print_asker``); None
    elsewhere (nothing to read)."""
    return cli_version(real) if args.print_mode else None


def version_at_least(version: str | None, floor: tuple[int, ...]) -> bool:
    """``version`` ("2.1.330", "2.1.330-beta.1") is known and not older than ``floor``."""
    if not version:
        return False
    parts: list[int] = []
    for piece in version.split(".")[:len(floor)]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            return False
        parts.append(int(digits))
    return len(parts) == len(floor) and tuple(parts) >= floor
