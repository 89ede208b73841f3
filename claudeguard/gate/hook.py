"""``claudeguardctl hook``: the Claude Code hook command (event JSON in, decision JSON out).

PreToolUse: the policy's deny and allow are answered at once; a call that needs a human is
answered explicitly (``pre_tool_route``): "ask" where the CLI's own asker asks (its dialog,
keyboard first, in a session with a person at its terminal; its prompt tool in -p), else the
channel from here; silence only where the CLI decides without asking. PermissionRequest (a
dialog is on the screen) is posted held for the pty's router in a pty session, elsewhere after
``approval.idle_before_channel``; in a -p run it is answered only where the launcher made it
the asker (2.1.330 without a prompt tool), like the prompt tool. PostToolUse in a pty session
finds a call that ran while its dialog's request was open (answered by neither the keyboard
nor the channel).
Every other event is recorded for the watchdog. Whatever goes wrong, a decision event gets a deny
with the reason: exit 0 and JSON on stdout, never a traceback on the CLI's screen.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.decision import Decision, Undecided
    from claudeguard.gate.call import Call, HookEvent, NotificationEvent, OtherEvent, SubagentEvent, ToolEvent
    from claudeguard.gate.session import Session

DECISION_EVENTS = ("PreToolUse", "PermissionRequest")


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj))
    sys.stdout.flush()


def deny_output(event_name: str | None, reason: str) -> dict[str, Any] | None:
    """A decision event's deny in its own shape (fail closed); None for any other event."""
    from claudeguard.decision import failure, hook_output

    return hook_output(event_name, failure(reason))


def run(stdin_text: str, client_alive: "Callable[[], bool] | None" = None,
        session_dir: str | None = None) -> dict[str, Any] | None:
    """The hook's answer to one event. ``client_alive``: when served by the gate server, whether
    the hook process that asked is still there (a request it waits on is withdrawn otherwise);
    ``session_dir``: the session's (the hook's ``--session-dir``, or the gate server's own)."""
    from claudeguard.gate.call import parse_event

    try:
        event = parse_event(json.loads(stdin_text))
    except ValueError as exc:
        return deny_output(None, f"claudeguard: malformed hook input ({exc}); denied")
    name = event.get("hook_event_name")
    try:
        session = None
        if session_dir:
            from claudeguard.channel.audit import session_log
            from claudeguard.gate.session import load_session

            session = load_session(session_dir)
            session_log.set(session.snapshot.get("log_dir"))  # not CLAUDEGUARD_LOG_DIR: an env block sets that
        return handle(event, client_alive, session)
    except Exception as exc:  # noqa: BLE001 - fail closed with a reason, never a traceback
        if name in DECISION_EVENTS:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return deny_output(name, f"claudeguard: the guard could not decide ({detail}); denied")
        return None


def run_event(body: bytes, event_name: str, session: Session,
              client_alive: "Callable[[], bool] | None" = None) -> dict[str, Any] | None:
    """The answer to one event posted to the resident service (``claudeguard.service.http``) for
    a registered ``session``; ``event_name`` comes from the URL, so even a body that cannot be
    read is answered in the right shape (a deny for a decision event)."""
    from claudeguard.gate.call import parse_event

    try:
        event = parse_event(json.loads(body))
    except (ValueError, UnicodeDecodeError) as exc:
        return deny_output(event_name, f"claudeguard: malformed hook input ({exc}); denied")
    name = event.get("hook_event_name") or event_name
    from claudeguard.channel.audit import session_log

    session_log.set(session.snapshot.get("log_dir"))
    try:
        return handle(event, client_alive, session)
    except Exception as exc:  # noqa: BLE001 - fail closed with a reason
        if name in DECISION_EVENTS:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return deny_output(name, f"claudeguard: the guard could not decide ({detail}); denied")
        return None
    finally:
        session_log.set(None)


