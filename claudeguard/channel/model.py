"""The two records of the approval channel: a pending ``Request`` and its ``Answer``.

Plain dataclasses with no I/O, shared by the waiting side (``requests.Pending``), the answering
side (``requests.answer``), the listing (``claudeguardctl pending``) and the audit log.
"""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import asdict, dataclass, field, fields

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
    return base64.b32encode(secrets.token_bytes(10)).decode("ascii").lower()


ID_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567")


def is_id_text(text: str) -> bool:
    return bool(text) and set(text) <= ID_ALPHABET


@dataclass
class Request:
    id: str
    session_id: str
    agent_type: str | None
    agent_id: str | None
    tool: str
    input: dict[str, Any]
    summary: str
    cwd: str
    created: float  # wall clock (time.time()): compared across processes
    deadline: float
    pid: int  # the waiting process
    kind: str = "permission"  # or "dialog" (a TUI dialog; then `choices` lists its options)
    choices: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. {"tool_use_id": ..., "rule": ...}

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.created)

    @property
    def deadline_s(self) -> float:
        """Seconds left before the request ends with ``on_timeout``."""
        return max(0.0, self.deadline - time.time())

    def to_dict(self) -> RequestRecord:
        data: Any = asdict(self)  # the fields above, each copied
        record: RequestRecord = data
        return record

    @classmethod
    def from_dict(cls, data: object) -> Request:
        """The request a ``to_dict`` record holds; TypeError when it is not one."""
        if not isinstance(data, dict):
            raise TypeError(f"a request record is a JSON object, not {type(data).__name__}")
        # Tolerate fields added by a newer claudeguard writing the same runtime dir.
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: v for k, v in data.items() if k in known}  # as a Request wrote them
        return cls(**values)


@dataclass
class Answer:
    """A human's answer (or the request's end) as it travels the channel; the gate turns it into
    a ``claudeguard.decision.Decision``."""

    decision: Permission
    scope: Scope = "once"
    message: str | None = None
    decided_by: AnsweredBy = "human"
    choice: str | None = None  # for dialogs
    by: str | None = None  # how it was answered, as the answerer said (e.g. "claudeguardctl approve", "console")
    # Who answered, as the waiter saw the answering process (``ancestry.identity``: uid, pid, tty,
    # command), with what a relaying answerer (the desk, the fleet) vouches for beside it; None
    # for an ending without a human (timeout, withdrawn, error).
    answered_by: dict[str, Any] | None = None
