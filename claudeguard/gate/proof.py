"""Proof of life: whether the guard's hooks are live in the session the launcher started, and the
end of a session that shows no sign of them.

The sign: the session's first hook event reached the guard (the service checked the session's
secret, or the command hook found its session), which ``session.record_event`` leaves as
``events.jsonl`` in the session dir. Every tool call passes the PreToolUse hook before the CLI
asks anyone, so when the CLI hands a call to an asker of the guard's (the prompt tool of a -p
run, the PermissionRequest hook) and no hook event has come yet, the hooks are not in this
session: some route took them out (docs/design.md, "Proof of life"). The asker denies the call
and ends the session: it writes the reason into ``ended`` in the session dir and stops the CLI
(its pid and start time are in ``cli.json``, written by the launcher once the CLI runs); the
launcher prints that one line when the CLI has exited. A call the CLI runs without asking is one
its flags allow, which allow nothing the policy denies or asks about (fail closed by
construction); in a terminal the launcher's dialog router does the same at the first permission
dialog it sees (shim/pty_relay.py). No round trip is added: the check is a ``stat`` on the
asker's path only.

A session started knowingly without hooks (``--bare``, ``CLAUDE_CODE_SIMPLE``, ``--safe-mode``:
what plan/settings_sources.py and lockdown decide about) has ``proof_of_life`` false.
"""

from __future__ import annotations

import os

from claudeguard.files import read_json, write_atomic
from claudeguard.procs import process_start

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import signal

    from claudeguard.gate.session import Session
else:  # the constants without the enum wrappers (`signal` imports enum: ~2 ms beside the CLI's start)
    import _signal as signal

EVENTS = "events.jsonl"  # gate/session.py record_event's file
ENDED = "ended"
CLI = "cli.json"
NO_SIGN = ("claudeguard: no sign of the guard's hooks in this session: the CLI asked about {what} before any hook "
           "of the guard's reached it (a route took them out); denied, and the session is ended")


def hooks_seen(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, EVENTS))


def lifeless(session: Session) -> bool:
    """A guarded session whose hooks never fired (see the module docstring)."""
    return bool(session.dir and session.snapshot.get("proof_of_life") and not hooks_seen(session.dir))


def end_session(directory: str, why: str) -> None:
    """Leave ``why`` for the launcher and stop the CLI, if it is still the process recorded."""
    try:
        write_atomic(os.path.join(directory, ENDED), why)
    except OSError:
        pass
    info = read_json(os.path.join(directory, CLI)) or {}
    pid, start = info.get("pid"), info.get("start")
    if isinstance(pid, int) and pid > 0 and start and process_start(pid) == start:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


def record_cli(directory: str, pid: int) -> None:
    """The launcher, once its CLI runs: which process an asker may stop."""
    write_atomic(os.path.join(directory, CLI), f'{{"pid": {int(pid)}, "start": "{process_start(pid) or ""}"}}')


def ended(directory: str) -> str | None:
    """The line an asker left when it ended the session, or None."""
    try:
        with open(os.path.join(directory, ENDED), encoding="utf-8") as fh:
            return fh.read().strip().splitlines()[0] or None
    except (OSError, IndexError, UnicodeDecodeError):
        return None
