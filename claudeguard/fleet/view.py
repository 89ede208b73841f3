"""The fleet as the service's approval desk sees it (``desk.source.FleetView``): the other
machines' waiting requests, from memory, and an answer to one of them, sent as the approver the
config names (``[fleet] approver``; a member's credentials can neither list other machines'
requests nor answer: keys.py's ACLs).

- ``requests()`` returns the last listing (``FleetClient.requests`` as the approver, this
  machine's own requests left out: the desk lists those from the channel). One thread lists the
  fleet every ``POLL_S`` while the desk asks (``requests()`` or ``version()`` within ``IDLE_S``:
  an open page asks 4 times a second) and sleeps otherwise: an idle service without an open
  desk page sends nothing.
- ``version()`` moves whenever the listing's requests (machine, id, call) changed.
- ``answer(...)`` sends one answer through a client of its own (one per answer: the desk answers
  from a thread per HTTP request), for exactly the call the desk showed (``shown_sha256``), with
  the desk's provenance as ``vouched``: the owner records it beside the approver's ACL user. Never
  ``forever`` (refused before anything is sent).

Its records are the desk's ``RequestItem`` as plain dicts (this layer does not import the desk).
"""

from __future__ import annotations

import threading
import time

from claudeguard.errors import GuardError, NotFoundError, UsageError
from claudeguard.fleet.client import FleetClient, FleetError
from claudeguard.fleet.link import forever_refusal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Mapping

    from claudeguard.fleet.config import FleetConfig
    from claudeguard.fleet.model import RequestView

POLL_S = 0.5  # how often the fleet is listed while the desk asks (an arrival shows within ~0.8 s)
IDLE_S = 10.0  # no ask for this long: the listing stops until the next ask
ITEM_KEYS = ("id", "session_id", "machine", "agent_type", "agent_id", "background", "kind", "choices", "tool",
             "summary", "cwd", "created", "deadline", "prompt", "rule", "rule_source", "call_sha256")


def desk_item(view: RequestView) -> dict[str, Any]:
    """A published request as the desk's ``RequestItem`` of another machine: no forever, no diff."""
    item: dict[str, Any] = {key: view.get(key) for key in ITEM_KEYS}
    tool_input = view.get("input")
    if tool_input is None:  # over the published size: its preview, as text
        tool_input = {"input_preview": view.get("input_preview") or "", "input_truncated": True}
    item.update(local=False, input=tool_input, background=bool(view.get("background")),
                short_id=view.get("cli_short_id"), forever_file=None)
    return item


class FleetDeskView:
    """See the module docstring. ``approver``: the ``FleetConfig`` of ``[fleet] approver``."""

    def __init__(self, approver: FleetConfig, *, poll_s: float = POLL_S, idle_s: float = IDLE_S) -> None:
        self.cfg = approver
        self.machine = approver.machine
        self._poll_s = poll_s
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._items: list[dict[str, Any]] = []
        self._key: tuple[tuple[str, str, str], ...] = ()
        self._version = 0
        self._asked = 0.0  # monotonic time of the last requests() or version()
        self._sleeping = False  # the thread sleeps until the next ask
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self._cli_lock = threading.Lock()
        self._cli_client: FleetClient | None = None  # list_all's connection, kept between calls

    # -- the desk's side -----------------------------------------------------------------------

    def requests(self) -> list[dict[str, Any]]:
        self._ask()
        with self._lock:
            return self._items

    def version(self) -> int:
        self._ask()
        with self._lock:
            return self._version

    def answer(self, machine: str, request_id: str, decision: str, scope: str, message: str | None,
               choice: str | None, answered_by: Mapping[str, Any]) -> dict[str, Any]:
        if scope == "forever":
            raise UsageError(f"{str(request_id)[:40]} ({str(machine)[:64]}): {forever_refusal(str(machine))}")
        with self._lock:
            shown = next((item for item in self._items if item["id"] == request_id and item["machine"] == machine),
                         None)
        if shown is None:
            raise NotFoundError(f"{str(request_id)[:40]} ({str(machine)[:64]}): no such pending request in the fleet "
                                "(answered, expired or never existed)")
        try:
            with FleetClient(self.cfg) as client:
                verdict = client.answer(request_id, decision, scope=scope, message=message, choice=choice,
                                        machine=machine, shown_sha256=shown["call_sha256"],
                                        vouched=dict(answered_by))
        except FleetError as exc:
            if "already answered by" in str(exc) or "expired at" in str(exc):
                raise NotFoundError(str(exc)) from None  # gone: as an answered local request
            raise
        finally:
            self._wake.set()  # list again now: it is answered (or gone)
        word = "approved" if decision == "allow" else "denied"
        return {"line": f"{request_id} ({machine}) {word} ({scope}): {verdict.get('message') or 'applied'}",
                "rules": [], "file": None}

    def list_all(self) -> list[RequestView]:
        """Every request waiting on a live machine, this one's included, listed now on a kept
        connection: ``claudeguardctl pending --fleet`` through the service (its process need not
        load redis-py nor connect). GuardError (one line) when Redis cannot be had."""
        with self._cli_lock:
            if self._cli_client is None:
                self._cli_client = FleetClient(self.cfg)
            try:
                return self._cli_client.requests()
            except GuardError:
                self._cli_client.close()
                self._cli_client = None
                raise

    # -- the listing -------------------------------------------------------------------------------

    def _ask(self) -> None:
        # Under the lock, as the thread's decision to sleep: an ask either comes before it (the
        # thread sees it and lists) or finds it asleep and wakes it.
        with self._lock:
            self._asked = time.monotonic()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="claudeguard-fleet-desk", daemon=True)
                self._thread.start()
            elif self._sleeping:
                self._sleeping = False
                self._wake.set()

    def _loop(self) -> None:
        client = FleetClient(self.cfg)
        try:
            while not self._stop.is_set():
                with self._lock:
                    idle = time.monotonic() - self._asked > self._idle_s
                    self._sleeping = idle
                if idle:
                    self._publish([])  # nobody looks: what was listed would only grow stale
                    client.close()
                    self._wake.wait()
                    self._wake.clear()
                    continue
                self._list(client)
                self._wake.wait(self._poll_s)
                self._wake.clear()
        finally:
            client.close()

    def _list(self, client: FleetClient) -> None:
        try:
            views = client.requests()
        except GuardError as exc:  # Redis down, a credential refused: nothing can be answered either
            client.close()
            self.last_error = str(exc)
            self._publish([])
            return
        self.last_error = None
        self._publish([desk_item(view) for view in views if view.get("machine") != self.machine])

    def _publish(self, items: list[dict[str, Any]]) -> None:
        key = tuple(sorted((str(i["machine"]), str(i["id"]), str(i.get("call_sha256"))) for i in items))
        with self._lock:
            if key != self._key:
                self._key = key
                self._items = items
                self._version += 1

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(5)
        with self._cli_lock:
            if self._cli_client is not None:
                self._cli_client.close()
                self._cli_client = None

    def describe(self) -> str:
        """One line for ``service status``."""
        state = f"not listing ({self.last_error})" if self.last_error else "lists them"
        return f"the desk shows the fleet's requests as {self.cfg.acl_user}: {state}"
