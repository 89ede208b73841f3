"""Stop the resident guard services a test started: each test's runtime dir lies under its tmp
dir, and the service a launcher started there outlives the launcher by design (idle exit)."""

from __future__ import annotations

import json
import os
import signal
import time

from claudeguard.procs import environ_of, process_start

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path


def live_services(root: Path) -> list[int]:
    """Pids of live services whose record lies under ``root`` (in any home's slot: ``service``,
    ``service-<key>``)."""
    pids = []
    # os.walk, not Path.rglob: a dir that goes while it is walked (a CLI's lock dir, a session's)
    # is skipped, where rglob raises (run 18's teardown, and the service it then left running).
    for here, _dirs, files in os.walk(root):
        if "service.json" not in files or not os.path.basename(here).startswith("service"):
            continue
        try:
            with open(os.path.join(here, "service.json"), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        pid = data.get("pid")
        if isinstance(pid, int) and process_start(pid) == data.get("start"):
            pids.append(pid)
    return pids


def services_of_homes_under(root: Path) -> list[int]:
    """Pids of this user's guard services (and their planners) whose HOME lies under ``root``,
    published or not: one still starting when its test ended has no record yet, and would live
    on until its idle exit."""
    prefix = str(root).rstrip("/") + "/"
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if b"claudeguard.service" not in argv and b"claudeguard.service.planner" not in argv:
            continue
        if (environ_of(int(name)).get("HOME", "") + "/").startswith(prefix):
            pids.append(int(name))
    return pids


STOP_WAVES = 3  # scans of stop_services: one service spawned while the last scan ran is caught by the next


def stop_services(root: Path, timeout: float = 5.0) -> list[int]:
    """SIGTERM each live service under ``root`` (SIGKILL after ``timeout``), then look again, until
    a scan finds none (at most ``STOP_WAVES``): a launcher killed while it started a service
    leaves its ``--detach`` parent, which may fork the service after the scan that found (and
    stopped) the parent; the child exists by the time the parent is gone, so the next scan finds
    it. The pids stopped."""
    stopped: list[int] = []
    for _ in range(STOP_WAVES):
        pids = sorted((set(live_services(root)) | set(services_of_homes_under(root))) - set(stopped))
        if not pids:
            break
        stopped += _stop(pids, timeout)
    return stopped


def _stop(pids: list[int], timeout: float) -> list[int]:
    for pid in list(pids):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pids.remove(pid)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while process_start(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process_start(pid) is not None:
            os.kill(pid, signal.SIGKILL)
    return pids
