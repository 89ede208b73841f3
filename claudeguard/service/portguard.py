"""Who answers on the hooks' port: the launcher's check that nothing but the guard service takes
its CLI's hook calls.

The CLI posts every hook to ``127.0.0.1:PORT``; whoever holds that port's listening socket and
accepts answers them, "allow" included. The launcher holds the listening socket itself (handed
over by the service, ``SCM_RIGHTS``), so no other process can bind the port while the session
lives; what is left is a process that got the socket some other way (``pidfd_getfd`` where the
kernel lets the user's processes take each other's descriptors). ``PortGuard.check`` reads the
kernel's TCP table (``/proc/net/tcp``) once a second: a listening socket on the port that is not
the one the launcher holds, or an accepted connection on it that is not the service's (its
inode is not among the service's descriptors), is a foreign answerer; the owner is found by
scanning ``/proc/*/fd`` (only then). Linux only; elsewhere the check sees nothing.
"""

from __future__ import annotations

import os

from claudeguard.ancestry import inside_guarded_session

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Iterable

LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex)
ANY = "00000000"
LISTEN, ESTABLISHED, SYN_RECV, CLOSE_WAIT = "0A", "01", "03", "08"
ANSWERING = (ESTABLISHED, SYN_RECV, CLOSE_WAIT)  # a server-side socket that has (or had) a client


def tcp_rows(port: int, table: str = "/proc/net/tcp") -> list[tuple[str, int]]:
    """(state, inode) of every socket of the table bound to 127.0.0.1:``port`` or 0.0.0.0:``port``
    (listening or accepted); empty when the table cannot be read."""
    want = f":{port:04X}"
    rows: list[tuple[str, int]] = []
    try:
        with open(table, "rb") as fh:
            lines = fh.read().decode("ascii", "replace").splitlines()[1:]
    except OSError:
        return rows
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or not fields[1].endswith(want) or fields[1][:8] not in (LOOPBACK, ANY):
            continue
        try:
            rows.append((fields[3], int(fields[9])))
        except ValueError:
            continue
    return rows


def socket_inodes(pid: int) -> set[int] | None:
    """The socket inodes process ``pid`` holds; None when its descriptors cannot be read."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None
    found = set()
    for name in names:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def owners(inodes: Iterable[int]) -> list[int]:
    """The pids of every process (that this user may look at) holding one of ``inodes``."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    found: list[int] = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") in wanted:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


def is_guard_service(pid: int) -> bool:
    """``pid`` runs the guard service (``python -m claudeguard.service``) outside every guarded
    session (one an agent started in its own tree is not the guard: ``ancestry``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return False
    if b"claudeguard.service" not in args[1:4] or args[args.index(b"claudeguard.service") - 1] != b"-m":
        return False
    return inside_guarded_session(pid) is None


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            text = " ".join(p.decode(errors="replace") for p in fh.read().split(b"\0") if p)
    except OSError:
        return "?"
    return text[:200] or "?"


class PortGuard:
    """The check of one session's hook port. ``held``: the inode of the listening socket the
    launcher holds; ``service``: a callable giving the pid of the service it is registered with
    (None while none is)."""

    def __init__(self, port: int, held: int) -> None:
        self.port = port
        self.held = held
        self._service_pid: int | None = None
        self._service_inodes: set[int] = set()

    def check(self, service_pid: int | None) -> str | None:
        """None while only the service answers on the port; else one line naming who does."""
        if service_pid != self._service_pid:
            self._service_pid, self._service_inodes = service_pid, set()
        suspects = self._suspects()
        if not suspects:
            return None
        # Confirm on a fresh read (a connection the service accepted and closed between the two
        # reads is gone; one it accepted since is in its descriptors now).
        self._refresh()
        suspects &= self._suspects()
        if not suspects:
            return None
        pids = [p for p in owners(suspects) if p not in (service_pid, os.getpid())]
        for pid in [p for p in pids if is_guard_service(p)]:
            # The service's successor answers the calls that queued while none lived, before
            # this launcher has registered with it: it is the service from now on.
            self._service_pid, self._service_inodes = pid, socket_inodes(pid) or set()
            pids.remove(pid)
        if not pids:
            return None  # gone meanwhile, or hidden from us: nothing to name (the next round looks again)
        pid = pids[0]
        return f"127.0.0.1:{self.port} answered by pid {pid} ({command_of(pid)}), not the guard service"

    def _suspects(self) -> set[int]:
        rows = tcp_rows(self.port)
        suspects = {inode for state, inode in rows if state == LISTEN and inode not in (0, self.held)}
        answering = {inode for state, inode in rows if state in ANSWERING and inode != 0}
        if answering - self._service_inodes:
            self._refresh()
        return suspects | (answering - self._service_inodes)

    def _refresh(self) -> None:
        if self._service_pid is not None:
            self._service_inodes = socket_inodes(self._service_pid) or set()