def handle(event: HookEvent, client_alive: "Callable[[], bool] | None" = None,
           session: Session | None = None) -> dict[str, Any] | None:
    """One event, parsed once: a decision event's call goes to ``_pre_tool_use`` or
    ``_permission_request``; every other event is recorded for the watchdog."""
    from claudeguard.gate.call import call_of
    from claudeguard.gate.session import current_session, record_event

    name = event.get("hook_event_name")
    cwd = event.get("cwd") or os.getcwd()
    if session is None:
        session = current_session(cwd, event.get("session_id"))
    if name not in DECISION_EVENTS:
        recorder = _RECORDERS.get(name or "")
        if recorder is not None:
            recorder(session, event)
        else:
            record_event(session, "other", hook_event_name=name)
        return None
    call = call_of(event, cwd)  # type: ignore[arg-type]  # a decision event's name says it is a ToolEvent
    if call is None:
        return deny_output(name, "claudeguard: hook input without tool_name/tool_input; denied")
    if name == "PreToolUse":
        return _pre_tool_use(session, call, event.get("transcript_path"), client_alive)
    return _permission_request(session, call, client_alive)


def _tool_end(session: Session, event: ToolEvent) -> None:
    """PostToolUse and PostToolUseFailure: the call is over (its pause ends, the watchdog is told);
    in a pty session, a call that ran while its dialog's request was open is found."""
    from claudeguard.gate.call import call_of
    from claudeguard.gate.session import forget_call, record_event

    tool_use_id, agent_id = event.get("tool_use_id"), event.get("agent_id")
    if session.dir is not None and tool_use_id:
        from claudeguard.gate.freeze import resume

        resume(session.dir, tool_use_id)  # the call is over: its pause ends (gate/freeze.py)
    forget_call(session, tool_use_id)
    record_event(session, "tool-end", tool=event.get("tool_name"), tool_use_id=tool_use_id,
                 agent_id=agent_id, failed=event.get("hook_event_name") != "PostToolUse")
    call = call_of(event, "")
    if session.snapshot.get("pty") and call is not None:
        from claudeguard.gate.decide import ran_while_asked

        ran_while_asked(session, call.tool, call.input, call.agent_id)


def _prompt(session: Session, event: OtherEvent) -> None:
    from claudeguard.gate.session import record_event

    record_event(session, "prompt")


def _subagent(session: Session, event: SubagentEvent) -> None:
    from claudeguard.gate.session import record_event

    started = event.get("hook_event_name") == "SubagentStart"
    record_event(session, "subagent-start" if started else "subagent-stop",
                 agent_id=event.get("agent_id"), agent_type=event.get("agent_type"))


def _notification(session: Session, event: NotificationEvent) -> None:
    from claudeguard.gate.session import record_event

    record_event(session, "notification", notification_type=event.get("notification_type"),
                 message=event.get("message"))


# The events the guard only records, for the watchdog (each by its own function, which takes the
# event's own TypedDict: the name it is listed under says which).
_RECORDERS: dict[str, Callable[[Session, Any], None]] = {
    "PostToolUse": _tool_end, "PostToolUseFailure": _tool_end, "UserPromptSubmit": _prompt,
    "SubagentStart": _subagent, "SubagentStop": _subagent, "Notification": _notification,
}


def _pre_tool_use(session: Session, call: Call, transcript: object,
                  client_alive: "Callable[[], bool] | None") -> dict[str, Any] | None:
    """PreToolUse: the policy's allow and deny at once; a call that needs a human is answered
    explicitly (``pre_tool_route``: the CLI's asker, or the channel from here); silence only
    where the CLI decides without asking."""
    from claudeguard.decision import SILENT, pre_tool_use_output
    from claudeguard.gate.box import allowed_input
    from claudeguard.gate.call import Asking
    from claudeguard.gate.decide import answer_record, decide_call
    from claudeguard.gate.session import forget_call, record_answer, record_event, remember_call

    if call.tool == "Bash" and session.dir is not None:
        from claudeguard.plan.box_enter import want

        want(session.dir)  # the session's box starts now, if not yet (box_enter.OnDemand)
    # The transcript shows the watchdog the call's end where no PostToolUse is registered (-p).
    record_event(session, "tool-start", tool=call.tool, tool_use_id=call.tool_use_id, agent_id=call.agent_id,
                 agent_type=call.agent_type, transcript=transcript)
    if session.snapshot.get("asker") != "permission-request":
        # For our prompt tool, whose arguments name the call but not the agent. A -p run that
        # asks through the PermissionRequest hook (whose event names the agent) never reads it.
        remember_call(session, call.tool_use_id or "", call.who)
    routed: list[Asking] = []  # what pre_tool_route says, under the pause

    def route() -> None:
        undecided, keyboard = pre_tool_route(session, call)
        routed.append(Asking("hook", undecided, keyboard=keyboard, still_wanted=client_alive))

    verdict = held_still(session, call, call.tool_use_id or "", lambda: routed[0].undecided if routed else "leave",
                         route, lambda: decide_call(session, call, routed[0]))
    if verdict.decision == "prompt":
        return pre_tool_use_output(verdict)  # the CLI's own asker asks (its dialog: keyboard first)
    if verdict.decision in SILENT:
        return None
    if verdict.request_id:
        # A human (or the deadline) answered this call. The CLI's own copy of the ask rule
        # makes it ask again after an allow; that ask reuses this answer (ask once).
        record_answer(session, call.tool_use_id, call.who, answer_record(verdict, call.input))
    if verdict.decision == "deny":
        # no PostToolUse follows a denied call: tell the watchdog it is not in flight
        forget_call(session, call.tool_use_id)
        record_event(session, "tool-end", tool=call.tool, tool_use_id=call.tool_use_id, agent_id=call.agent_id,
                     failed=True)
    return pre_tool_use_output(verdict, allowed_input(session, call.tool, call.input, verdict))


