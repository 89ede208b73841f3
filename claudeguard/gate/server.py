"""The gate server: hook decisions served from the supervisor, where the policy is loaded once.

The CLI starts a new process for every hook call, and a Python process that imports the policy
costs ~40 ms here; most of it is imports (``json``, ``re``) that the supervisor has already paid
for. So the session's claudeguard listens on ``<session dir>/gate.sock`` (a Unix socket in the
0700 session directory, mode 0600) and the hook command is a thin client (``fast_entry``: no
``site``, only ``_socket``) that hands the event over and prints the answer: ~13 ms per call.

Protocol: the client sends the server's key (one length byte, then the key, read from
``gate.key``, 0600 beside the socket), an 8-byte big-endian length and the event bytes, and
keeps its end open while it waits; the server answers ``OK`` followed by the hook's stdout
(possibly empty) and closes. A wrong key gets nothing (the connection closes). A client that
goes away (the CLI killed the hook) is noticed while its request waits in the channel, and the
request is withdrawn. Anything else (no socket, refused, a broken answer) makes the client decide
in its own process, exactly as without the server. The hook finds the session dir on its own
command line, never in the environment (``gate/fast_entry.py``).
"""

from __future__ import annotations

import hmac
import json
import os
import select
import socket
import threading

from claudeguard.files import write_atomic
from claudeguard.sockets import socket_address

SOCKET_NAME = "gate.sock"
KEY_NAME = "gate.key"
MAX_EVENT = 16 * 1024 * 1024


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        data = conn.recv(min(n, 1 << 20))
        if not data:
            raise ConnectionError("client closed early")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def client_alive(conn: socket.socket) -> bool:
    """The client sends nothing after its event: readable now means it closed."""
    try:
        ready, _, _ = select.select([conn], [], [], 0)
        if not ready:
            return True
        return conn.recv(1, socket.MSG_PEEK) != b""
    except OSError:
        return False


class GateServer:
    def __init__(self, session_dir: str) -> None:
        self.session_dir = session_dir
        self.path = os.path.join(session_dir, SOCKET_NAME)
        self.sock: socket.socket | None = None
        self.key = b""

    def start(self) -> None:
        self.key = os.urandom(24).hex().encode()
        write_atomic(os.path.join(self.session_dir, KEY_NAME), self.key + b"\n")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file is created 0600
        try:
            with socket_address(self.path) as address:
                sock.bind(address)
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(old)
        sock.listen(64)
        self.sock = sock
        threading.Thread(target=self._accept, name="claudeguard-gate", daemon=True).start()

    def _accept(self) -> None:
        while self.sock is not None:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="claudeguard-gate-call", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        from claudeguard.gate.hook import run

        try:
            key = _recv_exact(conn, _recv_exact(conn, 1)[0])
            if not hmac.compare_digest(key, self.key):
                return  # not the session's hook: nothing is decided or recorded for it
            size = int.from_bytes(_recv_exact(conn, 8), "big")
            if size > MAX_EVENT:
                return  # the client decides on its own
            text = _recv_exact(conn, size).decode("utf-8", "replace")
            out = run(text, client_alive=lambda: client_alive(conn), session_dir=self.session_dir)
            conn.sendall(b"OK" + (json.dumps(out).encode() if out is not None else b""))
        except OSError:
            pass  # the client went away, or will decide on its own
        finally:
            conn.close()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()
            for path in (self.path, os.path.join(self.session_dir, KEY_NAME)):
                try:
                    os.unlink(path)
                except OSError:
                    pass
