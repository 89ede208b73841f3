"""The guard's one decision vocabulary, the record that carries a decision from the policy
through the gate and the approval channel, one output adapter per consumer, and the audit row.

Each word means one thing everywhere:

- ``allow`` / ``deny``: the call runs / it does not (``Permission``: what the CLI is told, what a
  human answers and what ``approval.on_timeout`` names);
- ``ask``: a rule wants a human to decide (the policy's word; the gate turns it into a request);
- ``none``: no rule matches the call (the policy's word; ``claudeguardctl explain`` prints it);
- ``prompt``: the PreToolUse hook answers "ask": the CLI's own asker asks (its permission dialog
  at the keyboard, its permission-prompt tool, the caller's), and no other hook's allow can skip
  that question;
- ``leave``: the gate says nothing and the CLI decides (only where the CLI decides without asking
  anyone: another hook's allow then changes nothing);
- ``keyboard``: the person at the keyboard answered the dialog first (or the asker went away:
  nobody waits for the answer); the gate says nothing.

The policy answers ``allow | deny | ask | none``; the gate (``gate.decide.decide_call``) turns that,
the grants and a human's answer into ``allow | deny | prompt | leave | keyboard``; the adapters below turn
a gate decision into the JSON each consumer reads. A top-level module with no claudeguard imports:
the policy, the gate, the channel and the screen router all use it, none through another.
"""

from __future__ import annotations

from collections import namedtuple

# Types only: the hook's own-process path (bench/importtime.py) imports this module, and neither
# `typing` (~4 ms) nor `dataclasses` (~10 ms with inspect) need load there; checkers see these.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Literal, NamedTuple

    Permission = Literal["allow", "deny"]
    RuleKind = Literal["allow", "deny", "ask"]  # a rule's or a grant's kind
    PolicyOutcome = Literal["allow", "deny", "ask", "none"]
    GateOutcome = Literal["allow", "deny", "prompt", "leave", "keyboard"]
    Outcome = Literal["allow", "deny", "ask", "none", "prompt", "leave", "keyboard"]  # PolicyOutcome | GateOutcome
    Undecided = Literal["prompt", "leave", "ask", "deny"]  # what the gate makes of a policy "none"
    DecidedBy = Literal["rule", "human", "timeout", "default", "keyboard"]
    AnsweredBy = Literal["human", "timeout", "withdrawn", "error"]  # how a channel request ended
    Scope = Literal["once", "agent", "session", "forever"]
    DialogRole = Literal["yes", "no"]

PERMISSIONS: tuple[Permission, ...] = ("allow", "deny")
SCOPES: tuple[Scope, ...] = ("once", "agent", "session", "forever")
SILENT: tuple[Outcome, ...] = ("leave", "keyboard")  # the gate prints nothing: the CLI goes on

if TYPE_CHECKING:
    class PartDecision(NamedTuple):
        part: str
        decision: PolicyOutcome
        rule: str | None
        source: str | None
else:
    class PartDecision(namedtuple("PartDecision", "part decision rule source")):
        """One split part of a Bash command and the policy's outcome for it."""

        __slots__ = ()


class Decision:
    """One decision and what the audit log keeps of it: ``decision`` (the vocabulary above),
    ``reason`` (one sentence for the model and the user), the deciding ``rule`` and its ``source``
    (file:line, "default", "grant (...)"), ``decided_by``, the ``scope`` of a human's answer, the
    seconds ``waited_s`` for it, its channel ``request_id``, the ``parts`` of a Bash command, and
    for a human's answer who gave it (``answered_by``).
    A plain class, not a dataclass: see TYPE_CHECKING above."""

    __slots__ = ("decision", "reason", "rule", "source", "decided_by", "scope", "waited_s", "request_id", "parts",
                 "answered_by")

    def __init__(self, decision: Outcome, reason: str, *, rule: str | None = None, source: str | None = None,
                 decided_by: DecidedBy = "rule", scope: Scope | None = None, waited_s: float = 0.0,
                 request_id: str | None = None, parts: list[PartDecision] | None = None,
                 answered_by: dict[str, object] | None = None) -> None:
        self.decision = decision
        self.reason = reason
        self.rule = rule
        self.source = source
        self.decided_by = decided_by
        self.scope = scope
        self.waited_s = waited_s
        self.request_id = request_id
        self.parts: list[PartDecision] = parts if parts is not None else []
        # A human's answer: who gave it, as the waiting call saw the answering process (uid,
        # pid, tty, command), with what a relaying desk or fleet vouched for (channel/requests.py).
        self.answered_by = answered_by

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decision) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return "Decision(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def failure(reason: str) -> Decision:
    """What anything that fails on the way decides: a deny with the reason (fail closed)."""
    return Decision("deny", reason, decided_by="default")


