"""Who holds a TCP socket of this machine: the kernel's socket table (``NETLINK_SOCK_DIAG``, or
``/proc/net/tcp`` and ``tcp6``) and the processes' descriptors (``/proc/*/fd``).

Used wherever the guard meets a process over loopback TCP and must know whether an agent is at
the other end: the launcher's watch of its hook port (``service/portguard.py``), the service's
hook and desk servers (who connected), and the fleet's Redis connections (who accepted: an agent
that bound the Redis port while Redis was down must get neither the credentials nor a say,
``fleet/conn.py``). Linux only; elsewhere the table is empty and nothing is found. Imports the
standard library and ``ancestry`` only.
"""

from __future__ import annotations

import os
import socket
import struct
import time

from claudeguard.ancestry import inside_guarded_session

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Iterable

ESTABLISHED, SYN_RECV, CLOSE_WAIT, LISTEN = 1, 3, 8, 10  # the kernel's TCP states
ANSWERING = (ESTABLISHED, SYN_RECV, CLOSE_WAIT)  # a server-side socket that has (or had) a client
STATES = (1 << ESTABLISHED) | (1 << SYN_RECV) | (1 << CLOSE_WAIT) | (1 << LISTEN)
LOCAL = ("127.0.0.1", "0.0.0.0")
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLMSG_DONE = 4, 20, 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
ACCEPT_WAIT_S = 2.0  # how long a server on this machine may take to accept our connection

# (state, local address, local port, remote address, remote port, inode)
Row = tuple[int, str, int, str, int, int]


def tcp_sockets(states: int = STATES, family: int = socket.AF_INET) -> list[Row]:
    """The TCP sockets of this network namespace in ``states`` (a bit per state), of ``family``
    (AF_INET, or AF_INET6: addresses as ``socket.inet_ntop`` writes them)."""
    try:
        return _sock_diag(states, family)
    except OSError:
        return _proc_net_tcp(states, family)


def _sock_diag(states: int, family: int) -> list[Row]:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    size = 4 if family == socket.AF_INET else 16
    try:
        # struct inet_diag_req_v2: family, protocol, ext, pad, states, and a zero inet_diag_sockid
        req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, states) + bytes(48)
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
                rows.append((data[body + 1], socket.inet_ntop(family, data[body + 8:body + 8 + size]), sport,
                             socket.inet_ntop(family, data[body + 24:body + 24 + size]), dport, inode))
                offset += (length + 3) & ~3
    finally:
        sock.close()


def _proc_net_tcp(states: int, family: int) -> list[Row]:
    rows: list[Row] = []
    try:
        with open("/proc/net/tcp" if family == socket.AF_INET else "/proc/net/tcp6", "rb") as fh:
            lines = fh.read().decode("ascii", "replace").splitlines()[1:]
    except OSError:
        return rows

    def address(text: str) -> tuple[str, int]:
        host, port = text.split(":")
        raw = bytes.fromhex(host)  # 32-bit words, each in the machine's (little-endian) order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
        return socket.inet_ntop(family, raw), int(port, 16)

    for line in lines:
        fields = line.split()
        try:
            state = int(fields[3], 16)
            if states & (1 << state):
                rows.append((state, *address(fields[1]), *address(fields[2]), int(fields[9])))
        except (IndexError, ValueError, OSError):
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
    return holder_inside_session(inode, "the connecting process")


def server_inside_session(sock: socket.socket, *, unseen_ok: bool = False) -> str | None:
    """Why the server at the other end of our connected TCP ``sock`` may not be trusted, or None:
    its accepted socket is in this machine's table (a server here, on any local address) and a
    process inside a guarded session holds it, or none we can see does while a hidden process
    of this user runs inside one (see ``peer_inside_session``). A server on another machine is
    not in the table: None (what protects that link is TLS, not this check). A loopback server
    the table does not show (NAT into a container) is refused unless ``unseen_ok`` (the caller
    checks the server's certificate)."""
    try:
        local, peer = sock.getsockname(), sock.getpeername()
    except OSError:
        return "the connection is gone"
    ours, theirs = (local[0], local[1]), (peer[0], peer[1])
    tables = [(sock.family, ours, theirs)]
    if sock.family == socket.AF_INET:  # a dual-stack server (bound to ::) accepts it as an IPv6 socket
        tables.append((socket.AF_INET6, (f"::ffff:{ours[0]}", ours[1]), (f"::ffff:{theirs[0]}", theirs[1])))
    loopback = peer[0].startswith("127.") or peer[0] in ("::1", "::ffff:127.0.0.1")
    # The kernel completes a connection before the server accepts it; until then the server's
    # socket has no inode (no process holds it yet): look again, for a while.
    deadline = time.monotonic() + ACCEPT_WAIT_S
    while True:
        waiting = False
        for family, mine, server in tables:
            for _state, host, port, rhost, rport, inode in tcp_sockets(1 << ESTABLISHED, family):
                if (host, port) == server and (rhost, rport) == mine:
                    if inode:
                        return holder_inside_session(inode, "the serving process")
                    waiting = True
        if not (waiting or loopback) or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if (waiting or loopback) and not unseen_ok:  # a loopback server is in the table, unless NAT moved it
        return "the serving process cannot be identified (it has not accepted the connection)" if waiting else \
            "the serving process cannot be identified"
    return None


def holder_inside_session(inode: int, who: str) -> str | None:
    """Why the holder of socket ``inode`` (``who``, for the message) is not to be trusted, or None."""
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
            return (f"{who} cannot be seen, and pid {pid} ({name_of(pid)}), hidden the same way, "
                    f"runs inside guarded session {inside}")
    return None


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
