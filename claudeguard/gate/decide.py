"""One tool call to one ``claudeguard.decision.Decision``: policy and grants first, then a human
through the channel.

Order: the session's deny/allow/ask grants and the policy are evaluated together (deny > ask >
allow); a policy ``ask`` or an undecided call that needs a human goes to the approval channel
and waits there until an answer or the deadline (``approval.on_timeout``). Every allow and deny
is one line in the audit log. Anything that fails on the way is a deny with a readable reason.
"""

from __future__ import annotations

import os
import time

from claudeguard.config.schema import APPROVAL_TIMEOUT_S
from claudeguard.decision import PERMISSIONS, Decision, audit_row
from claudeguard.gate.session import Session, add_grants, load_grants

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.channel.model import Answer
    from claudeguard.channel.requests import Pending
    from claudeguard.decision import Permission, Undecided
    from claudeguard.policy.decide import SourcedRule

# Tools the CLI runs without asking in every mode: a subagent's call to them is left to the CLI.
NO_PERMISSION_TOOLS = frozenset(
    "Read Glob Grep LS NotebookRead TodoWrite TodoRead BashOutput TaskOutput ToolSearch "
    "ListMcpResourcesTool ReadMcpResourceTool Skill SlashCommand".split()
)


def _extra_rules(session: Session, agent_type: str | None) -> list[SourcedRule]:
    from claudeguard.policy.decide import SourcedRule
    from claudeguard.policy.rules import parse_rule

    out: list[SourcedRule] = []
    for grant in load_grants(session):
        if grant.get("scope") == "agent" and grant.get("agent_type") != agent_type:
            continue
        try:
            rule = parse_rule(grant["rule"])
        except (KeyError, ValueError):
            continue
        who = (f"agent {grant.get('agent_type') or 'main'}" if grant.get("scope") == "agent"
               else grant.get("scope", "session"))
        out.append(SourcedRule(rule, grant.get("kind", "allow"), f"grant ({who}, request {grant.get('request_id')})",
                               session.snapshot.get("cwd", "/")))
    return out


def needs_human(tool: str, tool_input: dict[str, Any], permission_mode: str | None, cwd: str) -> bool:
    """Would the CLI stop to ask about this call? (A subagent cannot show the dialog.)"""
    from claudeguard.policy.rules import EDIT_TOOLS

    if permission_mode in ("bypassPermissions", "dontAsk", "plan"):
        return False  # bypass allows; dontAsk and plan decide without a prompt
    if tool in NO_PERMISSION_TOOLS:
        return False
    if tool in EDIT_TOOLS and permission_mode == "acceptEdits":
        path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
        full = os.path.normpath(os.path.join(cwd, path))
        return not (full == cwd or full.startswith(cwd.rstrip("/") + "/"))
    return True


def policy_decision(session: Session, tool: str, tool_input: dict[str, Any], agent_type: str | None,
                    cwd: str, mode: str | None = None) -> Decision:
    from claudeguard.gate.settings_check import unchecked
    from claudeguard.policy.decide import decide, policy_from_spec

    changed = unchecked(session.dir)  # settings the CLI may be re-reading, not judged by the watch yet
    if changed is not None:
        return Decision("deny", f"claudeguard: {changed} changed during the session and the guard has not checked it; "
                        f"denied.", rule="settings changed", source="claudeguard (settings watch)")
    policy = policy_from_spec(session.policy_spec)
    return decide(policy, tool, tool_input, agent_type=agent_type, cwd=cwd, extra=_extra_rules(session, agent_type),
                  mode=mode)


