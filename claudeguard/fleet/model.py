"""The fleet's records: the published view of a waiting request, an answer, the owner's verdict
on an answer, how a request ended, and the hash that ties an answer to the exact call.

Plain dicts on the wire (JSON); the TypedDicts below say their fields for mypy only.
"""

from __future__ import annotations

import json
import os
import pwd
import time
from hashlib import sha256

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Literal, TypedDict

    from claudeguard.channel.model import Request

    class RequestView(TypedDict, total=False):
        """What the owner publishes for a waiting request: ``pending --json``'s fields, plus
        ``machine``, ``user``/``uid`` (whose guard asks), ``created``/``deadline`` (epoch s,
        the owner's clock) and ``call_sha256``."""
        v: int
        id: str
        machine: str
        user: str
        uid: int
        session_id: str
        agent_type: str | None
        agent_id: str | None
        tool: str
        input: dict[str, Any] | None  # None when over INPUT_MAX (then input_truncated and input_preview)
        input_truncated: bool
        input_preview: str
        summary: str
        cwd: str
        kind: str
        choices: list[str] | None
        cli_short_id: str | None
        background: bool  # a Claude Code background session's (the desk's RequestItem has it too)
        rule: str | None  # the rule that asked, and its file:line (None: the CLI would have asked)
        rule_source: str | None
        prompt: str | None  # the session's prompt, when the service gives it
        created: float
        deadline: float
        call_sha256: str
        age_s: float  # added by the lister, in its own clock
        deadline_s: float

    class Sender(TypedDict, total=False):
        """What the approver's client says of itself (its claim; the ACL user is the proof)."""
        machine: str
        uid: int
        user: str
        pid: int
        command: str

    class FleetAnswer(TypedDict, total=False):
        """One entry of an approver's answer stream (field ``a``, JSON)."""
        v: int
        request_id: str
        machine: str  # the owner it is for
        call_sha256: str
        decision: Literal["allow", "deny"]
        scope: str
        message: str | None
        choice: str | None
        valid_until_ms: int  # Redis's clock (TIME): the owner does not apply it later
        sender: Sender
        vouched: dict[str, Any] | None  # whom the sender relays: the desk's {"via": "desk", "uid", "browser_session"}

    class _Relayed(TypedDict, total=False):
        browser_session: str  # the desk's browser session (``via`` "desk": answered on a desk, sent by its service)

    class AnsweredBy(_Relayed):
        """Who answered, as the owner records it: ``acl_user`` from the stream's key (enforced by
        the ACL), the rest as the approver's client reported it under that user (``via`` "desk"
        and ``browser_session`` when its client is a service relaying its desk's answer)."""
        via: Literal["fleet", "desk"]
        acl_user: str
        machine: str
        uid: int | None
        user: str | None
        pid: int | None
        ref: str  # "<acl user>/<stream entry id>": this one answer

    class AnswerFields(TypedDict):
        """What ``apply_answer`` delivers into the channel."""
        decision: Literal["allow", "deny"]
        scope: Literal["once", "agent", "session"]
        message: str | None
        choice: str | None

    class Outcome(TypedDict, total=False):
        """``apply_answer``'s result: ``applied`` True only when the waiting call will take this
        answer; else ``reason`` (one line) and, when known, who won and when. ``refused``: the
        owner judged the answer itself and will not apply it (the request still waits), said to
        the answerer at once."""
        applied: bool
        refused: bool
        reason: str
        winner: str
        at: float

    class Done(TypedDict, total=False):
        """How a request ended, as the service tells ``FleetLink.request_done``."""
        status: Literal["answered", "timeout", "withdrawn", "keyboard", "error"]
        decision: str | None
        scope: str | None
        by: str | dict[str, Any] | None  # the channel Answer's ``by``, or a structured answered_by
        at: float

    class LinkStatus(TypedDict):
        """``FleetLink.status()``: for ``service status`` and ``doctor``."""
        machine: str
        redis: str
        connected: dict[str, bool]  # "pub", "inbox"
        last_error: str | None
        pending: int
        applied: int
        refused: int
        connects: int
        failures: int

    class Verdict(TypedDict, total=False):
        """One entry of ``m:<machine>:results``: the owner's word on one answer."""
        answer: str  # the answer's ref
        request_id: str
        applied: bool
        message: str
        winner: str | None
        at: float

    ApplyAnswer = Callable[[str, AnswerFields, AnsweredBy], Outcome]

VERSION = 1
INPUT_MAX = 256 * 1024  # a published input larger than this is replaced by a preview (the hash covers it all)
PREVIEW = 4096


