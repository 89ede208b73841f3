"""The two records of the approval channel: a pending ``Request`` and its ``Answer``.

Plain classes with no I/O, shared by the waiting side (``requests.Pending``), the answering
side (``requests.answer``), the listing (``claudeguardctl pending``) and the audit log.
"""

from __future__ import annotations

import base64
import copy
import os
import time

from claudeguard.decision import PERMISSIONS as DECISIONS
from claudeguard.decision import SCOPES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, TypedDict

    from claudeguard.decision import AnsweredBy, Permission, Scope

    class RequestRecord(TypedDict):
        """A ``Request`` as its ``.json`` file in the channel holds it."""

        id: str
        session_id: str
        agent_type: str | None
        agent_id: str | None
        tool: str
        input: dict[str, object]
        summary: str
        cwd: str
        created: float
        deadline: float
        pid: int
        kind: str
        choices: list[str] | None
        extra: dict[str, object]

__all__ = ["DECISIONS", "SCOPES", "KINDS", "ID_MIN_PREFIX", "Request", "Answer", "new_id", "is_id_text"]
KINDS = ("permission", "dialog")
ID_MIN_PREFIX = 6


def new_id() -> str:
    """80 random bits as 16 lowercase base32 characters (a-z, 2-7): unguessable, no case or
    punctuation to get wrong when copied from one terminal to another."""
    # os.urandom is what secrets.token_bytes reads, without secrets' imports (hmac, hashlib:
    # ~4.5 ms of every `claudeguardctl pending`)
    return base64.b32encode(os.urandom(10)).decode("ascii").lower()


ID_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567")


def is_id_text(text: str) -> bool:
    return bool(text) and set(text) <= ID_ALPHABET


class _Record:
    """Compared and shown by its ``FIELDS``, as the dataclasses these two were."""

    FIELDS: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, _Record) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value: unhashable, as a dataclass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.FIELDS) + ")"


class Request(_Record):
    """A pending request as the channel holds it (plain class: ``claudeguardctl pending``, which
    scripts poll, spent ~5 ms of its start importing dataclasses for the two of them)."""

    # its fields, in order (no __slots__: a request's __dict__ is its record, as a dataclass's was)
    FIELDS = ("id", "session_id", "agent_type", "agent_id", "tool", "input", "summary", "cwd", "created",
              "deadline", "pid", "kind", "choices", "extra")

    def __init__(self, id: str, session_id: str, agent_type: str | None, agent_id: str | None, tool: str,
                 input: dict[str, object], summary: str, cwd: str, created: float, deadline: float, pid: int,
                 kind: str = "permission", choices: list[str] | None = None,
                 extra: dict[str, object] | None = None) -> None:
        self.id = id
        self.session_id = session_id
        self.agent_type = agent_type
        self.agent_id = agent_id
        self.tool = tool
        self.input: dict[str, Any] = input
        self.summary = summary
        self.cwd = cwd
        self.created = created  # wall clock (time.time()): compared across processes
        self.deadline = deadline
        self.pid = pid  # the waiting process
        self.kind = kind  # or "dialog" (a TUI dialog; then `choices` lists its options)
        self.choices = choices
        self.extra: dict[str, Any] = {} if extra is None else extra  # e.g. {"tool_use_id": ..., "rule": ...}

    def replace(self, **changes: object) -> Request:
        """A new request with these fields changed and the others the same (as
        ``dataclasses.replace``: nothing copied deeply)."""
        values: dict[str, Any] = {name: getattr(self, name) for name in self.FIELDS}
        values.update(changes)
        return Request(**values)

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.created)

    @property
    def deadline_s(self) -> float:
        """Seconds left before the request ends with ``on_timeout``."""
        return max(0.0, self.deadline - time.time())

    def to_dict(self) -> RequestRecord:
        """The fields above, each copied (the input, choices and extra deeply: a record written
        later never shares a mutable part with this request)."""
        data: Any = {name: copy.deepcopy(getattr(self, name)) for name in self.FIELDS}
        record: RequestRecord = data
        return record

    @classmethod
    def from_dict(cls, data: object) -> Request:
        """The request a ``to_dict`` record holds; TypeError when it is not one."""
        if not isinstance(data, dict):
            raise TypeError(f"a request record is a JSON object, not {type(data).__name__}")
        # Tolerate fields added by a newer claudeguard writing the same runtime dir.
        values: dict[str, Any] = {k: v for k, v in data.items() if k in cls.FIELDS}  # as a Request wrote them
        return cls(**values)


class Answer(_Record):
    """A human's answer (or the request's end) as it travels the channel; the gate turns it into
    a ``claudeguard.decision.Decision``."""

    # its fields, in order (no __slots__: ``answer.__dict__`` is its record, as a dataclass's was)
    FIELDS = ("decision", "scope", "message", "decided_by", "choice", "by", "answered_by")

    def __init__(self, decision: Permission, scope: Scope = "once", message: str | None = None,
                 decided_by: AnsweredBy = "human", choice: str | None = None, by: str | None = None,
                 answered_by: dict[str, object] | None = None) -> None:
        self.decision = decision
        self.scope = scope
        self.message = message
        self.decided_by = decided_by
        self.choice = choice  # for dialogs
        self.by = by  # how it was answered, as the answerer said (e.g. "claudeguardctl approve", "console")
        # Who answered, as the waiter saw the answering process (``ancestry.identity``: uid, pid,
        # tty, command), with what a relaying answerer (the desk, the fleet) vouches for beside
        # it; None for an ending without a human (timeout, withdrawn, error).
        self.answered_by: dict[str, Any] | None = answered_by
