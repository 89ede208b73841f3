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
    from claudeguard.decision import Permission, Scope
    from claudeguard.gate.call import Asking, Call
    from claudeguard.policy.decide import Policy
    from claudeguard.policy.decide import SourcedRule

# Tools the CLI runs without asking in every mode (the reading ones: inside the working folder).
# Measured in -p, default mode, no hook (2.1.197, 2.1.330): each ran unasked, or failed on its own
# input, never "needs approval"; WebSearch, Monitor (a shell command: the CLI's Bash checks) and
# Workflow asked. The UI tools (AskUserQuestion, the plan mode ones) have dialogs of their own.
NO_PERMISSION_TOOLS = frozenset(
    "Read Glob Grep LS NotebookRead TodoWrite TodoRead BashOutput TaskOutput ToolSearch "
    "ListMcpResourcesTool ReadMcpResourceTool Skill SlashCommand Agent Task TaskCreate TaskGet TaskList "
    "TaskUpdate TaskStop KillShell CronCreate CronDelete CronList EnterWorktree ExitWorktree ListAgents "
    "ReportFindings ScheduleWakeup SendMessage AskUserQuestion EnterPlanMode ExitPlanMode".split()
)
# ... those of them that read a path: outside the working folder the CLI asks (measured on 2.1.197,
# 2.1.330: "Claude requested permissions to read from /etc/hostname").
READING_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})


def _inside(path: str, cwd: str) -> bool:
    full = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    return full == cwd or full.startswith(cwd.rstrip("/") + "/")


# Programs the CLI runs unasked when they only read inside the working folder (a small part of
# its own read-only list; `cd` within the folder too). A command made of these alone, with no
# redirection, no write and every operand inside the folder, is left to the CLI, as a Read
# there is. A program left out here is asked about: where this list is wrong, the CLI asks and
# the guard's asker answers, so it costs a question, never a run.
QUIET_PROGRAMS = frozenset(
    "cd pwd echo printf ls cat head tail wc grep rg true false date whoami which stat file sort uniq cut tr "
    "basename dirname realpath".split()
)


def _quiet_bash(command: object, cwd: str) -> bool:
    """Does the CLI run this Bash command unasked (see ``QUIET_PROGRAMS``)?"""
    from claudeguard.policy.bash.walk import split_command

    split = split_command(command)
    if not split.ok or split.writes or not split.invocations:
        return False
    from claudeguard.gate.reach import recursive_read, stays_inside

    for inv in split.invocations:
        if inv.changes or inv.unknown or not inv.words or inv.words[0] not in QUIET_PROGRAMS:
            return False
        operands = [word for word in inv.words[1:] if not word.startswith("-")]
        # Globs expanded, links followed, a recursive read walked (gate/reach.py): the CLI judges
        # the words as written.
        if not stays_inside(operands, cwd, recursive=recursive_read(inv.words)):
            return False
    return True


def cli_asks(tool: str, tool_input: dict[str, Any], permission_mode: str | None, cwd: str) -> bool:
    """Would the CLI stop to ask about this call if no hook answered? False only where it surely
    decides alone (a tool it never asks about, a read inside the working folder, a plain reading
    command there, an edit there in acceptEdits, anything in bypassPermissions): there the gate may
    stay silent, as another hook's allow changes nothing. Everything else, a tool not known here
    and any other Bash command included, is asked: a PreToolUse "ask" makes the CLI ask even where
    its own rules would allow (measured on 2.1.197, 2.1.330, 2.1.332), and in dontAsk it denies
    what it would have asked about."""
    from claudeguard.policy.rules import EDIT_TOOLS

    if permission_mode == "bypassPermissions":
        return False  # the CLI allows everything; lockdown refuses the mode before the session starts
    if tool in NO_PERMISSION_TOOLS:
        if tool not in READING_TOOLS:
            return False
        path = tool_input.get("file_path") or tool_input.get("notebook_path") or tool_input.get("path")
        if not isinstance(path, str) or not path:
            return False
        from claudeguard.gate.reach import stays_inside

        # Through a link the repository ships, a path inside reads outside: asked like the direct one.
        return not stays_inside([path], cwd, recursive=tool in ("Glob", "Grep", "LS"))
    if tool in EDIT_TOOLS and permission_mode == "acceptEdits":
        path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
        return not _inside(path, cwd)
    if tool == "Bash":
        return not _quiet_bash(tool_input.get("command"), cwd)
    return True


