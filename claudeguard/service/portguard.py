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
owner is found by scanning ``/proc/*/fd`` (only then). ``tcp_peer`` is the same table's answer to
who is at the other end of a connection the service accepted (``service/http.py``). Linux only;
elsewhere the checks see nothing.
"""

from __future__ import annotations

import os
import socket
import struct

from claudeguard.ancestry import inside_guarded_session

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

ESTABLISHED, SYN_RECV, CLOSE_WAIT, LISTEN = 1, 3, 8, 10  # the kernel's TCP states
ANSWERING = (ESTABLISHED, SYN_RECV, CLOSE_WAIT)  # a server-side socket that has (or had) a client
STATES = (1 << ESTABLISHED) | (1 << SYN_RECV) | (1 << CLOSE_WAIT) | (1 << LISTEN)
LOCAL = ("127.0.0.1", "0.0.0.0")
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLMSG_DONE = 4, 20, 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300

# (state, local address, local port, remote address, remote port, inode)
Row = tuple[int, str, int, str, int, int]


def tcp_sockets(states: int = STATES) -> list[Row]:
    """The IPv4 TCP sockets of this network namespace in ``states`` (a bit per state)."""
    try:
        return _sock_diag(states)
    except OSError:
        return _proc_net_tcp(states)


def _sock_diag(states: int) -> list[Row]:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    try:
        # struct inet_diag_req_v2: family, protocol, ext, pad, states, and a zero inet_diag_sockid
        req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, states) + bytes(48)
        sock.sendto(struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + req,
                    (0, 0))
        rows: list[Row] = []
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return rows
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == NLMSG_DONE:
                    return rows
                if kind == NLMSG_ERROR:
                    raise OSError(-struct.unpack_from("=i", data, offset + 16)[0], "sock_diag")
                body = offset + 16  # struct inet_diag_msg: family, state, timer, retrans, the sockid, ...
                sport, dport = struct.unpack_from("!HH", data, body + 4)
                inode = struct.unpack_from("=I", data, body + 4 + 48 + 16)[0]
                rows.append((data[body + 1], socket.inet_ntoa(data[body + 8:body + 12]), sport,
                             socket.inet_ntoa(data[body + 24:body + 28]), dport, inode))
                offset += (length + 3) & ~3
    finally:
        sock.close()


def _proc_net_tcp(states: int) -> list[Row]:
    rows: list[Row] = []
    try:
        with open("/proc/net/tcp", "rb") as fh:
            lines = fh.read().decode("ascii", "replace").splitlines()[1:]
    except OSError:
        return rows

    def address(text: str) -> tuple[str, int]:
        host, port = text.split(":")
        return socket.inet_ntoa(struct.pack("<I", int(host, 16))), int(port, 16)

    for line in lines:
        fields = line.split()
        try:
            state = int(fields[3], 16)
            if states & (1 << state):
                rows.append((state, *address(fields[1]), *address(fields[2]), int(fields[9])))
        except (IndexError, ValueError):
            continue
    return rows


def tcp_rows(port: int) -> list[tuple[int, int]]:
    """(state, inode) of every socket bound to 127.0.0.1:``port`` or 0.0.0.0:``port`` (listening,
    or accepted: the server side of a connection)."""
    return [(state, inode) for state, host, local, _, _, inode in tcp_sockets() if local == port and host in LOCAL]


def tcp_peer(local_port: int, remote_port: int) -> int | None:
    """The inode of the client's socket of the loopback connection from ``remote_port`` to
    ``local_port`` (seen from the server), or None when it is not found."""
    for _state, host, sport, _, dport, inode in tcp_sockets(1 << ESTABLISHED):
        if sport == remote_port and dport == local_port and host == "127.0.0.1" and inode:
            return inode
    return None


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


def holders(inode: int) -> tuple[list[int], list[int]]:
    """Who holds the socket ``inode``: the pids found holding it, and the pids of this user whose
    descriptors cannot be listed (not dumpable: sshd's session processes, the guard's own, or a
    process that made itself so): one of those may hold it unseen."""
    wanted = f"socket:[{inode}]"
    found: list[int] = []
    hidden: list[int] = []
    uid = os.getuid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found, hidden
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except PermissionError:
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    hidden.append(pid)
            except OSError:
                pass
            continue
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") == wanted:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found, hidden


def peer_inside_session(local_port: int, remote_port: int) -> str | None:
    """Why the process at the other end of the loopback connection from ``remote_port`` to our
    ``local_port`` may not be served, or None: it runs inside a guarded session's process tree
    (what an agent started), or cannot be identified. A client socket held by no process we can
    see is let in only while no hidden process of this user (one whose descriptors we cannot
    list) runs inside a session: an ``ssh -L`` tunnel's sshd is not dumpable, and neither is a
    process an agent made so to hide from this check (then every unseen client is refused)."""
    inode = tcp_peer(local_port, remote_port)
    if inode is None:
        return "the connecting process cannot be identified"
    found, hidden = holders(inode)
    for pid in found:
        inside = inside_guarded_session(pid)
        if inside is not None:
            return f"pid {pid} ({name_of(pid)}) runs inside guarded session {inside}"
    if found:
        return None
    for pid in hidden:
        inside = inside_guarded_session(pid)
        if inside is not None and pid != os.getpid():
            return (f"the connecting process cannot be seen, and pid {pid} ({name_of(pid)}), hidden the same way, "
                    f"runs inside guarded session {inside}")
    return None


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


def name_of(pid: int) -> str:
    """The process's name (``comm``), not its command line: that may hold a secret (a desk
    login URL an agent got hold of), and a refusal is written to the audit log."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as fh:
            return fh.read().decode(errors="replace").strip()[:32] or "?"
    except OSError:
        return "?"


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            text = " ".join(p.decode(errors="replace") for p in fh.read().split(b"\0") if p)
    except OSError:
        return "?"
    return text[:200] or "?"


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
