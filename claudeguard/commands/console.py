"""``claudeguardctl console``: a live view of approval requests, answered with single keys.

``y`` once, ``a`` this agent type, ``s`` the whole session, ``f`` forever (written to the user
config), ``n`` deny (asks for an optional message), ``j``/``k`` move, ``q`` quit. Works over SSH
(plain ANSI, cbreak mode, restored on exit); several consoles and scripts may answer side by
side: the first answer wins and the others see the request disappear. Without a terminal on
stdin it reads one key (and an optional message) per line, for scripting.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import tty

from claudeguard.channel import Doorbell, list_pending, wait_for_new
from claudeguard.commands.answer import answer_request, fleet_answer
from claudeguard.commands.at_keyboard import AtKeyboard, at_keyboard
from claudeguard.errors import GuardError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.channel.model import Request

KEYS = {"y": ("allow", "once"), "a": ("allow", "agent"), "s": ("allow", "session"), "f": ("allow", "forever"),
        "n": ("deny", "once")}
HELP = "y once · a agent · s session · f forever · n deny · j/k move · q quit"


def _render(requests: list[Any], current: int, note: str, keyboard: list[AtKeyboard] | None = None) -> str:
    lines = ["\x1b[H\x1b[2J" + f"claudeguard console — {len(requests)} pending   ({HELP})", ""]
    if not requests:
        lines.append("  waiting for requests ...")
    for index, req in enumerate(requests):
        mark = "▶" if index == current else " "
        agent = req.agent_type or "main"
        short = (req.extra or {}).get("cli_short_id")
        if short:  # a --bg session: the id `claude agents` shows
            agent = f"bg {short} {agent}"
        lines.append(f"{mark} {req.id}  {agent:18.18} {req.summary[:90]}  ({req.age_s:.0f}s, "
                     f"{req.deadline_s:.0f}s left)")
    if keyboard:  # not answerable here until they reach the channel
        lines += ["", f"  at a keyboard ({len(keyboard)}):"]
        lines += [f"    {(d.agent_type or 'main'):18.18} {d.summary[:90]}  (reaches the channel in {d.left_s:.0f}s)"
                  for d in keyboard]
    lines += ["", note]
    return "\r\n".join(lines)


def _answer(req: Request, key: str, message: str | None) -> str:
    decision, scope = KEYS[key]
    try:
        answer_request(req.id, decision, scope=scope, message=message, file=None, by="console", quiet=True)
    except GuardError as exc:
        said = str(exc)
        return said if said.startswith(f"{req.id}:") else f"{req.id}: {said}"  # the id once
    return f"{req.id}: {'approved' if decision == 'allow' else 'denied'} ({scope})"


# New requests wake the console at once through its doorbell; this only bounds how long an
# answer given elsewhere, or a request whose waiter gave up, stays on screen.
REFRESH_S = 1.0
LINE_MODE_WAIT_S = 5.0


class _FleetItem:
    """A fleet request as the console shows and answers it (the attributes of a channel Request
    that the console reads, plus where it waits and the hash of the call shown)."""

    def __init__(self, view: dict[str, Any]) -> None:
        self.id: str = view["id"]
        self.machine: str = view["machine"]
        self.call_sha256: str = view["call_sha256"]
        self.agent_type = view.get("agent_type")
        self.extra = {"cli_short_id": view.get("cli_short_id")}
        self.summary = f"[{self.machine}] {view.get('summary') or ''}"
        self.age_s = float(view.get("age_s") or 0)
        self.deadline_s = float(view.get("deadline_s") or 0)


def _fleet_answer(req: Any, key: str, message: str | None) -> str:
    """A key for a fleet request: answered on its machine through the fleet, for exactly the call
    shown (its call_sha256); ``f`` is refused (it would write that machine's config from afar)."""
    decision, scope = KEYS[key]
    try:
        fleet_answer(req.id, decision, scope=scope, message=message, choice=None, machine=req.machine,
                     shown_sha256=req.call_sha256, quiet=True)
    except GuardError as exc:
        return str(exc)
    return f"{req.id} ({req.machine}): {'approved' if decision == 'allow' else 'denied'} ({scope})"


def main(argv: list[str]) -> int:
    fleet = "--fleet" in argv[1:]
    lister: Callable[[], list[Any]] = list_pending
    answer: Callable[[Any, str, str | None], str] = _answer
    if fleet:
        from claudeguard.commands import fleet_cli  # noqa: PLC0415 - the fleet's imports only for --fleet

        fleet_cli.refuse_inside_session()
        client = fleet_cli.client()

        def lister() -> list[Any]:
            return [_FleetItem(dict(v)) for v in client.requests()]

        answer = _fleet_answer
    if not os.isatty(0):
        return _line_mode(lister, answer, fleet)

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        with Doorbell() as bell:
            return _interact(fd, saved, bell, lister, answer, None if fleet else at_keyboard)
    except KeyboardInterrupt:
        return 0
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        sys.stdout.write("\n")


def _interact(fd: int, saved: list[Any], bell: Doorbell, list_pending: Callable[[], list[Any]],
              answer: Callable[[Any, str, str | None], str],
              keyboard: Callable[[], list[AtKeyboard]] | None = None) -> int:
    out = sys.stdout
    known: set[str] = set()
    current = 0
    note = ""
    while True:
        requests = list_pending()
        ids = {r.id for r in requests}
        if ids - known:
            out.write("\a")  # bell for each new arrival
        known = ids
        current = min(current, max(0, len(requests) - 1))
        out.write(_render(requests, current, note, keyboard() if keyboard is not None else None))
        out.flush()
        ready, _, _ = select.select([fd, bell.fd], [], [], REFRESH_S)
        if bell.fd in ready:
            bell.wait(0)
        if fd not in ready:
            continue
        key = os.read(fd, 1).decode(errors="replace")
        if key == "q":
            return 0
        if key == "j":
            current += 1
        elif key == "k":
            current = max(0, current - 1)
        elif key in KEYS and requests:
            req = requests[current]
            message = None
            if key == "n":
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
                out.write("\r\nmessage for the model (Enter for none): ")
                out.flush()
                message = sys.stdin.readline().strip() or None
                tty.setcbreak(fd)
            note = answer(req, key, message)


def _line_mode(list_pending: Callable[[], list[Any]], answer: Callable[[Any, str, str | None], str],
               fleet: bool = False) -> int:
    """Scripted use: each input line is `KEY [message]`, applied to the oldest pending request
    (waiting up to LINE_MODE_WAIT_S for one to arrive; the fleet's are polled)."""
    for line in sys.stdin:
        key, _, message = line.strip().partition(" ")
        if key == "q":
            return 0
        if key not in KEYS:
            print(f"unknown key {key!r}; {HELP}", file=sys.stderr)
            continue
        requests = list_pending() or (_poll(list_pending, LINE_MODE_WAIT_S) if fleet
                                      else wait_for_new(set(), LINE_MODE_WAIT_S))
        if not requests:
            print("no pending request", file=sys.stderr)
            continue
        print(answer(requests[0], key, message or None), flush=True)
    return 0


def _poll(list_pending: Callable[[], list[Any]], wait_s: float) -> list[Any]:
    """The fleet has no doorbell here: its list, read again every REFRESH_S until ``wait_s``."""
    import time  # noqa: PLC0415 - only for --fleet

    end = time.monotonic() + wait_s
    while True:
        found = list_pending()
        if found or time.monotonic() >= end:
            return found
        time.sleep(min(REFRESH_S, max(0.0, end - time.monotonic())))