def keyboard_first(session: Session) -> bool:
    """Does a call the policy asks about show the CLI's own dialog at the keyboard first? In a
    session on our pty with a person's terminal (``pty`` and ``interactive``), not -p, not a --bg
    session: its dialogs are routed keyboard first (shim/dialogs/)."""
    snap = session.snapshot
    return bool(snap.get("pty") and snap.get("interactive") and not snap.get("print_mode")
                and snap.get("kind") != "background")


def prompt_reason(session: Session, tool: str, rule: str | None, source: str | None) -> str:
    """What the CLI's dialog shows under "Hook PreToolUse requires confirmation": why, and where
    else it can be answered."""
    idle = session.approval.get("idle_before_channel")
    why = (f"claudeguard: {tool} asks a human: {rule} ({source})." if rule
           else f"claudeguard: no rule decides this {tool} call.")
    if session.snapshot.get("host"):  # the IDE's or the SDK program's own prompt (shim/host_prompt.py)
        later = f"after {float(idle):g} s without an answer" if idle else "at once"
        return f"{why} Answer here, or in the approval channel {later} (claudeguardctl console)."
    if not keyboard_first(session):
        return why
    later = f"after {float(idle):g} s without a key" if idle else "at once"
    return f"{why} Answer here, or in the approval channel {later} (claudeguardctl console)."


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


def policy_decision(session: Session, tool: str, tool_input: dict[str, Any], agent_type: str | None,
                    cwd: str, mode: str | None = None) -> Decision:
    from claudeguard.gate.settings_check import unchecked
    from claudeguard.policy.decide import decide, policy_from_spec

    changed = unchecked(session.dir)  # settings the CLI may be re-reading, not judged by the watch yet
    if changed is not None:
        return Decision("deny", f"claudeguard: {changed} changed during the session and the guard has not checked it; "
                        f"denied.", rule="settings changed", source="claudeguard (settings watch)")
    policy = policy_from_spec(session.policy_spec)
    verdict = decide(policy, tool, tool_input, agent_type=agent_type, cwd=cwd, extra=_extra_rules(session, agent_type),
                     mode=mode)
    from claudeguard.policy.protect import is_bash_like

    if verdict.decision == "deny" or is_bash_like(tool, tool_input):
        return verdict  # a command makes the CLI read no memory file: nothing more on the Bash path
    if tool in ("Skill", "SlashCommand"):
        return _skill_imports(session, policy, tool_input, agent_type, cwd) or verdict
    held = bool(session.snapshot.get("memory_rules_held"))
    if not held or policy.asks_reading():
        return _memory_imports(session, policy, tool, tool_input, agent_type, cwd, held) or verdict
    return verdict


MEMORY_SOURCE = "claudeguard (memory imports: the CLI reads them by itself, with no hook)"


def _memory_imports(session: Session, policy: Policy, tool: str, tool_input: dict[str, Any], agent_type: str | None,
                    cwd: str, held: bool) -> Decision | None:
    """A deny for a file tool's call that makes the CLI read the memory files of a directory
    below the session's cwd, when what one of them imports is a path the policy keeps from this
    agent's reading: denied, on a CLI that does not hold its own Read rules on memory imports
    (the snapshot's ``memory_rules_held``; a denied memory file too), and asked, on any (the
    CLI gets no ask rules); policy/memory_imports.py. The cwd's own are read again too: a rule
    file written since the start (``.claude/rules/*.md`` with ``paths:``) is loaded when a file
    it names is reached."""
    from claudeguard.config.trust import not_trusted
    from claudeguard.policy.memory_imports import between, kept_import, memory_files
    from claudeguard.policy.protect import tool_paths

    root = str(session.snapshot.get("cwd") or cwd)
    home = os.path.expanduser("~")
    dirs = [root, *(d for path in tool_paths(tool, tool_input, cwd, home) for d in between(root, path))]
    files = not_trusted([f for d in dict.fromkeys(dirs) for f in memory_files(d)])
    if not files:
        return None
    found = kept_import(policy, files, [agent_type], cwd, home, held=held)
    if found is None:
        return None
    return Decision("deny", f"claudeguard: {found.line_text()}; this call would have Claude Code read it into the "
                    f"conversation by itself, asking nobody: denied.", rule="memory import", source=MEMORY_SOURCE)


