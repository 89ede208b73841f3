"""Other homes' guards beside this one, for ``claudeguardctl doctor`` (claudeguard/home.py).

Each home of a user has its own runtime dir (``/tmp/claudeguard-<uid>`` for the user's own home,
``/tmp/claudeguard-<uid>-<key>`` for another), and within a runtime dir shared on purpose each
home has its own service slot. Neither answers, stops or takes over the other's sessions; doctor
names the others that are in use, so that a request missing from ``pending`` can be found,
and the retired service of another install of this home that still serves its sessions.
"""

from __future__ import annotations

import os

from claudeguard import home, paths
from claudeguard.errors import InsecurePathError
from claudeguard.service import files


def _in_use(directory: str) -> tuple[files.ServiceRecord | None, int]:
    """The live service of a runtime dir's slot (or None) and how many sessions it has."""
    record = files.read_record(directory)
    sessions = 0
    try:
        sessions = len(os.listdir(os.path.join(os.path.dirname(directory), "sessions")))
    except OSError:
        pass
    return record, sessions


def _said(where: str, whose: str, record: files.ServiceRecord | None, sessions: int) -> str:
    service = f"service pid {record['pid']}" if record is not None else "no service"
    return f"{where} ({whose}): {service}, {sessions} session{'s' if sessions != 1 else ''}"


def other_homes(root: str) -> list[str]:
    """One line for each other home of this user whose guard is in use: another runtime dir of
    this uid in the shared tmp dir, or another home's service slot in ``root``."""
    lines: list[str] = []
    uid = os.getuid()
    base = os.path.join(paths.SHARED_TMP, f"claudeguard-{uid}")
    try:
        names = sorted(os.listdir(paths.SHARED_TMP))
    except OSError:
        names = []
    for name in names:
        other = os.path.join(paths.SHARED_TMP, name)
        if not (other == base or other.startswith(base + "-")) or os.path.abspath(other) == os.path.abspath(root):
            continue
        try:
            paths.check_private_dir(other)  # ours, 0700, not a link: else not a guard of ours to name
        except (OSError, InsecurePathError):
            continue
        marker = home.read_marker(other)
        whose = f"HOME {marker['home']}" if marker is not None else "home not recorded"
        record, sessions = _in_use(os.path.join(other, "service"))
        if record is None and not sessions:
            continue
        lines.append(f"another home's guard beside this one: {_said(other, whose, record, sessions)}; its requests, "
                     f"sessions and desk are its own (CLAUDEGUARD_RUNTIME_DIR={other} claudeguardctl pending)")
    mine = home.service_slot(root, shared_tmp=paths.SHARED_TMP)
    try:
        slots = sorted(n for n in os.listdir(root) if n.startswith("service") and n != mine)
    except OSError:
        slots = []
    for slot in slots:
        record = files.read_record(os.path.join(root, slot))
        if record is not None:
            whose = f"HOME {record.get('home') or '?'}"
            lines.append(f"another home's guard service in this runtime dir: {os.path.join(root, slot)} ({whose}, "
                         f"pid {record['pid']}): it serves that home's sessions with that home's config and desk; "
                         f"the channel is shared")
    return lines


def other_installs() -> list[str]:
    """One line for each retired service of this slot still alive: another install (another code
    version) in this home whose launcher's service this one's took over. It serves its sessions,
    and the desk it had, until they end."""
    return [f"a guard service of another install (version {r['version']}) still serves the sessions it had "
            f"here until they end: pid {r['pid']}; new sessions and `claudeguardctl desk` are this install's "
            f"service's" for r in files.read_retired(files.service_dir())]
