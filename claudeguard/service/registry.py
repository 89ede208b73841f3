"""What the service's parts share about a registered session, below all of them: the
``Registered`` record, what keeps a session alive beside its hooks (``Kept``: a ``--bg``
session's keeper, ``background.Keeper``, or agent view's, ``agent_view.View``), and what those
parts ask of the service (``Registry``: ``server.Service`` is the one).

``server`` imports ``http``, ``watch``, ``background`` and ``agent_view``; they know the
service only through this module, so no import runs back up to ``server``.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping
    from typing import Protocol, TypedDict

    from claudeguard.gate.session import Session
    from claudeguard.service.protocol import Failed, RegisterReply, Unserved
    from claudeguard.watchdog.monitor import Monitor

    class Shown(TypedDict):
        """What ``status`` shows of a kept session."""

        short_id: str | None  # the CLI's short id (``claude agents``), once known
        cli_pid: int | None  # the process kept: the session's CLI, or agent view's

    class Kept(Protocol):
        """A session the service keeps beyond its hooks, in a thread of its own."""

        stop: threading.Event  # set: the keeper ends (the service stops, or the session ended)

        def session_for(self, service: Registry, reg: Registered, body: bytes) -> Session:
            """The session a hook event posted for ``reg`` is decided in."""

        def shown(self) -> Shown:
            """For ``status``."""

    class Registry(Protocol):
        """What the service's parts use of ``server.Service``."""

        lock: threading.Lock
        sessions: dict[str, Registered]

        def lookup(self, session_id: str, token: str | None) -> Registered | None:
            """The session, if ``token`` is its secret."""

        def register(self, msg: Mapping[str, object], owner: object) -> RegisterReply | Failed | Unserved:
            """The ``register`` op."""

        def forget(self, session_id: str, keeper: object) -> None:
            """Drop the session if ``keeper`` still keeps it."""

        def session_for(self, reg: Registered, body: bytes) -> Session:
            """The session a hook event is decided in."""

        def poster_refused(self, reg: Registered, local_port: int, remote_port: int) -> str | None:
            """Why the process at the other end of a hook post may not post for ``reg``, or None."""


@dataclass
class Registered:
    """A session the service answers hooks for."""

    session: Session
    token: str
    kind: str  # "foreground" | "background"
    registered: float
    owner: object | None = None  # the control connection of a foreground session
    keeper: Kept | None = None  # a background session's keeper, or agent view's
    watch: Monitor | None = None  # a foreground session's monitor (``watch.ServiceMonitor``)
    port: int = 0  # the port its hooks name (a listening socket of the service's)
    cli: tuple[int, str | None] | None = None  # a foreground session's CLI (pid, start): its hooks' only poster
