"""What travels on a request's answer socket: one answer line from the answerer, one reply line
from the waiter.

The answer: ``{"v": 2, "id", "decision", "scope", "message", "choice", "by", "vouched"}``, one
JSON line of at most ``LINE_MAX`` bytes (an over-long message is cut to fit, and says so).
``vouched`` is what an answerer that relays someone else's answer says of them (the desk: its
browser session; the fleet: the member and machine); the waiter records it beside what it saw of
the relaying process itself, never instead of it.

The reply: ``{"ok": true}`` once the waiter took the answer (the call will get it), or ``{"ok":
false, "error": <one line>}``: already answered, expired, not asked yet, refused from inside a
guarded session, a malformed or misrouted answer. An answerer that hears no reply was not told
its answer was taken.
"""

from __future__ import annotations

import json

from claudeguard.channel.model import DECISIONS, SCOPES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, TypedDict

    from claudeguard.decision import Permission, Scope

    class AnswerLine(TypedDict):
        """An answer as the waiter reads it off its socket (checked)."""

        id: str
        decision: Permission
        scope: Scope
        message: str | None
        choice: str | None
        by: str | None
        vouched: dict[str, object] | None

VERSION = 2
LINE_MAX = 16384  # bytes of one answer line, newline included; the waiter reads no more
REPLY_MAX = 4096
BY_MAX = 200
ELLIPSIS = "…"


def encode_answer(rid: str, decision: str, *, scope: str = "once", message: str | None = None,
                  choice: str | None = None, by: str | None = None,
                  vouched: dict[str, object] | None = None) -> bytes:
    """One JSON line of at most LINE_MAX bytes; an over-long message is cut to fit (and says so).
    ValueError when it cannot fit (a ``choice`` or ``vouched`` far too long)."""
    data: dict[str, Any] = {"v": VERSION, "id": rid, "decision": decision, "scope": scope, "message": message,
                            "choice": choice, "by": (by or "")[:BY_MAX] or None, "vouched": vouched}
    line = _line(data)
    if len(line) <= LINE_MAX:
        return line
    text = message or ""
    # The longest prefix of the message that fits, found by bisection on its length in characters
    # (escaping makes bytes per character vary, so measure the encoded line itself).
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        data["message"] = text[:mid] + ELLIPSIS
        if len(_line(data)) <= LINE_MAX:
            low = mid
        else:
            high = mid - 1
    data["message"] = text[:low] + ELLIPSIS
    line = _line(data)
    if len(line) > LINE_MAX:
        raise ValueError("answer too long (its choice or what it vouches for)")
    return line


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def decode_answer(rid: str, line: bytes) -> AnswerLine:
    """The answer ``line`` holds for request ``rid``; ValueError with one line when it is not one
    (unreadable, for another request, no decision): such an answer is refused, and the request
    goes on waiting for a good one."""
    try:
        data = json.loads(line)
    except ValueError:
        raise ValueError("unreadable answer") from None
    if not isinstance(data, dict):
        raise ValueError("unreadable answer")
    if data.get("id") != rid:
        raise ValueError("an answer for another request")
    if data.get("decision") not in DECISIONS:
        raise ValueError("an answer without allow or deny")
    vouched = data.get("vouched")
    return {"id": rid, "decision": data["decision"],
            "scope": data["scope"] if data.get("scope") in SCOPES else "once",
            "message": _str_or_none(data.get("message")), "choice": _str_or_none(data.get("choice")),
            "by": _str_or_none(data.get("by")), "vouched": vouched if isinstance(vouched, dict) else None}


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def encode_reply(error: str | None = None) -> bytes:
    """The waiter's reply: taken (``error`` None), or refused with one line."""
    body: dict[str, object] = {"ok": True} if error is None else {"ok": False, "error": error}
    return _line(body)


def decode_reply(line: bytes) -> str | None:
    """None when the waiter took the answer, else its one-line refusal."""
    try:
        data = json.loads(line)
    except ValueError:
        return "an unreadable reply from the waiting call"
    if not isinstance(data, dict):
        return "an unreadable reply from the waiting call"
    if data.get("ok") is True:
        return None
    error = data.get("error")
    return error.splitlines()[0][:500] if isinstance(error, str) and error else "refused"
