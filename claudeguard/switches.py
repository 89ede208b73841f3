"""The environment's switches for the guard's resident parts, read in one place.

``CLAUDEGUARD_SERVICE=0`` runs a session without the resident service (its hooks answered by
commands and the launcher's own gate server; ``--bg`` refused, verification not offered in the
background); ``CLAUDEGUARD_PLANNER=0`` keeps the service but has each launcher plan its session
itself. Any other value, or none, means on. Imports ``os`` alone: the launcher's first step asks.
"""

from __future__ import annotations

import os

SERVICE_VAR = "CLAUDEGUARD_SERVICE"
PLANNER_VAR = "CLAUDEGUARD_PLANNER"


def service_on() -> bool:
    """Whether sessions use the resident service (``CLAUDEGUARD_SERVICE`` is not ``0``)."""
    return os.environ.get(SERVICE_VAR, "1") != "0"


def planner_on() -> bool:
    """Whether a launcher asks the service's planner for its plan: the service on, and the
    planner not turned off (``CLAUDEGUARD_PLANNER`` is not ``0``)."""
    return service_on() and os.environ.get(PLANNER_VAR, "1") != "0"
