"""The service's part in the fleet (docs/design.md, "The fleet"): when this user's own config
names one (``[fleet]``, or ``CLAUDEGUARD_FLEET_URL``), the service runs one ``FleetLink``.

- Every request that starts waiting in this process (the calls the service's hooks and prompt
  tool ask about: ``channel.requests.observer``) is mirrored into Redis, and taken down when its
  wait ends, with how it ended.
- The sessions' ``ps`` rows go out with the link's heartbeat (every 2 s, TTL 10 s), read here
  only while the service has sessions.
- An answer from the fleet is judged as a local ``claudeguardctl approve`` is (``checked_apply``:
  ``gate.grants.refusal``, so an agent or session grant that a matching ask or deny rule would
  beat is refused with that rule's file:line), then applied through the channel's own answer path
  (``fleet.link.channel_apply``: ``channel.answer(..., vouched=answered_by)``): the request's
  waiter judges it like any other and records the fleet member, its machine and uid as
  ``answered_by``; the first answer the waiter takes wins, local or remote.
- The desk: with ``[fleet] approver`` (an approver's ACL user, its password read like the
  member's), ``desk_view()`` is a ``fleet.view.FleetDeskView``: the service's desk lists the
  other machines' requests and answers them as that approver, with the desk's provenance. Without
  it the desk shows this machine's requests only (the member's credentials can neither list
  other machines' requests nor answer), and ``desk_line()`` says why in ``service status``.

Without a fleet nothing here imports ``claudeguard.fleet`` (nor redis). A config mistake, or
the extra missing, is one line in the service's log and no fleet: local answers work as ever.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from claudeguard.channel import requests as channel_requests
from claudeguard.channel.answers import list_pending
from claudeguard.config.load import env_overrides, load_config
from claudeguard.watchdog.status import list_sessions

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable

    from claudeguard.channel.model import Answer, Request
    from claudeguard.fleet.link import FleetLink
    from claudeguard.fleet.model import AnsweredBy, AnswerFields, LinkStatus, Outcome
    from claudeguard.fleet.view import FleetDeskView

SESSIONS_EVERY_S = 2.0  # how often the sessions' rows are read for the heartbeat (the link's own beat)


class _Mirror(channel_requests.Observer):
    """The channel's observer in the service: tells the link, never waits on it."""

    def __init__(self, link: FleetLink, machine: str) -> None:
        from claudeguard.fleet.model import done_from_answer, request_view  # noqa: PLC0415 - the optional extra, only with a fleet

        self.link = link
        self.machine = machine
        self._view = request_view
        self._done = done_from_answer

    def posted(self, request: Request) -> None:
        self.link.request_posted(self._view(request, self.machine))

    def ended(self, request: Request, answer: Answer) -> None:
        self.link.request_done(request.id, self._done(answer))


class Fleet:
    """The service's fleet link and the thread that feeds its heartbeat."""

    def __init__(self, link: FleetLink, busy: Callable[[], bool], view: FleetDeskView | None = None,
                 no_view: str = "") -> None:
        self.link = link
        self.view = view  # the desk's view of the other machines (None: no approver to list and answer as)
        self.no_view = no_view  # why there is none
        self._busy = busy
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="claudeguard-fleet-sessions", daemon=True)

    def start(self) -> None:
        channel_requests.observer = _Mirror(self.link, self.link.machine)
        self.link.start()
        self._thread.start()

    def stop(self) -> None:
        """No more mirroring; the link takes this machine's requests and heartbeat down."""
        channel_requests.observer = None
        self._stop.set()
        if self.view is not None:
            self.view.stop()
        self.link.stop()

    def status(self) -> LinkStatus:
        return self.link.status()

    def desk_view(self) -> FleetDeskView | None:
        """The desk's ``FleetView`` (``desk.source``), or None: this machine's requests only."""
        return self.view

    def desk_line(self) -> str:
        """One line for ``service status``: what the desk shows of the fleet, and why."""
        if self.view is not None:
            return self.view.describe()
        return f"the desk shows this machine's requests only: {self.no_view}"

    def _beat(self) -> None:
        sent: list[dict[str, Any]] | None = None
        while not self._stop.wait(SESSIONS_EVERY_S):
            try:
                rows = list_sessions() if self._busy() else []
            except Exception as exc:  # noqa: BLE001 - a status file being rewritten: the next beat reads it
                print(f"claudeguard service: fleet heartbeat: {exc}", file=sys.stderr, flush=True)
                continue
            if rows != sent:
                self.link.heartbeat(rows)
                sent = rows


def start(busy: Callable[[], bool]) -> Fleet | None:
    """The fleet of this user's config, started; None when there is none, or when it cannot be
    had (one line in the service's log: the config's mistake, the extra missing)."""
    try:
        # "/": no project's file applies (a project may not name a fleet anyway); the user's own
        # file and CLAUDEGUARD_CONFIG of the launcher that started the service.
        cfg = load_config(Path("/"), env_overrides())
        if not cfg.fleet_configured():
            return None
        from claudeguard.fleet.config import from_config  # noqa: PLC0415 - the optional extra, only with a fleet
        from claudeguard.fleet.link import FleetLink  # noqa: PLC0415 - as above

        fleet_cfg = from_config(cfg)
        if fleet_cfg is None:
            return None
        fleet_cfg.password()  # its file's mode and owner, or an explicit variable unset: said now, once
        view, no_view = _desk_view(fleet_cfg)
        fleet = Fleet(FleetLink(fleet_cfg, checked_apply), busy, view, no_view)
        fleet.start()
    except Exception as exc:  # noqa: BLE001 - without a fleet the service works as ever: said in its log
        print(f"claudeguard service: no fleet: {exc}", file=sys.stderr, flush=True)
        return None
    print(f"claudeguard service: fleet {fleet_cfg.describe()}; {fleet.desk_line()}", file=sys.stderr, flush=True)
    return fleet


def _desk_view(fleet_cfg: Any) -> tuple[FleetDeskView | None, str]:
    """The desk's view of the fleet as ``[fleet] approver``, or (None, why not)."""
    approver = fleet_cfg.approver
    if approver is None:
        return None, ("[fleet] names no approver (fleet.approver: the approver ACL user the desk lists and "
                      "answers other machines' requests as)")
    from claudeguard.fleet.view import FleetDeskView  # noqa: PLC0415 - the optional extra, only with a fleet

    try:
        approver.password()  # as the member's: its file's mode and owner, or an explicit variable unset
    except Exception as exc:  # noqa: BLE001 - the link works without it: said in status and the log
        return None, str(exc)
    return FleetDeskView(approver), ""


def checked_apply(request_id: str, fields: AnswerFields, answered_by: AnsweredBy) -> Outcome:
    """An answer from another machine, judged before the channel takes it as ``claudeguardctl
    approve`` judges one (``gate.grants.refusal``): an allow for the agent or the session that
    could never decide the next such call is refused, at once and with its reason, rather than
    answering once and asking again in silence. A request no longer pending is the channel's to
    say (who won, when)."""
    from claudeguard.fleet.link import channel_apply  # noqa: PLC0415 - the optional extra, only with a fleet
    from claudeguard.gate import grants  # noqa: PLC0415 - only with a fleet: not on every service's start

    if fields["scope"] != "once":
        req = next((r for r in list_pending() if r.id == request_id), None)
        if req is not None:
            refused = grants.refusal(req, fields["decision"], fields["scope"], grants.grant_rules(req), None)
            if refused is not None:
                return {"applied": False, "refused": True, "reason": refused}
    return channel_apply(request_id, fields, answered_by)