def _permission(d: Decision) -> Permission | None:
    """``allow``/``deny``, or None when the gate says nothing; anything else (a policy ``ask`` or
    ``none`` that never went through the gate, a ``prompt`` anywhere but PreToolUse) is a bug: it
    raises, and the callers deny."""
    if d.decision == "allow" or d.decision == "deny":
        return d.decision
    if d.decision in SILENT:
        return None
    raise ValueError(f"claudeguard: {d.decision!r} is no answer for Claude Code")


# --- one output adapter per consumer ---------------------------------------------------------


def pre_tool_use_output(d: Decision, updated_input: dict[str, object] | None = None) -> dict[str, object] | None:
    """The PreToolUse hook's JSON (``prompt``: "ask", the CLI's own asker asks, the reason shown in
    its dialog); None: print nothing (the CLI decides without asking). ``updated_input``: what an
    allow runs instead (the whole input: gate.box.allowed_input)."""
    behavior = "ask" if d.decision == "prompt" else _permission(d)
    if behavior is None:
        return None
    out: dict[str, object] = {"hookEventName": "PreToolUse", "permissionDecision": behavior,
                              "permissionDecisionReason": d.reason}
    if behavior == "allow" and updated_input is not None:
        out["updatedInput"] = updated_input
    return {"hookSpecificOutput": out}


def permission_request_output(d: Decision, tool_input: dict[str, object] | None = None) -> dict[str, object] | None:
    """The PermissionRequest hook's JSON (an allow runs ``tool_input`` when given); None: print
    nothing (the dialog stays, or was answered at the keyboard)."""
    behavior = _permission(d)
    if behavior is None:
        return None
    body: dict[str, object] = {"behavior": behavior}
    if behavior == "allow":
        if tool_input is not None:
            body["updatedInput"] = tool_input
    else:
        body["message"] = d.reason
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": body}}


def hook_output(event_name: str | None, d: Decision,
                tool_input: dict[str, object] | None = None) -> dict[str, object] | None:
    """A decision event's answer in its own shape (an unknown event, e.g. input that could not be
    read, in PreToolUse's); None for an event that decides nothing."""
    if event_name == "PermissionRequest":
        return permission_request_output(d, tool_input)
    if event_name == "PreToolUse" or event_name is None:
        return pre_tool_use_output(d)
    return None


def prompt_tool_answer(d: Decision, tool_input: dict[str, object]) -> dict[str, object]:
    """What the ``--permission-prompt-tool`` answers: an allow runs ``tool_input``; anything
    else is a deny with the reason (the prompt tool must answer: it cannot leave the call)."""
    if d.decision == "allow":
        return {"behavior": "allow", "updatedInput": tool_input}
    return {"behavior": "deny", "message": d.reason}


def prompt_tool_result(answer: dict[str, object]) -> dict[str, object]:
    """The MCP ``tools/call`` result carrying a prompt tool answer (one text block of JSON), the
    same for the stdio server and the service's HTTP endpoint."""
    import json  # not at the top: the policy imports this module and keeps json off its import

    return {"content": [{"type": "text", "text": json.dumps(answer)}]}


def dialog_role(decision: Permission) -> DialogRole:
    """The option of a dialog on the screen an answer without an explicit choice stands for."""
    return "yes" if decision == "allow" else "no"


# --- the audit log ---------------------------------------------------------------------------


def audit_row(d: Decision, *, session_id: str, tool: str, summary: str, via: str, agent_type: str | None = None,
              agent_id: str | None = None, input_digest: str | None = None, **extra: object) -> dict[str, object]:
    """The audit log's line for one decision (``channel.audit.record`` writes it): the same keys
    for every writer, then the writer's ``extra`` (e.g. the dialog's ``choice``)."""
    return {
        "session_id": session_id,
        "agent_type": agent_type,
        "agent_id": agent_id,
        "tool": tool,
        "summary": summary,
        "input_digest": input_digest,
        "decision": d.decision,
        "decided_by": d.decided_by,
        "scope": d.scope,
        "waited_s": d.waited_s,
        "rule": d.rule,
        "source": d.source,
        "request_id": d.request_id,
        "via": via,
        **({"answered_by": d.answered_by} if d.answered_by is not None else {}),
        **extra,
    }