def _skill_imports(session: Session, policy: Policy, tool_input: dict[str, Any], agent_type: str | None,
                   cwd: str) -> Decision | None:
    """A deny for a Skill call whose skill or command file includes (``@path``) a file the
    policy denies or asks about reading for this agent: the CLI reads those as the skill is
    invoked, asking nobody (a deny rule holds there on every CLI measured, an ask rule on none:
    the CLI is given none)."""
    from claudeguard.config.trust import not_trusted
    from claudeguard.policy.memory_imports import first_denied, read_denied, skill_files

    name = tool_input.get("skill") or tool_input.get("command")
    if not isinstance(name, str):
        return None
    home = os.path.expanduser("~")
    root = str(session.snapshot.get("cwd") or cwd)
    files = not_trusted(skill_files(name.split(None, 1)[0] if name.strip() else "", root, home))
    if not files:
        return None
    mine = os.path.join(home, ".claude", "")
    # A skill's includes are taken from the cwd (measured on 2.1.197 and 2.1.332); its own dir too.
    bases = tuple(dict.fromkeys([root, cwd, *(os.path.dirname(f) for f in files)]))
    theirs = [f for f in files if not f.startswith(mine)]
    found = (first_denied(theirs, read_denied(policy, [agent_type], cwd, home), home, bases=bases)
             or first_denied([f for f in files if f.startswith(mine)],  # the user's own: a deny only
                             read_denied(policy, [agent_type], cwd, home, ("deny",)), home, bases=bases))
    if found is None:
        return None
    return Decision("deny", f"claudeguard: {found.line_text()}; this skill would have Claude Code read it into the "
                    f"conversation by itself, asking nobody: denied.", rule="skill import", source=MEMORY_SOURCE)


def decide_call(session: Session, call: Call, asking: Asking) -> Decision:
    """Who answers ``call``, and with what: the policy and the session's grants first (with the
    mode the agent asked for), then, for a call that needs a human, ``asking`` says who asks.

    The answer is ``allow`` | ``deny``; ``prompt`` (PreToolUse answers "ask": the CLI's own asker
    asks; for a policy ``ask`` when ``asking.keyboard``, a session whose dialogs are routed
    keyboard first, and for a policy "none" when ``asking.undecided`` is "prompt"); ``leave`` (no
    rule decides and ``undecided`` is "leave": the CLI decides without asking) or ``keyboard``
    (answered at the keyboard first, or the caller went away). Every allow and deny is audited
    here, once; ``prompt``, ``leave`` and ``keyboard`` are not (whoever asks audits)."""
    started = time.monotonic()
    decision = _rules_decision(session, call)
    if decision.decision == "allow" and asking.unseen_by_hook:
        # The hook never saw this call (the service was unreachable): which agent asks is
        # unknown, and an agent's own rules may forbid what the main agent may do, so a human
        # decides (the timeout's default applies if nobody does).
        verdict = ask_human(session, call, asking, decision.rule, decision.source)
        if verdict.decision == "keyboard":
            return verdict
    elif decision.decision in PERMISSIONS:
        verdict = Decision(decision.decision, decision.reason, rule=decision.rule, source=decision.source)
    elif (decision.decision == "ask" and asking.keyboard) or (decision.decision == "none"
                                                              and asking.undecided == "prompt"):
        # Nothing posted, nothing audited here: whoever the CLI asks (its dialog, whose
        # PermissionRequest hook posts the request held for the keyboard's head start; its
        # prompt tool) posts and audits the one request this call makes.
        return Decision("prompt", prompt_reason(session, call.tool, decision.rule, decision.source),
                        rule=decision.rule, source=decision.source, decided_by="default")
    elif decision.decision == "none" and asking.undecided == "leave":
        return Decision("leave", "no rule decides; left to Claude Code", decided_by="default")
    elif decision.decision == "none" and asking.undecided == "deny":
        verdict = Decision("deny", f"claudeguard: {call.tool} needs approval and subagents.background = \"deny\"",
                           decided_by="default")
    else:
        if asking.delay_s > 0 and not _head_start(asking.delay_s, asking.still_wanted):
            return Decision("keyboard", "answered at the keyboard", decided_by="keyboard")
        verdict = ask_human(session, call, asking, decision.rule, decision.source)
        if verdict.decision == "keyboard":
            if asking.held and verdict.request_id:
                verdict.waited_s = round(time.monotonic() - started, 3)
                keyboard_audit(session, verdict, call, asking.via, _ask_rule(decision))
            return verdict
    verdict.waited_s = round(time.monotonic() - started, 3)
    audit(session, verdict, tool=call.tool, tool_input=call.input, agent_type=call.agent_type,
          agent_id=call.agent_id, via=asking.via, cwd=call.cwd, ask_rule=_ask_rule(decision))
    return verdict


