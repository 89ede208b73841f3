"""``[approval].notify``: run a command for each new request (desktop notification, webhook).

The command runs detached in its own session with no stdin/stdout/stderr, so it can neither
read the caller's terminal nor hold the hook's output pipe open; a daemon thread reaps it.
Failure to start it, or a non-zero exit seen while we are still running, goes to the audit log
as ``{"event": "notify-failed"}``. Nothing here ever raises into the waiting call.
"""

from __future__ import annotations

import os
import threading

# not through the package: channel/__init__.py re-exports requests, which imports this module
from claudeguard.channel.audit import record as audit_record
from claudeguard.procs import fill, spawn_detached

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.channel.model import Request


def substitute(argv: list[str], request: Request) -> list[str]:
    """Replace the placeholders in each argument (one pass: other braces stay as they are)."""
    values = {
        "{summary}": request.summary,
        "{id}": request.id,
        "{tool}": request.tool,
        "{session}": request.session_id,
        "{agent}": request.agent_type or "main",
    }

    return fill(argv, values)


def run_notify(argv: list[str] | None, request: Request) -> int | None:
    """Start the notify command; its pid, or None when there is none or it could not start."""
    if not argv:
        return None
    try:
        # The caller may be the session's supervisor, whose threads block SIGINT/SIGTERM & co.
        # for its signal thread: spawn_detached starts the command with none of them blocked.
        pid = spawn_detached(substitute([str(a) for a in argv], request))
    except Exception as exc:  # noqa: BLE001 - a notify failure is logged, never fatal
        _failed(argv, request, f"cannot start: {exc}")
        return None
    threading.Thread(target=_reap, args=(pid, argv, request), daemon=True, name="claudeguard-notify").start()
    return pid


def _reap(pid: int, argv: list[str], request: Request) -> None:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        _failed(argv, request, f"exited with status {code}")


def _failed(argv: list[str], request: Request, error: str) -> None:
    audit_record({
        "event": "notify-failed",
        "session_id": request.session_id,
        "agent_type": request.agent_type,
        "agent_id": request.agent_id,
        "tool": request.tool,
        "summary": request.summary,
        "request_id": request.id,
        "command": [str(a) for a in argv],
        "error": error,
    })