def decide_call(
    session: Session,
    *,
    tool: str,
    tool_input: dict[str, Any],
    agent_type: str | None,
    agent_id: str | None,
    cwd: str,
    via: str,
    undecided: Undecided,  # what the policy's "none" becomes
    tool_use_id: str | None = None,
    delay_s: float = 0.0,
    still_wanted: "Callable[[], bool] | None" = None,
    unseen_by_hook: bool = False,
    held: bool = False,
    permission_mode: str | None = None,
) -> Decision:
    """The gate's decision: ``allow`` | ``deny``, or ``leave`` (no rule decides and ``undecided``
    is "leave": the CLI asks) or ``keyboard`` (answered at the keyboard first, or the caller went
    away). ``delay_s``: an interactive dialog's head start for the person at the keyboard before
    the request is posted; ``still_wanted``: checked while waiting (a caller gone: the request is
    withdrawn); ``held``: the request stands for a dialog on a pty session's screen, whose router
    owns it: posted held, released by the router when the keyboard's head start is over, dropped
    when the dialog was answered at the keyboard (``keyboard``); ``permission_mode``: the CLI's
    mode as the hook event names it (acceptEdits lets a Bash command write inside the project)."""
    started = time.monotonic()
    from claudeguard.gate.modes import effective_mode, mode_allows

    # The CLI runs in a mode that allows no more than `default` (plan/argv.py): what the asked-for
    # mode allows, for this agent, the guard allows here, after the agent's own policy.
    mode = effective_mode(session, permission_mode, agent_type)
    decision = policy_decision(session, tool, tool_input, agent_type, cwd, mode)
    if decision.decision == "none":
        decision = mode_allows(session, tool, tool_input, mode, cwd) or decision
    if tool == "Bash":
        from claudeguard.gate.box import leaving

        decision = leaving(session, tool, tool_input, decision)  # leaving the sandbox: asked at least
    if decision.decision == "allow" and unseen_by_hook:
        # The hook never saw this call (the service was unreachable): which agent asks is
        # unknown, and an agent's own rules may forbid what the main agent may do, so a human
        # decides (the timeout's default applies if nobody does).
        verdict = ask_human(session, tool=tool, tool_input=tool_input, agent_type=agent_type, agent_id=agent_id,
                            cwd=cwd, via=via, rule=decision.rule, source=decision.source, tool_use_id=tool_use_id,
                            still_wanted=still_wanted)
        if verdict.decision == "keyboard":
            return verdict
    elif decision.decision in PERMISSIONS:
        verdict = Decision(decision.decision, decision.reason, rule=decision.rule, source=decision.source)
    elif decision.decision == "none" and undecided == "leave":
        return Decision("leave", "no rule decides; left to Claude Code", decided_by="default")
    elif decision.decision == "none" and undecided == "deny":
        verdict = Decision("deny", f"claudeguard: {tool} needs approval and subagents.background = \"deny\"",
                           decided_by="default")
    else:
        if delay_s > 0 and not _head_start(delay_s, still_wanted):
            return Decision("keyboard", "answered at the keyboard", decided_by="keyboard")
        verdict = ask_human(session, tool=tool, tool_input=tool_input, agent_type=agent_type, agent_id=agent_id,
                            cwd=cwd, via=via, rule=decision.rule, source=decision.source, tool_use_id=tool_use_id,
                            still_wanted=still_wanted, held=held)
        if verdict.decision == "keyboard":
            return verdict
    verdict.waited_s = round(time.monotonic() - started, 3)
    ask_rule = (decision.rule, decision.source) if decision.decision == "ask" else None
    audit(session, verdict, tool=tool, tool_input=tool_input, agent_type=agent_type, agent_id=agent_id,
          via=via, cwd=cwd,
          ask_rule=ask_rule)
    return verdict


# How often a waiting request checks that its caller still wants it. Answers never wait for
# this: they wake the waiting call through its FIFO at once.
SCREEN_CHECK_S = 0.5


def _head_start(delay_s: float, still_wanted: "Callable[[], bool] | None") -> bool:
    """Sleep ``delay_s``; False when the caller went away meanwhile."""
    end = time.time() + delay_s
    while True:
        if still_wanted is not None and not still_wanted():
            return False
        left = end - time.time()
        if left <= 0:
            return True
        time.sleep(min(left, SCREEN_CHECK_S))


