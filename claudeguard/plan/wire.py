"""What the launcher (``shim/planned.py``) and the service's planner (``service/planner.py``) send
each other over ``plan.sock``: one marshal'd request, one marshal'd answer (the protocol is in
``service/planner.py``'s docstring). Nothing here but the socket's name runs: the launcher's
start path reads it.
"""

from __future__ import annotations

PLAN_SOCKET = "plan.sock"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import TypedDict

    from claudeguard.config.model import ConfigWire

    class PlanRequest(TypedDict):
        """The launcher's request: what preparing its session reads of the launcher."""

        root: str  # the launcher's package dir: a planner serves only launchers of its own code
        argv: list[str]  # the launcher's arguments (guard options and the CLI's)
        argv0: str
        executable: str
        cwd: str
        env: dict[str, str]
        pid: int
        stdin_tty: bool
        session_id: str  # made by the launcher, as is the secret
        token: str

    class PlanAnswer(TypedDict, total=False):
        """The planner's answer: the plan (``argv`` ... ``snapshot``), or ``error`` and ``exit``
        (a failure the launcher prints as its own path would), or ``refused`` (the launcher
        prepares the session itself); ``stderr``: what preparing printed."""

        argv: list[str]
        env: dict[str, str]
        port: int
        real: str
        session_dir: str
        snapshot: str  # session.json as written
        files: dict[str, str]  # the other files written into the session dir (the settings file), by name
        config: ConfigWire  # the config the plan read and checked (the launcher's watchdog, watch, report)
        untrusted: list[dict[str, object]]  # what the plan left out as untrusted (the end-of-run report's)
        dropped: list[str]  # the settings sources the plan left out ("project", "local": the settings watch's)
        version: str  # the service's code (``files.fingerprint``), the launcher's too: the planner checked
        error: str
        exit: int
        refused: str
        stderr: str
