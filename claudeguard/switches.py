"""The environment's switches for the guard and its resident parts, read in one place.

``CLAUDEGUARD_DISABLE`` (any value but empty or ``0``) runs the real CLI with no guard at all
(the launcher refuses it under lockdown). ``CLAUDEGUARD_SERVICE=0`` runs a session without the
resident service (its hooks answered by commands and the launcher's own gate server; ``--bg``
refused, verification not offered in the background); ``CLAUDEGUARD_PLANNER=0`` keeps the
service but has each launcher plan its session itself; any other value of these two, or none,
means on. Imports ``os`` alone: the launcher's first step asks.
"""

from __future__ import annotations

import os

DISABLE_VAR = "CLAUDEGUARD_DISABLE"
SERVICE_VAR = "CLAUDEGUARD_SERVICE"
PLANNER_VAR = "CLAUDEGUARD_PLANNER"


def guard_disabled() -> bool:
    """Whether the caller asked for the CLI without the guard (``CLAUDEGUARD_DISABLE``)."""
    return os.environ.get(DISABLE_VAR, "") not in ("", "0")


def service_on() -> bool:
    """Whether sessions use the resident service (``CLAUDEGUARD_SERVICE`` is not ``0``)."""
    return os.environ.get(SERVICE_VAR, "1") != "0"


def planner_on() -> bool:
    """Whether a launcher asks the service's planner for its plan: the service on, and the
    planner not turned off (``CLAUDEGUARD_PLANNER`` is not ``0``)."""
    return service_on() and os.environ.get(PLANNER_VAR, "1") != "0"