def ask_human(session: Session, *, tool: str, tool_input: dict[str, Any], agent_type: str | None, agent_id: str | None,
              cwd: str, via: str, rule: str | None, source: str | None, tool_use_id: str | None,
              still_wanted: "Callable[[], bool] | None" = None, held: bool = False) -> Decision:
    from claudeguard import channel
    from claudeguard.policy.decide import grant_rules_for_call, summarize_call

    approval = session.approval
    timeout = float(approval.get("timeout") or APPROVAL_TIMEOUT_S)  # a snapshot written without one
    on_timeout: Permission = "allow" if approval.get("on_timeout") == "allow" else "deny"
    extra = {"via": via, "tool_use_id": tool_use_id, "rule": rule, "rule_source": source,
             "guard_pid": session.snapshot.get("pid")}
    if session.snapshot.get("cli_short_id"):  # a --bg session: the id `claude agents` shows
        extra["cli_short_id"] = session.snapshot["cli_short_id"]
    pending = channel.post(
        session_id=session.id, agent_type=agent_type, agent_id=agent_id, tool=tool, input=tool_input,
        summary=summarize_call(tool, tool_input), cwd=cwd, timeout=timeout, extra=extra,
        notify=approval.get("notify") or None, held=held,
    )
    if held and not _hold(pending, still_wanted, session.snapshot.get("pid")):
        return Decision("keyboard", "answered at the keyboard; request withdrawn", decided_by="keyboard",
                        request_id=pending.request.id)
    record_pending(session, pending.request.id, +1)
    try:
        answer = pending.poll() if pending.done else _wait(pending, on_timeout, still_wanted)
    finally:
        record_pending(session, pending.request.id, -1)
    request_id = pending.request.id
    if answer is None:
        return Decision("keyboard", "answered at the keyboard; request withdrawn", decided_by="keyboard",
                        request_id=request_id)
    if answer.decided_by == "timeout":
        word = "allowed" if answer.decision == "allow" else "denied"
        reason = f"claudeguard: no answer within {timeout:g} s; {word} by approval.on_timeout (request {request_id})"
        return Decision(answer.decision, reason, decided_by="timeout", request_id=request_id)
    if answer.decided_by != "human":
        reason = answer.message or f"claudeguard: the approval channel failed ({answer.decided_by}); denied"
        return Decision("deny", reason, decided_by="default", request_id=request_id)
    scope = answer.scope or "once"
    if scope in ("agent", "session", "forever"):
        rules = grant_rules_for_call(tool, tool_input, cwd=cwd)
        add_grants(session, rules, kind=answer.decision, scope="agent" if scope == "agent" else "session",
                   agent_type=agent_type, request_id=request_id)
    if answer.decision == "allow":
        reason = f"claudeguard: approved by a human ({scope})"
    else:
        reason = answer.message or f"claudeguard: denied by a human ({scope})"
    return Decision(answer.decision, reason, decided_by="human", scope=scope, request_id=request_id,
                    answered_by=answer.answered_by)


HOLD_CHECK_S = 0.2  # how often a held request looks for its dialog owner's word


def _hold(pending: Pending, still_wanted: "Callable[[], bool] | None", owner_pid: int | None) -> bool:
    """Wait on a held request until the owner of its dialog releases it (True: now published for
    approvers, or ended by a lost channel) or drops it (False: withdrawn, the keyboard answered).
    An owner that is gone (``owner_pid``, the launcher) drops it too."""
    while True:
        word = pending.owner_says()
        if word == "go":
            pending.release()
            return True
        if word == "drop" or (still_wanted is not None and not still_wanted()) or not _alive(owner_pid):
            pending.withdraw()
            return False
        if pending.check() is not None:
            return True  # the channel was lost: that ending is the answer
        time.sleep(HOLD_CHECK_S)