def canonical_json(value: Any) -> str:
    """The one serialisation both ends hash: sorted keys, no spaces, UTF-8 as is (the audit log's
    ``input_digest`` uses the same)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def call_sha256(tool: str, tool_input: dict[str, Any]) -> str:
    """SHA-256 (hex) of the exact call: ``{"input": <input>, "tool": <tool>}`` as canonical JSON.
    The owner applies an answer only if the hash it carries is the one of the call it holds."""
    return sha256(canonical_json({"input": tool_input, "tool": tool}).encode()).hexdigest()


def request_view(request: Request, machine: str, prompt: str | None = None) -> RequestView:
    """The view of a channel request that the owner publishes (see ``RequestView``); its fields
    are also the desk's ``RequestItem`` ones, but ``local`` and ``forever_file``."""
    user = user_name()
    extra = request.extra or {}
    view: RequestView = {
        "v": VERSION, "id": request.id, "machine": machine, "user": user, "uid": os.getuid(),
        "session_id": request.session_id, "agent_type": request.agent_type, "agent_id": request.agent_id,
        "tool": request.tool, "input": request.input, "summary": request.summary, "cwd": request.cwd,
        "kind": request.kind, "choices": request.choices, "cli_short_id": extra.get("cli_short_id"),
        "background": bool(extra.get("cli_short_id") or extra.get("background")), "rule": extra.get("rule"),
        "rule_source": extra.get("rule_source"), "prompt": prompt[:200] if isinstance(prompt, str) else None,
        "created": request.created, "deadline": request.deadline,
        "call_sha256": call_sha256(request.tool, request.input),
    }
    encoded = canonical_json(request.input)
    if len(encoded.encode()) > INPUT_MAX:
        view["input"] = None
        view["input_truncated"] = True
        view["input_preview"] = encoded[:PREVIEW]
    return view


_user_names: dict[int, str] = {}


def user_name() -> str:
    """This process's login name (its uid when it has none), looked up once."""
    uid = os.getuid()
    if uid not in _user_names:
        try:
            _user_names[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _user_names[uid] = str(uid)
    return _user_names[uid]


def done_from_answer(answer: Any, at: float | None = None) -> Done:
    """A ``Done`` from the channel's ``Answer`` the waiting call got (``decided_by`` human,
    timeout, withdrawn, keyboard, error), for ``FleetLink.request_done``."""
    decided_by = getattr(answer, "decided_by", None)
    when = time.time() if at is None else at
    if answer is None or decided_by == "keyboard":
        return {"status": "keyboard", "at": when}
    status = {"human": "answered", "timeout": "timeout", "withdrawn": "withdrawn"}.get(str(decided_by), "error")
    done: Done = {"status": status, "at": when}  # type: ignore[typeddict-item]  # status is one of the Literal's
    if status == "answered":
        done["decision"], done["scope"], done["by"] = answer.decision, answer.scope, answer.by
    return done


def ref_of(by: Any) -> str | None:
    """The answer ref in a ``Done.by``: a structured answered_by's ``ref``, or ``ref=...`` in the
    text ``by_text`` wrote into the channel."""
    if isinstance(by, dict):
        ref = by.get("ref")
        return ref if isinstance(ref, str) else None
    if isinstance(by, str):
        for word in by.split():
            if word.startswith("ref="):
                return word[4:]
    return None


def by_text(by: AnsweredBy) -> str:
    """``answered_by`` as the channel's one-line ``by`` (at most 200 characters, which every
    valid name fits): ``fleet:<acl user>@<machine> uid=<uid> ref=<ref>``."""
    return f"fleet:{by['acl_user']}@{by['machine']} uid={by['uid']} ref={by['ref']}"


def who(by: Any, machine: str) -> str:
    """A ``Done.by`` (or ``AnsweredBy``) for a person: ``cg-alice@laptop (uid 1000)`` for a fleet
    answer (a desk's too), ``claudeguardctl approve on ci-7`` for a local one."""
    if isinstance(by, dict) and by.get("acl_user") is not None:
        return f"{by.get('acl_user')}@{by.get('machine')} (uid {by.get('uid')})"
    if isinstance(by, str) and by.startswith("fleet:"):
        name, _, rest = by[len("fleet:"):].partition(" ")
        uid = next((w[4:] for w in rest.split() if w.startswith("uid=")), "?")
        return f"{name} (uid {uid})"
    if isinstance(by, dict):
        parts = [str(by[k]) for k in ("command", "user", "uid") if by.get(k) is not None]
        return f"{' '.join(parts) or 'someone'} on {machine}"
    return f"{by or 'someone'} on {machine}"


def clock(at: float | None) -> str:
    """An epoch time as ``HH:MM:SSZ`` (UTC), or ``?``."""
    if not isinstance(at, (int, float)):
        return "?"
    return time.strftime("%H:%M:%SZ", time.gmtime(at))


def describe_done(done: Done, machine: str) -> str:
    """Why an answer to a request that ended was not applied, in one line."""
    at = clock(done.get("at"))
    status = done.get("status")
    if status == "answered":
        return f"already answered by {who(done.get('by'), machine)} at {at}"
    if status == "timeout":
        return f"expired at {at} (no answer before its deadline)"
    if status == "keyboard":
        return f"already answered at the keyboard on {machine} at {at}"
    if status == "withdrawn":
        return f"withdrawn at {at} (its caller stopped waiting)"
    return f"ended at {at}: its approval channel on {machine} was lost"