def _permission_request(session: Session, call: Call,
                        client_alive: "Callable[[], bool] | None") -> dict[str, Any] | None:
    """PermissionRequest: the CLI is about to show (or shows) its dialog, or, in a -p run on
    2.1.330, asks whoever answers its prompts."""
    from claudeguard.decision import Decision, permission_request_output
    from claudeguard.gate.box import allowed_input
    from claudeguard.gate.call import Asking
    from claudeguard.gate.decide import decide_call, reuse_answer
    from claudeguard.gate.proof import NO_SIGN, end_session, lifeless

    if lifeless(session):  # a PermissionRequest before any PreToolUse: the hooks are not all there
        assert session.dir is not None
        why = NO_SIGN.format(what=f"a {call.tool} call")
        end_session(session.dir, why)
        return permission_request_output(Decision("deny", why, decided_by="default"))
    if session.snapshot.get("host"):
        # The host answers the CLI's prompts over stdio and the launcher races it with the
        # channel (shim/host_prompt.py): both CLIs fire this hook beside the host's can_use_tool,
        # and an answer here would end the host's prompt before the person saw it.
        return None
    key = "request-" + (call.tool_use_id or "")
    if session.snapshot.get("print_mode"):
        # In -p it is ours to answer only when no permission-prompt tool was given and the
        # launcher made it the asker (snapshot "asker"): beside a prompt tool (ours, or the
        # caller's, e.g. the Agent SDK's) 2.1.330 fires it in parallel, and the prompt tool owns
        # that decision, so the hook stays out of the race.
        if session.snapshot.get("asker") != "permission-request":
            return None
        # As the prompt tool decides (mcp_server.decide_prompt): an answer the PreToolUse hook
        # got for this call (same agent and input: the event has no tool_use_id), else policy,
        # grants, then a human. No dialog is on any screen: no head start, nothing held.
        asking = Asking("permission-request", "ask", still_wanted=client_alive)
        verdict = reuse_answer(session, call.tool, call.input, call.agent_id, None) or held_still(
            session, call, key, lambda: "ask", lambda: None, lambda: decide_call(session, call, asking))
        # An allow without updatedInput: 2.1.330 -p denies an allow that carries updatedInput
        # (even the unchanged input) when one of the CLI's own ask rules matches the call
        # (observed: "Claude requested permissions to use Bash, but you haven't granted it yet"):
        # only a Bash input the box must change (plan/sandbox.py) goes back.
        return permission_request_output(verdict, allowed_input(session, call.tool, call.input, verdict))
    earlier = reuse_answer(session, call.tool, call.input, call.agent_id, None)
    if earlier is not None:
        return permission_request_output(earlier, allowed_input(session, call.tool, call.input, earlier) or call.input)
    # In a pty session the dialog on the screen is the router's (the launcher's): the request is
    # posted held, the router releases it when the keyboard's head start is over and drops it
    # when the keyboard answered (shim/dialogs/handshake.py). Elsewhere the head start is a sleep.
    held = bool(session.snapshot.get("pty"))
    asking = Asking("dialog", "ask", held=held, still_wanted=client_alive,
                    delay_s=0.0 if held else float(session.approval.get("idle_before_channel") or 0))
    verdict = held_still(session, call, key, lambda: "ask", lambda: None, lambda: decide_call(session, call, asking))
    # None for "keyboard": the person at the keyboard answered; the CLI has moved on
    return permission_request_output(verdict, allowed_input(session, call.tool, call.input, verdict) or call.input)