def _rules_decision(session: Session, call: Call) -> Decision:
    """What the rules say of ``call``: the session's grants and policy, then the mode the agent
    asked for, then the box (a Bash command leaving the sandbox is asked about at least)."""
    from claudeguard.gate.modes import effective_mode, mode_allows

    # The CLI runs in a mode that allows no more than `default` (plan/argv.py): what the asked-for
    # mode allows, for this agent, the guard allows here, after the agent's own policy.
    mode = effective_mode(session, call.permission_mode, call.agent_type)
    decision = policy_decision(session, call.tool, call.input, call.agent_type, call.cwd, mode)
    if decision.decision == "none":
        decision = mode_allows(session, call.tool, call.input, mode, call.cwd) or decision
    if call.tool == "Bash":
        from claudeguard.gate.box import leaving

        decision = leaving(session, call.tool, call.input, decision)  # leaving the sandbox: asked at least
    return decision


def _ask_rule(decision: Decision) -> tuple[str | None, str | None] | None:
    """The ask rule that sent a call to a human, for its audit row (an allow rule never overrides it)."""
    return (decision.rule, decision.source) if decision.decision == "ask" else None


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


def ask_human(session: Session, call: Call, asking: Asking, rule: str | None, source: str | None) -> Decision:
    """Post ``call`` to the approval channel and wait for a human, the deadline (its stated
    default) or, for a held request, the keyboard; a human's answer beyond once becomes grants."""
    from claudeguard import channel
    from claudeguard.policy.decide import grant_rules_for_call, summarize_call

    tool, tool_input, agent_type, cwd = call.tool, call.input, call.agent_type, call.cwd
    held, still_wanted = asking.held, asking.still_wanted
    approval = session.approval
    timeout = float(approval.get("timeout") or APPROVAL_TIMEOUT_S)  # a snapshot written without one
    on_timeout: Permission = "allow" if approval.get("on_timeout") == "allow" else "deny"
    extra = {"via": asking.via, "tool_use_id": call.tool_use_id, "rule": rule, "rule_source": source,
             "guard_pid": session.snapshot.get("pid")}
    if session.snapshot.get("cli_short_id"):  # a --bg session: the id `claude agents` shows
        extra["cli_short_id"] = session.snapshot["cli_short_id"]
    pending = channel.post(
        session_id=session.id, agent_type=agent_type, agent_id=call.agent_id, tool=tool, input=tool_input,
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


KEYBOARD_WORD_S = 3.0  # how long a held request's waiter waits for the router's word on why it ended
KEYBOARD_DIR = "keyboard"  # shim/dialogs/handshake.py writes <session dir>/keyboard/<request id>.json


def keyboard_word(session: Session, request_id: str, wait_s: float = KEYBOARD_WORD_S) -> dict[str, Any] | None:
    """What the pty's router wrote when it dropped a held request (why, and what the keyboard
    chose; shim/dialogs/handshake.py), taken once; None when it wrote nothing within ``wait_s``
    (its launcher is gone, or something else withdrew the request)."""
    from claudeguard.files import read_json

    if not session.dir or not request_id.replace("-", "").isalnum():
        return None
    path = os.path.join(session.dir, KEYBOARD_DIR, f"{request_id}.json")
    end = time.monotonic() + wait_s
    while True:
        try:
            word = read_json(path)
        except (OSError, ValueError):
            word = None
        if isinstance(word, dict):
            try:
                os.unlink(path)
            except OSError:
                pass
            return word
        if time.monotonic() >= end:
            return None
        time.sleep(0.1)


# The option of the CLI's dialog that stands for "don't ask again" for this call (WebFetch: "Yes,
# and don't ask again for example.com"; an MCP tool's; 2.1.197's "Yes, and always allow access to
# DIR"): a session grant of the call's own rules, as an approver's --scope session gives. The
# dialog a hook's "ask" brings for Bash has only Yes and No on 2.1.197, 2.1.330 and 2.1.332; an
# edit's second option switches the CLI to acceptEdits, which the hook then reads off each event.
KEYBOARD_SESSION_CHOICE = ("Yes, and don't ask again", "Yes, and always allow")


RAN_WAIT_S = 5.0  # how long a call's end waits for the router's word on its dialog's request


def ran_while_asked(session: Session, tool: str, tool_input: dict[str, Any], agent_id: str | None) -> None:
    """At a call's end in a pty session: a request of its dialog still open (held or in the
    channel) once the router had time to say the keyboard answered it means the dialog was
    answered Yes by neither the keyboard nor the channel: input pushed into the CLI's terminal by
    a program of its session, or another hook. Its waiter is told (``keyboard_audit`` writes the
    event: never a keyboard row) and the request withdrawn: nobody may answer a call that ran."""
    from claudeguard.channel.audit import input_digest
    from claudeguard.channel.answers import list_pending
    from claudeguard.channel.requests import tell_waiter
    from claudeguard.files import write_atomic

    digest = input_digest(tool_input)

    def open_ones() -> list[str]:
        try:
            listed = list_pending(session.id, held=True) + list_pending(session.id)
        except Exception:  # noqa: BLE001 - an unreadable channel: nothing to find
            return []
        return [r.id for r in listed if (r.extra or {}).get("via") == "dialog" and r.tool == tool
                and r.agent_id == agent_id and input_digest(r.input) == digest]

    if not open_ones():
        return
    end = time.monotonic() + RAN_WAIT_S
    while (left := open_ones()) and time.monotonic() < end:
        time.sleep(0.1)
    for rid in left:
        if session.dir and rid.replace("-", "").isalnum():
            directory = os.path.join(session.dir, KEYBOARD_DIR)
            try:
                os.makedirs(directory, mode=0o700, exist_ok=True)
                import json

                write_atomic(os.path.join(directory, f"{rid}.json"), json.dumps({"reason": "ran"}))
            except OSError:
                pass
        try:
            tell_waiter(rid, "drop")
        except Exception:  # noqa: BLE001 - its waiter also ends with its deadline
            pass


def keyboard_audit(session: Session, verdict: Decision, call: Call, via: str,
                   ask_rule: tuple[str | None, str | None] | None) -> None:
    """The one audit row of a call whose dialog was answered before the channel did: ``keyboard``
    only when the router read the answering keys from the person's terminal; a dialog that closed
    with no key typed there is an event, never a keyboard answer (a program that pushed input into
    the CLI's terminal, another hook, the CLI cancelling the call). A "don't ask again" option
    picked at the keyboard grants the call for the session (KEYBOARD_SESSION_CHOICE)."""
    tool, tool_input, agent_type, agent_id, cwd = call.tool, call.input, call.agent_type, call.agent_id, call.cwd
    try:
        word = keyboard_word(session, verdict.request_id or "")
        if word is None or word.get("reason") not in ("keyboard", "no-key", "ran"):
            return  # the screen path asked, the CLI exited: no answer to record
        from claudeguard.channel import audit as audit_log
        from claudeguard.policy.decide import summarize_call

        common: dict[str, Any] = {
            "session_id": session.id, "agent_type": agent_type, "agent_id": agent_id, "tool": tool,
            "summary": summarize_call(tool, tool_input), "input_digest": audit_log.input_digest(tool_input),
            "request_id": verdict.request_id, "via": via,
        }
        decision = word.get("decision")
        if word["reason"] == "ran":
            audit_log.record({"event": "dialog-answered-without-key", **common, "message": (
                "the call ran while its request waited: its dialog was answered Yes by neither a key at the "
                "terminal nor the channel (input pushed into the CLI's terminal by a program of its session, or "
                "another hook)")})
            return
        if word["reason"] == "no-key":
            audit_log.record({"event": "dialog-closed-without-key", **common, "message": (
                "the dialog closed with no key typed at the terminal and no answer from the channel: not the "
                "keyboard (the CLI cancelled the call, another hook answered it, or a program typed into the "
                "CLI's terminal)")})
            return
        who = {"uid": os.getuid(), "pid": session.snapshot.get("pid"), "tty": word.get("tty"),
               "command": "keyboard" if word.get("attached", True) else "stdin of a detached session"}
        if decision not in PERMISSIONS:
            audit_log.record({"event": "keyboard", **common, "answered_by": who,
                              "message": "answered at the keyboard with keys that pick no option we know"})
            return
        choice = str(word.get("choice") or "")
        scope: Scope = "once"
        if decision == "allow" and choice.startswith(KEYBOARD_SESSION_CHOICE):
            from claudeguard.policy.decide import grant_rules_for_call

            rules = grant_rules_for_call(tool, tool_input, cwd=cwd)
            if rules:
                add_grants(session, rules, kind="allow", scope="session", agent_type=agent_type,
                           request_id=verdict.request_id)
                scope = "session"
        row = Decision(decision, "answered at the keyboard", rule=verdict.rule, source=verdict.source,
                       decided_by="keyboard", scope=scope, waited_s=verdict.waited_s,
                       request_id=verdict.request_id)
        audit_log.record(audit_row(
            row, session_id=session.id, agent_type=agent_type, agent_id=agent_id, tool=tool,
            summary=common["summary"], input_digest=common["input_digest"], via=via, choice=word.get("choice"),
            answered_by=who,
            **({"ask_rule": ask_rule[0], "ask_source": ask_rule[1]} if ask_rule else {}),
        ))
    except Exception:  # noqa: BLE001 - the audit log never blocks a decision
        pass


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
