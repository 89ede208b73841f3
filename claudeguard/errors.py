"""Expected failures and the single handler that turns them into clean lines.

Every module raises one of these for bad input; only the entry points (``shim.main``,
``commands.ctl``) catch them, print ``prog: message`` on stderr and exit with the code. A
message is one line per problem: a config file's mistakes come all at once (``ConfigError``,
``path:line: what`` each), every line printed as ``prog: line``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable


class GuardError(Exception):
    """An expected failure: its message is one line for the user."""

    exit_code = 2


class UsageError(GuardError):
    exit_code = 2


class ConfigError(GuardError):
    """A config problem; the message starts with ``path:line:`` where a line is known, and holds
    one line per problem when there are several."""

    exit_code = 2


class NotFoundError(GuardError):
    """Something named by the user does not exist (e.g. an answered or unknown request id)."""

    exit_code = 1


class NotPending(NotFoundError):
    """An answer to a request that waits no more (or never did): ``request_id`` as given (a whole
    id or a prefix) and what the channel knows of its end (``reason``: "answered", "timeout",
    ... or None). ``claudeguardctl approve`` says which from the audit log (commands.answer)."""

    def __init__(self, message: str, request_id: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.reason = reason


class InsecurePathError(GuardError):
    """A runtime path that is not private to this user (owner, mode or planted symlink)."""

    exit_code = 2


def run_main(prog: str, fn: Callable[[], int]) -> int:
    """Run an entry point; expected failures become ``prog: message`` and their exit code."""
    try:
        return fn()
    except GuardError as exc:
        for line in str(exc).splitlines() or [""]:
            print(f"{prog}: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except SystemExit:
        raise
    except BrokenPipeError:
        # The reader of our stdout went away (e.g. `| head`): no traceback, and no second error
        # when the interpreter flushes stdout at exit.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug still gets one line, not a traceback
        import os

        if isinstance(exc, FileNotFoundError) and _cwd_gone():
            # The config, the trust records and the project are all found from the working
            # directory: one removed under us is the user's to fix, said as such.
            print(f"{prog}: the current directory no longer exists (it was removed): run {prog} from one that does",
                  file=sys.stderr)
            return 2
        if os.environ.get("CLAUDEGUARD_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"{prog}: internal error: {type(exc).__name__}: {first} (CLAUDEGUARD_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 70


def _cwd_gone() -> bool:
    import os

    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    return False
