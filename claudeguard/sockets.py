"""What both ends of our private Unix sockets do alike: reach a socket path past AF_UNIX's length
limit, tell who the peer is, and read a message that ends when the peer shuts its side. Only
``_socket``, ``os`` and ``sys``: the launcher's start path uses it (shim/planned.py), with a
``_socket`` socket as well as a ``socket`` one."""

from __future__ import annotations

import _socket
import os
import sys


class socket_address:
    """The address to bind or connect ``path`` by: the path itself, or, past the 107 bytes a Unix
    socket path may have (a long CLAUDEGUARD_RUNTIME_DIR), the same file reached through
    ``/proc/self/fd/N`` of its directory (Linux), which keeps the socket in its private directory.
    ``with socket_address(path) as address: sock.connect(address)``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> str:
        if len(os.fsencode(self.path)) < 108:
            return self.path
        self.fd = os.open(os.path.dirname(self.path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return f"/proc/self/fd/{self.fd}/{os.path.basename(self.path)}"

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def peer_creds(sock: _socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end, as the kernel recorded it when the connection
    was made (SO_PEERCRED's ``struct ucred``: pid, uid, gid), or None where the kernel does not
    say. The pid is in our pid namespace: 0 for a process outside it."""
    try:
        creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except (OSError, AttributeError):
        return None
    return int.from_bytes(creds[0:4], sys.byteorder), int.from_bytes(creds[4:8], sys.byteorder)


def peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process at the other end, or None where the kernel does not say."""
    creds = peer_creds(sock)
    return creds[1] if creds is not None else None


def is_own_user(sock: _socket.socket) -> bool:
    """The peer is a process of this user (and the kernel said so)."""
    return peer_uid(sock) == os.getuid()


def read_to_end(sock: _socket.socket, limit: int) -> bytes | None:
    """Everything the peer sends until it shuts its side; None past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return b"".join(chunks)
        size += len(data)
        if size > limit:
            return None
        chunks.append(data)