def held_still(session: Session, call: Call, key: str, undecided: Callable[[], str], route: Callable[[], None],
               decide: Callable[[], Decision]) -> Decision:
    """``decide()`` with the session's boxes held still from the look at the call's paths to the
    CLI's use of them (gate/freeze.py): stopped before ``route()`` and the decision look at a
    path; kept stopped when the call will run at once; let go while a human decides, and stopped
    again when the human allowed: the call runs only where its paths still lead where they led
    when it was asked, else it is denied. A call allowed at once only after they were let go (a
    path said "ask" while held, "allow" after) is looked at once more, held: still allowed, or
    denied (its path changed under the guard).
    ``key``: the pause's name for this call (its tool_use_id, with the asker's prefix)."""
    from claudeguard.decision import Decision

    tool = call.tool
    paused = pause_for(session, tool, key)  # before anything looks at a path
    seen = _reached(session, call)  # what the call's paths lead to at the look (a human may see it later)
    route()
    if paused < 0:
        return Decision("deny", "claudeguard: the session's background commands could not be paused while the guard "
                                f"checks this {tool} call's path; denied (gate/freeze.py)", decided_by="default")
    let_go = paused > 0 and not runs_at_once(session, call, undecided())
    if let_go:
        # A human decides (or a deny): the boxes go on meanwhile, and are held again once the
        # human allowed (below).
        from claudeguard.gate.freeze import resume

        resume(session.dir or "", key)
        paused = 0
    verdict = decide()
    if paused and verdict.decision not in ("allow", "leave") and session.dir is not None:
        from claudeguard.gate.freeze import resume

        resume(session.dir, key)  # not run now: nothing to hold still for
    if verdict.decision != "allow":
        return verdict
    if verdict.decided_by in ("human", "timeout") and seen is not None:
        # A human (or the deadline's allow) answered after a wait in which the boxes ran: held
        # again from here to the CLI's use, the call runs only where its paths still lead where
        # they led when it was asked.
        again = pause_for(session, tool, key)
        if again < 0 or _reached(session, call) != seen:
            return _changed(session, call, key, "leads elsewhere than when it was asked (a command of this "
                                                "session's changed it while the answer was awaited); denied: ask again")
    elif let_go and verdict.decided_by != "human":
        again = pause_for(session, tool, key)
        if again < 0 or (again > 0 and not runs_at_once(session, call, undecided())):
            return _changed(session, call, key, "changed while the guard looked at it (a command of this session's "
                                                "runs in the background); denied: try again")
    return verdict


def _changed(session: Session, call: Call, key: str, what: str) -> Decision:
    """The deny of a call whose path changed under the guard's two looks: the boxes let go, the
    audit row written beside the allow row decide_call wrote before."""
    from claudeguard.decision import Decision
    from claudeguard.gate.freeze import resume

    resume(session.dir or "", key)
    verdict = Decision("deny", f"claudeguard: a path of this {call.tool} call {what}", decided_by="default")
    try:
        from claudeguard.channel import audit as audit_log
        from claudeguard.decision import audit_row
        from claudeguard.policy.decide import summarize_call

        audit_log.record(audit_row(verdict, session_id=session.id, tool=call.tool, agent_type=call.agent_type,
                                   agent_id=call.agent_id, summary=summarize_call(call.tool, call.input), via="hook",
                                   input_digest=audit_log.input_digest(call.input)))
    except Exception:  # noqa: BLE001 - the audit log never blocks a decision
        pass
    return verdict


def _reached(session: Session, call: Call) -> tuple[str, ...] | None:
    """Where a file tool's paths lead now, links followed; None for any other tool, and in a
    session without the box (nothing of the agent's is held there: README, "The sandbox")."""
    from claudeguard.gate.freeze import FILE_TOOLS

    if call.tool not in FILE_TOOLS or session.dir is None:
        return None
    from claudeguard.plan.sandbox import session_box

    if session_box(session.dir) is None:
        return None
    from claudeguard.policy.protect import real, tool_paths

    return tuple(real(p) for p in tool_paths(call.tool, call.input, call.cwd, os.path.expanduser("~")))


