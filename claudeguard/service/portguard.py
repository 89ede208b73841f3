"""Who answers on the hooks' port: the launcher's check that nothing but the guard service takes
its CLI's hook calls.

The CLI posts every hook to ``127.0.0.1:PORT``; whoever holds that port's listening socket and
accepts answers them, "allow" included. The launcher holds the listening socket itself (handed
over by the service, ``SCM_RIGHTS``), so no other process can bind the port while the session
lives; what is left is a process that got the socket some other way (``pidfd_getfd`` where the
kernel lets the user's processes take each other's descriptors). ``PortGuard.check`` asks the
kernel for the TCP sockets in the states that matter (``NETLINK_SOCK_DIAG``: ~0.2 ms here, where
formatting ``/proc/net/tcp``, the fallback, took 4-12 ms) once a second: a listening socket on
the port that is not the one the launcher holds, or an accepted connection on it that is not
the service's (its inode is not among the service's descriptors), is a foreign answerer; the
owner is found by scanning ``/proc/*/fd`` (only then): ``tcp_owner``. Linux only; elsewhere the
checks see nothing.
"""

from __future__ import annotations

import os

from claudeguard.ancestry import inside_guarded_session
from claudeguard.tcp_owner import ANSWERING, LISTEN, command_of, owners, socket_inodes, tcp_rows

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Callable


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


class PortGuard:
    """The check of one session's hook port. ``held``: the inode of the listening socket the
    launcher holds; ``ask``: the socket inodes of the service of a pid (the service is not
    dumpable, so its descriptors are not ours to list: the launcher asks it, ``client.py``)."""

    def __init__(self, port: int, held: int, ask: Callable[[int], set[int] | None] | None = None) -> None:
        self.port = port
        self.held = held
        self._ask = ask or socket_inodes
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
            self._service_pid, self._service_inodes = pid, self._ask(pid) or set()
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
            self._service_inodes = self._ask(self._service_pid) or set()
