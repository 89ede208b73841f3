"""The gate's events for the watchdog (``events.jsonl`` in the session dir), typed on both sides.

The gate writes one record per hook event it sees (``gate.session.record_event``); the watchdog
reads them (``watchdog.state.Tracker.guard``), in the launcher's monitor and in the service's.
The record's ``event`` is one of ``GuardEventKind``; ``kind_of`` is the reader's one pure
reading of it (an ``other`` record names its hook event, some of which mean a kind).

Types only at run time: nothing here is imported on a hook's path but the names.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Literal, TypedDict

    GuardEventKind = Literal["tool-start", "tool-end", "approval-wait", "approval-done", "prompt",
                             "subagent-start", "subagent-stop", "notification", "other"]
    # What the reader makes of a record: the kinds above, and ``stop`` (the main agent's turn ended).
    ReadKind = Literal["tool-start", "tool-end", "approval-wait", "approval-done", "prompt",
                       "subagent-start", "subagent-stop", "notification", "other", "stop"]

    class GuardEvent(TypedDict, total=False):
        """One line of ``events.jsonl``."""

        time: float  # the writer's wall clock (the reader converts it to its own)
        event: GuardEventKind
        tool: str | None
        tool_use_id: str | None
        agent_id: str | None
        agent_type: str | None
        transcript: str | None  # tool-start: the agent's transcript, where the call's end shows
        failed: bool  # tool-end: the call failed or was denied
        request_id: str  # approval-wait, approval-done
        hook_event_name: str | None  # other: the hook event it was
        notification_type: str | None  # notification
        message: str | None  # notification

# An ``other`` record's hook event that means a kind of its own.
_OTHER_KINDS: dict[str, ReadKind] = {"Stop": "stop", "UserPromptSubmit": "prompt", "PostToolUseFailure": "tool-end",
                                     "SessionEnd": "stop"}
_KINDS = frozenset({"tool-start", "tool-end", "approval-wait", "approval-done", "prompt", "subagent-start",
                    "subagent-stop", "notification", "other"})


def kind_of(record: GuardEvent) -> ReadKind:
    """What a record of ``events.jsonl`` says happened; ``other`` for what the watchdog does not
    follow (and for a record of another writer's version, whose kind this one does not know)."""
    kind = record.get("event")
    if kind == "other":
        return _OTHER_KINDS.get(str(record.get("hook_event_name")), "other")
    return kind if kind in _KINDS else "other"
