"""The desk's seam: what the page shows and changes, as one small Protocol (``DeskSource``).

The desk's HTTP server (``desk.server``) asks a source for everything; it never touches the
channel, the session files, the audit log or the config itself. ``desk.local.LocalSource`` is the
source over the runtime dir and the log dir that works without the resident service (the
standalone ``python -m claudeguard.desk`` and the tests); the service implements the same methods
(phase 2: over its own registry, its answer path and the fleet). Every record crossing the seam
is a TypedDict of plain JSON values, so a source may live in another process.

A method that cannot do what it is asked raises ``claudeguard.errors.GuardError`` (or a
subclass) with one line for the person at the page; that line is shown as it is.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypedDict

Decision = Literal["allow", "deny"]
Scope = Literal["once", "agent", "session", "forever"]


class Provenance(TypedDict):
    """Who gave an answer on the desk: carried with every change the desk makes."""

    via: Literal["desk"]
    uid: int  # the user the desk serves (the service's uid)
    browser_session: str  # the public id of the cookie session (never its secret)


class RequestItem(TypedDict, total=False):
    """One waiting request as the source knows it (``claudeguardctl pending --json`` plus what
    the page needs); the desk adds how the call will run (``desk.views``)."""

    id: str
    session_id: str
    machine: str  # where the call waits (the fleet's label; this host's name locally)
    local: bool  # waits on this machine: only then is ``forever`` offered
    agent_type: str | None  # None: the main agent
    agent_id: str | None
    background: bool  # the session is a Claude Code background session (--bg, agent view)
    kind: str  # "permission" or "dialog"
    choices: list[str] | None  # a dialog's options
    tool: str
    input: dict[str, Any]
    summary: str
    cwd: str
    created: float  # epoch seconds
    deadline: float  # epoch seconds
    prompt: str | None  # the session's prompt (first words)
    rule: str | None  # the rule that asked (None: no rule decided; the CLI would have asked)
    rule_source: str | None  # its file:line
    short_id: str | None  # a background session's id in `claude agents`
    forever_file: str | None  # where `forever` writes (None: not offered)


class AnswerResult(TypedDict):
    line: str  # one line for the page, e.g. "3f9c2a... approved (session)"
    rules: list[str]  # the grant rules the answer added (empty for once)
    file: str | None  # the config file written (forever)


class FleetView(Protocol):
    """The fleet as the desk needs it (the guard service provides one when ``[fleet]`` is set;
    ``LocalSource(fleet=...)`` takes a callable that returns it, or None while there is none)."""

    def requests(self) -> list[RequestItem]:
        """The other machines' waiting requests (``local: false``, ``machine`` set, ``forever_file``
        None), each with ``call_sha256`` as ``pending --fleet --json`` has it. Called at every
        refresh while a page is open (at least every 5 s): from memory, not a round trip."""
        ...

    def version(self) -> int:
        """A number that changes whenever ``requests()`` would (a request came, went or was
        answered on any machine): the desk looks at it 4 times a second and refreshes on a change."""
        ...

    def answer(self, machine: str, request_id: str, decision: Decision, scope: Scope, message: str | None,
               choice: str | None, answered_by: Provenance) -> AnswerResult:
        """Send one answer to the request ``request_id`` of ``machine`` through the fleet (never
        ``forever``); the member that holds the request applies it through its channel, with
        ``answered_by`` (plus the fleet's own fields) in its audit row. NotFoundError when it is
        gone or answered already, GuardError (one line) when the fleet refuses or cannot be reached."""
        ...


class DeskSource(Protocol):
    """What the desk reads and changes. Implementations must be thread-safe: the server calls
    them from a thread per HTTP request and from its one change-watching thread."""

    machine: str

    def requests(self) -> list[RequestItem]:
        """This machine's waiting requests (not the held ones: a dialog's head start at the
        keyboard is not over yet). Returning the very same list object as the last call says
        "nothing changed": the desk then reuses the JSON it made of it."""
        ...

    def fleet_requests(self) -> list[RequestItem] | None:
        """Requests of the other machines of the fleet; None when no fleet is configured."""
        ...

    def answer(self, request_id: str, decision: Decision, scope: Scope, message: str | None,
               choice: str | None, answered_by: Provenance) -> AnswerResult:
        """Deliver one answer (the first answer wins; a second, or an answer to an expired or
        unknown id, raises NotFoundError). ``forever`` also writes the rule into
        ``forever_file``; refused for a request of another machine."""
        ...

    def answer_remote(self, machine: str, request_id: str, decision: Decision, scope: Scope, message: str | None,
                      choice: str | None, answered_by: Provenance) -> AnswerResult:
        """Deliver one answer to a request of another machine of the fleet (``fleet_requests``);
        refused (GuardError) without a fleet, and for ``forever``."""
        ...

    def sessions(self) -> list[dict[str, Any]]:
        """The ``claudeguardctl ps --json`` rows (``watchdog.status.list_sessions``)."""
        ...

    def stop_session(self, session_id: str, answered_by: Provenance) -> str:
        """Stop a stalled session's CLI (its process tree); one line saying what was done.
        A session that is not stalled is refused."""
        ...

    def audit_rows(self) -> list[dict[str, Any]]:
        """The audit log's events, oldest first."""
        ...

    def suggestions(self, since_s: float | None) -> dict[str, Any]:
        """``audit --suggest --json`` over the last ``since_s`` seconds (None: the whole log), each
        rule with ``preview``: the past calls it would have decided; plus ``file``, the target."""
        ...

    def apply_suggestion(self, rule: str, kind: Decision, since_s: float | None, answered_by: Provenance) -> str:
        """Write one suggested rule into the target file (comments kept); refused unless it is
        one of ``suggestions(since_s)``'s rules of that kind. One line saying what was done."""
        ...

    def wait_change(self, timeout: float) -> bool:
        """Block until something the page shows may have changed (True) or ``timeout`` passed
        (False). A false alarm costs one refresh; a missed change waits for the next refresh
        the desk makes on its own every few seconds."""
        ...

    def close(self) -> None:
        """Release what the source holds (called once, when the desk stops)."""
        ...
