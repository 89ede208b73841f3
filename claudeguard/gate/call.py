"""The gate's inputs, typed once at the entry: the hook events the CLI posts (one TypedDict per
kind), the tool call a decision event (or the prompt tool, or a host's prompt) is about
(``Call``), and how a call that needs a human is asked (``Asking``).

Everything the gate decides reads these, never the raw event: ``hook.handle`` parses the event
into a ``Call`` once (``call_of``), and ``decide.decide_call(session, call, asking)`` decides
who answers it. Plain classes with ``__slots__`` rather than dataclasses, and the TypedDicts for
the type checker only: every hook call imports this module (docs/design.md, "Type-only imports").
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Literal, TypedDict, Union

    from claudeguard.decision import Undecided

    class ToolEvent(TypedDict, total=False):
        """PreToolUse, PermissionRequest, PostToolUse and PostToolUseFailure (the CLI's hook JSON;
        ``agent_type``/``agent_id`` only for a subagent's call)."""
        hook_event_name: Literal["PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"]
        session_id: str
        cwd: str
        transcript_path: str
        permission_mode: str
        tool_name: str
        tool_input: dict[str, Any]
        tool_use_id: str
        agent_type: str
        agent_id: str

    class SubagentEvent(TypedDict, total=False):
        hook_event_name: Literal["SubagentStart", "SubagentStop"]
        session_id: str
        cwd: str
        agent_type: str
        agent_id: str

    class NotificationEvent(TypedDict, total=False):
        hook_event_name: Literal["Notification"]
        session_id: str
        cwd: str
        notification_type: str
        message: str

    class OtherEvent(TypedDict, total=False):
        """UserPromptSubmit, and any event the guard only records."""
        hook_event_name: str
        session_id: str
        cwd: str

    HookEvent = Union[ToolEvent, SubagentEvent, NotificationEvent, OtherEvent]


def parse_event(raw: object) -> HookEvent:
    """A hook event as the CLI posted it (JSON already read), typed; ValueError when it is not an
    object. Its fields are read through ``.get`` and checked where used (``call_of``): the CLI
    sends what it sends, and a field of the wrong type is a field missing."""
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    return raw  # type: ignore[return-value]  # a JSON object of the CLI's: typed here, checked where read


class Call:
    """One tool call: the tool, its input, the agent that makes it (None, None: the main agent),
    the cwd its paths are read from, the CLI's id for it, and the CLI's mode as the event names
    it (acceptEdits lets a Bash command write inside the project)."""

    __slots__ = ("tool", "input", "agent_type", "agent_id", "cwd", "tool_use_id", "permission_mode")

    def __init__(self, tool: str, tool_input: dict[str, Any], agent_type: str | None, agent_id: str | None, cwd: str,
                 tool_use_id: str | None = None, permission_mode: str | None = None) -> None:
        self.tool = tool
        self.input = tool_input
        self.agent_type = agent_type
        self.agent_id = agent_id
        self.cwd = cwd
        self.tool_use_id = tool_use_id
        self.permission_mode = permission_mode

    @property
    def who(self) -> dict[str, Any]:
        """The agent and tool, as the session's call notes keep them (``session.remember_call``)."""
        return {"agent_type": self.agent_type, "agent_id": self.agent_id, "tool": self.tool}


def call_of(event: ToolEvent, cwd: str) -> Call | None:
    """The call a tool event is about; None when it names no tool or no input object."""
    tool, tool_input = event.get("tool_name"), event.get("tool_input")
    if not isinstance(tool, str) or not isinstance(tool_input, dict):
        return None
    return Call(tool, tool_input, _text(event.get("agent_type")), _text(event.get("agent_id")), cwd,
                _text(event.get("tool_use_id")), _text(event.get("permission_mode")))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class Asking:
    """How a call that needs a human is asked, for ``decide.decide_call``.

    ``via``: who asks (the audit row's word: hook, dialog, prompt-tool, permission-request, ide);
    ``undecided``: what the policy's "none" becomes; ``keyboard``: a policy "ask" is answered
    ``prompt`` (the CLI's dialog, keyboard first); ``delay_s``: the keyboard's head start before
    the request is posted; ``held``: the request stands for a dialog on a pty session's screen,
    whose router releases or drops it; ``unseen_by_hook``: the PreToolUse hook never saw this
    call (the service was unreachable), so even a policy allow goes to a human; ``still_wanted``:
    checked while waiting (a caller gone: the request is withdrawn)."""

    __slots__ = ("via", "undecided", "keyboard", "delay_s", "held", "unseen_by_hook", "still_wanted")

    def __init__(self, via: str, undecided: Undecided, *, keyboard: bool = False, delay_s: float = 0.0,
                 held: bool = False, unseen_by_hook: bool = False,
                 still_wanted: Callable[[], bool] | None = None) -> None:
        self.via = via
        self.undecided = undecided
        self.keyboard = keyboard
        self.delay_s = delay_s
        self.held = held
        self.unseen_by_hook = unseen_by_hook
        self.still_wanted = still_wanted
