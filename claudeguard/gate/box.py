"""The sandbox's side of the gate (plan/sandbox.py builds the box): a Bash call that asks to run
outside the box is asked about at least (denied under lockdown), and an allowed Bash call's input
is the one the box runs (``allowed_input``: what the hook, the PermissionRequest hook and the
prompt tool give the CLI back)."""

from __future__ import annotations

from claudeguard.decision import Decision
from claudeguard.plan.sandbox import LEAVE_FLAG, asks_to_leave, session_box, wrap_bash_input

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.gate.session import Session

LEAVE_RULE = f"Bash({LEAVE_FLAG})"
LEAVE_SOURCE = "claudeguard sandbox"


def leaving(session: Session, tool: str, tool_input: dict[str, Any], decision: Decision) -> Decision:
    """The policy's ``decision`` for a call that asks to leave the box (``dangerouslyDisableSandbox``):
    denied under lockdown, else asked at least (a deny stays a deny). Any other call, or a
    session without a box, keeps its decision."""
    if not asks_to_leave(tool, tool_input) or decision.decision == "deny" or session_box(session.dir) is None:
        return decision
    if session.policy_spec.get("lockdown"):
        return Decision("deny", "claudeguard: lockdown: no command may run outside the sandbox "
                                "(dangerouslyDisableSandbox)", rule=LEAVE_RULE, source=LEAVE_SOURCE)
    if decision.decision == "ask":
        return decision
    return Decision("ask", "claudeguard: this command asks to run outside the sandbox (dangerouslyDisableSandbox)",
                    rule=LEAVE_RULE, source=LEAVE_SOURCE)


def allowed_input(session: Session, tool: str, tool_input: dict[str, Any], verdict: Decision) -> dict[str, Any] | None:
    """The ``updatedInput`` of an allowed Bash call (None: the input as it is, nothing to
    change): without ``dangerouslyDisableSandbox``, and marked to leave the box once when a
    human allowed a call that asked to (never a rule, a grant or a timeout)."""
    if tool != "Bash" or verdict.decision != "allow":
        return None
    box = session_box(session.dir)
    leave = box is not None and asks_to_leave(tool, tool_input) and verdict.decided_by == "human"
    out = wrap_bash_input(tool_input, box, leave=leave)
    return out if out != tool_input else None
