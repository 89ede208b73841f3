"""The approval desk as the guard service serves it: started at the first ``desk`` control op,
on a loopback port of its own (never a hooks' port), stopped with the service.

- ``DeskHost.url(peer_pid)``: the ``desk`` op's answer. The caller's pid (``SO_PEERCRED`` on
  ``control.sock``) must run outside every guarded session's process tree (``ancestry``): an
  agent never gets a login URL; a refusal is one audit row (``event``: ``desk-refused``).
- Every connection to the desk's port is checked before its first request is answered
  (``tcp_owner.peer_inside_session``): a process inside a guarded session (a boxed command's
  network is the host's, so it can reach 127.0.0.1:PORT) gets 403 and one audit row, whatever
  token or cookie it holds.
- The source: ``LocalSource`` over the service's runtime dir and log dir (answers go through
  the channel, whose waiter judges them and records ``answered_by``: ``{"via": "desk", "uid",
  "browser_session", "relayed_by": <this service>}``), unless ``source_factory`` makes another
  (the fleet's, once the service has one: docs/design.md, "The approval desk").

The ``claudeguard.desk`` package sits above the service in the layers (its ``LocalSource``
answers through ``commands.answer``): it is imported here by name, at the first ask, like the
planner's and ``claudeguardctl``'s dispatch (tests/test_layers.py), and used through ``Served``.
"""

from __future__ import annotations

import importlib
import os
import threading

from claudeguard.ancestry import caller_inside_session, identity
from claudeguard.channel.audit import record
from claudeguard.tcp_owner import peer_inside_session

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from claudeguard.service.protocol import DeskReply, Failed

    class Served(Protocol):
        """What the service uses of ``claudeguard.desk.server.Desk``."""

        port: int

        def login_url(self) -> str: ...

        def open_pages(self) -> int: ...

        def stop(self) -> None: ...

        on_refusal: Callable[[dict[str, object]], None] | None

REFUSAL_ROWS = 100  # audit rows of refused desk connections per service life (a loop of them is counted)


class DeskHost:
    """The service's desk, made at the first ask. ``source_factory``: what the desk reads and
    changes (default: ``LocalSource``)."""

    def __init__(self, source_factory: Callable[[], object] | None = None,
                 stopper: Callable[[str, str], int | None] | None = None,
                 fleet: Callable[[], object | None] | None = None) -> None:
        self.source_factory = source_factory  # makes a claudeguard.desk.source.DeskSource
        self.stopper = stopper  # the service's stop of a session it watches (``Service.stop_watched``)
        # The service's fleet as a claudeguard.desk.source.FleetView, or None while it has none.
        self.fleet = fleet
        self.desk: Served | None = None
        self.refused = 0
        self._lock = threading.Lock()

    @property
    def port(self) -> int | None:
        desk = self.desk
        return desk.port if desk is not None else None

    def busy(self) -> bool:
        """A desk page is open (its event stream): the service stays while someone watches."""
        desk = self.desk
        return desk is not None and desk.open_pages() > 0

    def url(self, peer_pid: int | None) -> DeskReply | Failed:
        """The ``desk`` op for the process ``peer_pid``: a fresh single-use first URL, or a refusal."""
        if peer_pid is None or peer_pid <= 0:
            return {"ok": False, "error": "desk: refused: the asking process cannot be identified"}
        inside = caller_inside_session(peer_pid)
        if inside is not None:
            _audit({"event": "desk-refused", "summary": f"desk: refused from inside session {inside}",
                    "inside_session": inside, "asked_by": dict(identity(peer_pid, os.getuid()))})
            return {"ok": False, "error": f"desk: refused from inside session {inside}"}
        try:
            desk = self.start()
        except Exception as exc:  # noqa: BLE001 - one line back to the asker; the service goes on
            return {"ok": False, "error": f"desk: cannot start: {type(exc).__name__}: {exc}"}
        return {"ok": True, "url": desk.login_url(), "port": desk.port}

    def start(self) -> Served:
        with self._lock:
            if self.desk is None:
                if self.source_factory is not None:
                    source = self.source_factory()
                else:
                    local = importlib.import_module("claudeguard.desk.local")
                    source = local.LocalSource(stopper=self.stopper, fleet=self.fleet)
                served: Served = importlib.import_module("claudeguard.desk").start_desk(source, admit=self._admit)
                served.on_refusal = self._refusal
                self.desk = served
            return self.desk

    def _admit(self, address: tuple[str, int]) -> str | None:
        desk = self.desk
        if desk is None:
            return "the desk is stopping"
        why = peer_inside_session(desk.port, int(address[1]))
        if why is not None:
            self.refused += 1
            if self.refused <= REFUSAL_ROWS:
                _audit({"event": "desk-refused", "summary": f"desk connection refused: {why}"})
        return why

    def _refusal(self, refusal: dict[str, object]) -> None:
        """A request refused with a browser session's cookie (a wrong CSRF token or Origin: a page
        of another origin posting through the user's browser): one audit row each. A request
        without a cookie (401) or with a wrong Host is noise of the network, not written; a
        refused peer has its own row (``_admit``)."""
        if refusal.get("cookie") and refusal.get("status") == 403 and not str(refusal.get("reason")).startswith(
                "refused: "):
            self.refused += 1
            if self.refused <= REFUSAL_ROWS:
                route = str(refusal.get("path")).split("/", 2)[-1]  # without the random base path
                _audit({"event": "desk-refused", "summary": f"desk: {refusal.get('reason')} ({route})"})

    def stop(self) -> None:
        with self._lock:
            desk, self.desk = self.desk, None
        if desk is not None:
            desk.stop()  # its port is free after this


def _audit(event: dict[str, object]) -> None:
    try:
        record(event)
    except Exception:  # noqa: BLE001 - the refusal stands whether or not its row could be written
        pass