def _alive(pid: int | None) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return True  # not known: the other endings still apply
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _wait(pending: Pending, on_timeout: Permission, still_wanted: Callable[[], bool] | None) -> Answer | None:
    """The channel's answer; None when the dialog was answered at the keyboard first."""
    if still_wanted is None and not pending.owned:
        return pending.wait(on_timeout=on_timeout)
    if still_wanted is None:
        still_wanted = lambda: True  # noqa: E731 - only the dialog's owner can end the wait early
    import select

    while True:
        left = pending.request.deadline - time.time()
        if left <= 0:
            return pending.wait(on_timeout=on_timeout)  # ends at once with on_timeout
        ready, _, _ = select.select([pending.fileno()], [], [], min(left, SCREEN_CHECK_S))
        if ready:
            answer = pending.poll()
            if answer is not None:
                return answer
        elif (lost := pending.check()) is not None:
            return lost  # its channel was lost (a channel removed as a whole is made again)
        if pending.owner_says() == "drop" or not still_wanted():
            answer = pending.withdraw()
            return answer  # an answer that arrived just before the keyboard's still counts


def answer_record(verdict: Decision, tool_input: dict[str, Any]) -> dict[str, Any]:
    """What ``session.record_answer`` keeps of a channel verdict (see ``reuse_answer``)."""
    from claudeguard.channel.audit import input_digest

    return {"decision": verdict.decision, "reason": verdict.reason, "decided_by": verdict.decided_by,
            "scope": verdict.scope, "request_id": verdict.request_id, "digest": input_digest(tool_input),
            "time": time.time()}


def reuse_answer(session: Session, tool: str, tool_input: dict[str, Any], agent_id: str | None,
                 tool_use_id: str | None) -> Decision | None:
    """The answer the PreToolUse hook already got for this very call (same tool_use_id, or same
    agent and input), taken once: the second asker of one call never posts a second request."""
    from claudeguard.channel.audit import input_digest
    from claudeguard.gate.session import take_answer

    answer = take_answer(session, tool_use_id, input_digest(tool_input), agent_id)
    if answer is None or answer.get("decision") not in PERMISSIONS:
        return None
    return Decision(answer["decision"], answer.get("reason") or "", decided_by=answer.get("decided_by") or "human",
                    scope=answer.get("scope"), request_id=answer.get("request_id"))


def record_pending(session: Session, request_id: str, delta: int) -> None:
    from claudeguard.gate.session import record_event

    record_event(session, "approval-wait" if delta > 0 else "approval-done", request_id=request_id)


def audit(session: Session, verdict: Decision, *, tool: str, tool_input: dict[str, Any], agent_type: str | None,
          agent_id: str | None, via: str, cwd: str | None = None,
          ask_rule: tuple[str | None, str | None] | None = None) -> None:
    try:
        from claudeguard.channel import audit as audit_log
        from claudeguard.policy.decide import grant_rules_for_call, summarize_call

        # A call a human answered (or that timed out) keeps the narrowest rules that would have
        # decided it, worked out here where cwd and HOME are the call's: `audit --suggest`
        # reads them. An empty list: the call cannot be turned into a rule (no safe split).
        asked = verdict.decided_by in ("human", "timeout")
        rules = grant_rules_for_call(tool, tool_input, cwd=cwd or "/") if asked else None
        audit_log.record(audit_row(
            verdict, session_id=session.id, agent_type=agent_type, agent_id=agent_id, tool=tool,
            summary=summarize_call(tool, tool_input), input_digest=audit_log.input_digest(tool_input), via=via,
            **({"rules": rules} if rules is not None else {}),
            **({"cli_short_id": session.snapshot["cli_short_id"]} if session.snapshot.get("cli_short_id") else {}),
            # The ask rule that sent it to a human: an allow rule never overrides it.
            **({"ask_rule": ask_rule[0], "ask_source": ask_rule[1]} if ask_rule else {}),
        ))
    except Exception:  # noqa: BLE001 - the audit log never blocks a decision
        pass
