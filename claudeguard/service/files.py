"""Where the resident service lives and how a launcher recognises a live service of its version.

``<runtime>/service/`` (0700, checked like every runtime dir) holds:

- ``service.json``: ``{pid, start, version, port, started, home}``, written by the service (temp file +
  rename) once it listens; removed by the service when it exits. A record whose pid is gone, or
  now belongs to another process (start time), is stale and ignored.
- ``control.sock``: the service's Unix control socket (0600): register/unregister, status, stop.
- ``start.lock``: ``flock``ed by a launcher while it checks for a service and starts one, so two
  launchers that start at the same moment end up with one service.
- ``run.lock``: ``flock``ed by the service for its whole life: a second service in the same slot
  gives up at once.
- ``service.log``: the service's stderr (appended; a crash's traceback lands here).

The hooks' port is not kept in a file for a successor: the launchers of running sessions hold
its listening socket and hand it to the next service (``client.py``), so no other process can
take it in between.
"""

from __future__ import annotations

import json
import os

from claudeguard.files import read_json, write_atomic
from claudeguard.procs import process_start

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    import socket
    from typing import TypedDict

    from claudeguard.sockets import socket_address

    class _ServiceRecord(TypedDict):
        pid: int
        start: str | None  # procs.process_start of pid: a record of a dead service is stale
        version: str  # its fingerprint
        port: int  # the hook port
        started: float  # time.time() at its start

    class ServiceRecord(_ServiceRecord, total=False):
        """``service.json``: the live service, written once it listens (again when its desk starts)."""

        desk_port: int  # the desk's own port, once someone asked for the desk
        home: str  # the home it serves (home.home_of: its HOME's real path); doctor names another home's

RECORD = "service.json"
RETIRED_PREFIX = "retired-"  # retired-<pid>.json: a retired service still serving (retired_path)
CONTROL = "control.sock"
START_LOCK = "start.lock"
RUN_LOCK = "run.lock"
LOG = "service.log"


def socket_path(directory: str, name: str) -> socket_address:
    """``with socket_path(d, CONTROL) as path``: a path to ``name`` in ``directory`` short enough
    for AF_UNIX (``sockets.socket_address``: past the limit, through ``/proc/self/fd/N`` of the
    directory)."""
    from claudeguard.sockets import socket_address

    return socket_address(os.path.join(directory, name))


SEND_TIMEOUT_S = 2  # seconds a control line may wait for room in the socket


def bound_sends(sock: socket.socket) -> None:
    """Make a control connection's sends fail after ``SEND_TIMEOUT_S`` instead of hanging: a
    peer that stopped reading must not hold the writer (the launcher's relay, or the service's
    one sampling thread that writes to every launcher)."""
    import socket
    import struct

    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT_S, 0))
    except (OSError, struct.error):
        pass


def service_dir() -> str:
    """This home's service slot (``paths.service_slot``): ``<runtime>/service``, or
    ``<runtime>/service-<key>`` for a home that shares another home's runtime dir."""
    from claudeguard.paths import service_slot

    return str(service_slot())


def fingerprint(root: str | None = None) -> str:
    """The installed code's identity: a launcher talks only to a service of the same one. The
    package version alone does not change between builds, so the names, sizes and mtimes of the
    package's sources are hashed too (a stat per file, no reads). ``root``: the package dir of
    another process (a launcher asking the planner), else ours.

    What went into the last answer for a root is kept (``_SEEN``): asked again (the planner, for
    every launcher), a stat of each dir (a name added, removed or renamed there changes its
    ctime, which no one can set back, as ``utime`` can an mtime) and of each source (an edit in
    place changes its ctime too) says whether it still holds, without listing and sorting the
    tree again (~0.25 ms against ~0.6)."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    seen = _SEEN.get(root)
    if seen is not None and all(_stamp(path) == stamp for path, stamp in seen[0]):
        return seen[1]
    import zlib

    from claudeguard import __version__

    parts = [__version__]
    stamps: list[tuple[str, tuple[int, int, int]]] = []
    skip = len(root) + 1  # the path below root, as os.path.relpath gives it (for ~100 files: 2 ms less)
    for dirpath, dirnames, filenames in os.walk(root):
        stamps.append((dirpath, _stamp(dirpath)))
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                parts.append(f"{path[skip:]}:{st.st_size}:{st.st_mtime_ns}")
                stamps.append((path, (st.st_size, st.st_mtime_ns, st.st_ctime_ns)))
    found = f"{__version__}+{zlib.crc32(chr(0).join(parts).encode()):08x}"
    _SEEN[root] = (stamps, found)
    return found


# root -> (each dir's and source's stamp as the last walk saw it, the fingerprint it gave)
_SEEN: dict[str, tuple[list[tuple[str, tuple[int, int, int]]], str]] = {}


def _stamp(path: str) -> tuple[int, int, int]:
    """A dir's or a file's (size, mtime, ctime): all -1 when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, -1)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_record(directory: str) -> ServiceRecord | None:
    """The live service's record, or None (missing, unreadable, not a record, or stale)."""
    return _live_record(os.path.join(directory, RECORD))


def retired_path(directory: str, pid: int) -> str:
    """Where a retired service (one that gave its slot to another install's) says it still
    serves its sessions: written at retirement, removed at its exit."""
    return os.path.join(directory, f"{RETIRED_PREFIX}{pid}.json")


def write_retired(directory: str, record: ServiceRecord) -> None:
    write_atomic(retired_path(directory, record["pid"]), json.dumps(record))


def read_retired(directory: str) -> list[ServiceRecord]:
    """The records of this slot's retired services still alive (stale ones are ignored)."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(RETIRED_PREFIX) and n.endswith(".json"))
    except OSError:
        return []
    return [r for r in (_live_record(os.path.join(directory, n)) for n in names) if r is not None]


def _live_record(path: str) -> ServiceRecord | None:
    record = read_json(path)
    if record is None:
        return None
    pid, start, version, port, started = (record.get(k) for k in ("pid", "start", "version", "port", "started"))
    if not isinstance(pid, int) or process_start(pid) != start:
        return None
    found: ServiceRecord = {"pid": pid, "start": start, "version": version if isinstance(version, str) else "",
                            "port": port if isinstance(port, int) else 0,
                            "started": started if isinstance(started, (int, float)) else 0.0}
    if isinstance(record.get("home"), str):
        found["home"] = str(record.get("home"))
    desk_port = record.get("desk_port")
    if isinstance(desk_port, int):
        found["desk_port"] = desk_port
    return found


def known_port(directory: str | None = None) -> int | None:
    """The hook port of a live service of this version, from its record alone (no connection,
    no ``socket`` import): a launcher that has it starts the CLI at once and registers while
    the CLI starts (``client.Registration.open_started``); the service holds the session's
    first requests until then (``server.REGISTRATION_WAIT_S``). None: no such service."""
    record = read_record(directory or service_dir())
    if record is None or record["version"] != fingerprint():
        return None
    port = record["port"]
    return port if 0 < port < 65536 else None


def write_record(directory: str, record: ServiceRecord) -> None:
    write_atomic(os.path.join(directory, RECORD), json.dumps(record))
