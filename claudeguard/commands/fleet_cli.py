"""What the commands' ``--fleet`` views and fleet answers share: the approver's ``FleetClient``
of this user's config (``[fleet]`` of the user's own files, or ``CLAUDEGUARD_FLEET_URL``), and
the refusal of a fleet answer from inside a guarded session.

Imported only when a command goes to the fleet: without one nothing imports
``claudeguard.fleet`` (nor redis).
"""

from __future__ import annotations

import os
from pathlib import Path

from claudeguard.ancestry import inside_guarded_session
from claudeguard.config.load import env_overrides, load_config
from claudeguard.errors import NotFoundError, UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.fleet.client import FleetClient
    from claudeguard.fleet.config import FleetConfig
    from claudeguard.fleet.model import RequestView

NO_FLEET = ("no fleet configured: set [fleet] url in your claudeguard config file (or CLAUDEGUARD_FLEET_URL); "
            "see the README, \"Fleet\"")


def configured() -> bool:
    """Whether this user's config names a fleet (without importing it)."""
    return load_config(Path.cwd(), env_overrides()).fleet_configured()


def settings() -> FleetConfig:
    """This user's fleet (without importing redis-py); UsageError (one line) when there is none."""
    cfg = load_config(Path.cwd(), env_overrides())
    if not cfg.fleet_configured():
        raise UsageError(NO_FLEET)
    from claudeguard.fleet.config import from_config  # noqa: PLC0415 - the fleet's settings only with a fleet

    fleet = from_config(cfg)
    if fleet is None:
        raise UsageError(NO_FLEET)
    return fleet


def listed_by_service(fleet: FleetConfig) -> list[RequestView] | None:
    """The fleet's waiting requests as the running guard service lists them as ``[fleet]
    approver``, on its kept connection, when it lists ``fleet`` (same server, database and
    prefix): no redis-py import and no connection here (``pending --fleet`` in ~1/3 of the
    time). None: no such service, or it declined; then the command asks Redis."""
    from claudeguard.service import client as service, files  # noqa: PLC0415 - only for --fleet

    sock = service.live_connection(files.service_dir())
    if sock is None:
        return None
    try:
        reply = service.request(sock, {"op": "fleet-pending"}, timeout=5.0)
    except (OSError, ValueError, service.ServiceError):
        return None
    finally:
        sock.close()
    listed = reply.get("requests")
    if reply.get("ok") and reply.get("fleet") == fleet.fleet_id() and isinstance(listed, list):
        return listed
    return None


def client(fleet: FleetConfig | None = None) -> FleetClient:
    """The approver's client of ``fleet`` (default: this user's, ``settings``)."""
    fleet = fleet if fleet is not None else settings()  # "no fleet" said before redis-py is needed
    from claudeguard.fleet.client import FleetClient  # noqa: PLC0415 - the optional extra, only with a fleet

    return FleetClient(fleet)


def refuse_inside_session() -> None:
    """A fleet answer from a process a guarded session runs is refused here, before anything is
    sent: the agent must never answer for the human. (The credentials are out of the agent's
    reach besides: stripped from its environment, their file hidden; a member's cannot answer.)"""
    inside = inside_guarded_session(os.getpid())
    if inside is not None:
        raise NotFoundError(f"answer refused: from inside session {inside} (a fleet answer must come from outside "
                         "every guarded session)")