def pause_for(session: Session, tool: str, call: str) -> int:
    """Before a file tool's call is looked at: stop the session's boxes, so that no command of the
    agent's changes its path between the check and the CLI's use (gate/freeze.py); the number
    stopped (0: no box, nothing running in one, not a file tool), -1 when they could not be seen
    stopped. Another tool's call lets go what earlier calls paused."""
    if session.dir is None:
        return 0
    from claudeguard.gate import freeze

    if tool not in freeze.FILE_TOOLS:
        if os.path.isdir(os.path.join(session.dir, freeze.PAUSED_DIR)):
            freeze.resume_others(session.dir)
        return 0
    from claudeguard.plan.sandbox import session_box

    if session_box(session.dir) is None:
        return 0
    return freeze.pause(session.dir, call)


def runs_at_once(session: Session, call: Call, undecided: str) -> bool:
    """Will this call run without waiting for a human: the policy or the mode allows it, or the
    CLI decides it alone (a read inside the folder)? Then its pause lasts until it ended."""
    from claudeguard.gate.decide import policy_decision
    from claudeguard.gate.modes import effective_mode, mode_allows

    mode = effective_mode(session, call.permission_mode, call.agent_type)
    quick = policy_decision(session, call.tool, call.input, call.agent_type, call.cwd, mode)
    if quick.decision == "none":
        quick = mode_allows(session, call.tool, call.input, mode, call.cwd) or quick
    return quick.decision == "allow" or (quick.decision == "none" and undecided == "leave")


def pre_tool_route(session: Session, call: Call) -> tuple[Undecided, bool]:
    """Who asks, at PreToolUse, about a call the policy does not decide alone: (what a policy
    "none" becomes, whether a policy "ask" is answered ``prompt``). The gate answers every call
    that needs a human explicitly (docs/notes/cli-surfaces.md section 6: silence lets another
    hook's allow skip the question); it stays silent only where the CLI decides without asking.

    - a terminal of ours with a person at it (``keyboard_first``): the CLI's own dialog, for the
      main agent and subagents alike (both CLIs draw a subagent's dialog, foreground or
      background, "from the X agent"); its PermissionRequest hook posts the request held, and the
      pty's router gives the keyboard its head start;
    - a subagent's call, or any call of a --bg session, elsewhere: the channel, from this hook (no
      dialog is seen; 2.1.197 -p denies a background subagent's call without asking anyone), or a
      deny under ``subagents.background = "deny"``;
    - the main agent in -p where the PermissionRequest hook is the asker (2.1.330 and later): the
      channel, from this hook: there a PreToolUse "ask" denies the call without firing it
      (measured on 2.1.330 and 2.1.332);
    - a host that answers the CLI's prompts over stdio (``host``: an IDE, an Agent SDK's
      ``can_use_tool``): its prompt, for every agent and a policy "ask" too (both CLIs send it the
      calls of subagents, foreground and background); the launcher gives the channel the call
      after ``idle_before_channel`` (shim/host_prompt.py);
    - otherwise the CLI's own asker (its prompt tool in -p, ours or the caller's; the dialog of a
      session without a pty of ours; a detached pty's dialog, which its router sends to the
      channel at once)."""
    from claudeguard.gate.decide import cli_asks, keyboard_first

    keyboard = keyboard_first(session)
    if not cli_asks(call.tool, call.input, call.permission_mode, call.cwd):
        return "leave", keyboard
    unseen = bool(call.agent_type) or session.snapshot.get("kind") == "background"
    if unseen and session.policy_spec.get("subagents", {}).get("background", "like-foreground") == "deny":
        return "deny", keyboard
    if session.snapshot.get("host"):
        return "prompt", True
    if keyboard:
        return "prompt", True
    if unseen:
        return "ask", False
    if session.snapshot.get("print_mode") and session.snapshot.get("asker") == "permission-request":
        return "ask", False
    return "prompt", False


def main(session_dir: str | None = None) -> int:
    try:
        text = sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        _emit(deny_output(None, f"claudeguard: cannot read hook input ({exc}); denied") or {})
        return 0
    out = run(text, session_dir=session_dir)
    if out is not None:
        _emit(out)
    return 0
