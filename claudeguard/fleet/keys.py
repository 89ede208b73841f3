"""The fleet's names: what a machine label, an ACL user name and a key prefix may hold, every
Redis key of the protocol, and the two roles' Redis ACLs.

The ACLs are what makes an answer's author unforgeable: an approver may write exactly one
answer stream per machine, the one whose name ends in ``:<its ACL user>``, so the owner reads
the author from the key, never from the answer's text. That holds only because none of the
names can hold ``:`` or a glob character (``*?[]\\``): checked here for every name that goes
into a key, on both sides.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Iterable

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MACHINE_CHARS = _WORD
USER_CHARS = _WORD | {"@"}
PREFIX_CHARS = _WORD | {":"}
NAME_MAX = 64
DEFAULT_PREFIX = "claudeguard"
DEFAULT_USER = "default"  # the ACL user of a connection that names none

# What each role may run: exactly the commands the link (member) and the client (approver) send;
# nothing that acts on the whole server or finds keys by pattern (FLUSHALL, CONFIG, KEYS, SCAN,
# PUBLISH, ACL, ...). The fleet's tests run the whole protocol under these ACLs.
MEMBER_COMMANDS = ("ping", "time", "select", "multi", "exec", "discard", "set", "del", "expire", "hset", "hdel",
                   "zadd", "zremrangebyscore", "xadd", "xread", "smembers")
APPROVER_COMMANDS = ("ping", "time", "select", "zrange", "exists", "get", "hgetall", "xadd", "xread", "xrevrange",
                     "sadd")


def is_machine(text: object) -> bool:
    return isinstance(text, str) and 0 < len(text) <= NAME_MAX and set(text) <= MACHINE_CHARS


def is_user(text: object) -> bool:
    return isinstance(text, str) and 0 < len(text) <= NAME_MAX and set(text) <= USER_CHARS


def is_prefix(text: object) -> bool:
    return (isinstance(text, str) and 0 < len(text) <= NAME_MAX and set(text) <= PREFIX_CHARS
            and not text.startswith(":") and not text.endswith(":"))


def machine_label(hostname: str) -> str:
    """A hostname as a machine label: the first NAME_MAX characters, any other character '-'."""
    label = "".join(c if c in MACHINE_CHARS else "-" for c in hostname[:NAME_MAX])
    return label or "localhost"


class Keys:
    """Every key of one fleet (one prefix). ``m:<machine>:*`` is the owning machine's (member
    ACL: read-write for that machine only); ``a:<machine>:<user>`` an approver's answers to that
    machine; ``ax:<machine>`` and ``bell:<machine>`` tell the owner which answer streams exist."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def machines(self) -> str:
        """zset: machine -> its last heartbeat (epoch s); members add themselves, approvers list."""
        return f"{self.prefix}:machines"

    def requests(self, machine: str) -> str:
        """hash: request id -> the request's view (JSON), while it waits."""
        return f"{self.prefix}:m:{machine}:reqs"

    def done(self, machine: str) -> str:
        """hash: request id -> how it ended (JSON), for ten minutes."""
        return f"{self.prefix}:m:{machine}:done"

    def heartbeat(self, machine: str) -> str:
        """string (JSON) with a TTL: the machine, its sessions, its pending count."""
        return f"{self.prefix}:m:{machine}:hb"

    def results(self, machine: str) -> str:
        """stream: the owner's verdict on each answer it read (applied, or why not)."""
        return f"{self.prefix}:m:{machine}:results"

    def answers(self, machine: str, user: str) -> str:
        """stream: the answers of ACL user ``user`` to ``machine``'s requests."""
        return f"{self.prefix}:a:{machine}:{user}"

    def answers_prefix(self, machine: str) -> str:
        return f"{self.prefix}:a:{machine}:"

    def approvers(self, machine: str) -> str:
        """set: the ACL users that have an answer stream for ``machine`` (a hint: the owner reads
        the author from the stream's key, so a name planted here proves nothing)."""
        return f"{self.prefix}:ax:{machine}"

    def bell(self, machine: str) -> str:
        """stream: "a new answer stream exists" (read the ``approvers`` set again)."""
        return f"{self.prefix}:bell:{machine}"


def _commands(names: Iterable[str]) -> str:
    return " ".join(f"+{name}" for name in names)


def member_acl(prefix: str, machine: str, username: str, secret: str = ">PASSWORD") -> str:
    """The ``ACL SETUSER`` line of a member: its own ``m:<machine>:*`` keys and the machines zset
    read-write; the answers addressed to it, their index and bell read-only; nothing else, so it
    cannot write an answer anywhere, to its own requests neither."""
    p = prefix
    return (f"ACL SETUSER {username} on resetpass {secret} resetkeys resetchannels -@all "
            f"{_commands(MEMBER_COMMANDS)} ~{p}:m:{machine}:* ~{p}:machines "
            f"%R~{p}:a:{machine}:* %R~{p}:ax:{machine} %R~{p}:bell:{machine}")


def approver_acl(prefix: str, username: str, secret: str = ">PASSWORD", machines: str = "*") -> str:
    """The ``ACL SETUSER`` line of an approver: every machine's requests, heartbeats and verdicts
    read-only; its own answer streams (``a:<machine>:<username>``) and the index and bell
    read-write. ``machines`` (a glob of labels) narrows which machines it may answer."""
    p = prefix
    return (f"ACL SETUSER {username} on resetpass {secret} resetkeys resetchannels -@all "
            f"{_commands(APPROVER_COMMANDS)} %R~{p}:m:* %R~{p}:machines "
            f"~{p}:a:{machines}:{username} ~{p}:ax:{machines} ~{p}:bell:{machines}")
