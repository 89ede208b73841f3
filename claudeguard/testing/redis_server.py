"""A real ``redis-server`` (the Debian package, on PATH) for the fleet's tests and bench: on a
free loopback port, no persistence, its files in a directory of the caller's, stopped by pid.

``RedisServer(dir).start()`` ... ``.stop()``; ``.kill()`` (SIGKILL, as a crash) and ``.start()``
again on the same port (it comes back empty: nothing is saved); ``.admin()`` a client of the
default user (every right) for setting ACLs up and for faults (``CLIENT PAUSE``, ``FLUSHALL``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess

from claudeguard.fleet.config import fleet_settings
from claudeguard.testing.wait import wait_until

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

ADMIN_PASSWORD = "test-admin-password-not-a-secret"


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    def __init__(self, directory: Path, port: int | None = None, *, tls: bool = False) -> None:
        self.dir = directory
        self.port = port or free_port()
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    @property
    def ca_file(self) -> str:
        """With ``tls``: the test CA that signed the server's certificate (made by ``start``)."""
        return str(self.dir / "ca.crt")

    def _make_certificates(self) -> None:
        """A CA and a server certificate for 127.0.0.1 and localhost, with the openssl command."""
        if (self.dir / "server.crt").exists():
            return
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("openssl is not on PATH (needed for a TLS redis-server)")
        d = self.dir
        (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        for args in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=claudeguard test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "san.cnf"],
        ):
            # Not procs.capture: a failure must raise (check), with openssl's output kept for it.
            subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True, timeout=60)

    def start(self) -> RedisServer:
        binary = redis_server_path()
        if binary is None:
            raise RuntimeError("redis-server is not on PATH (Debian package redis-server)")
        conf = self.dir / "redis.conf"  # the admin password in a file, not in argv
        listen = f"port {self.port}\n"
        if self.tls:
            self._make_certificates()
            listen = (f"port 0\ntls-port {self.port}\ntls-cert-file {self.dir / 'server.crt'}\n"
                      f"tls-key-file {self.dir / 'server.key'}\ntls-ca-cert-file {self.ca_file}\n"
                      "tls-auth-clients no\n")
        conf.write_text(f"{listen}bind 127.0.0.1\nsave \"\"\nappendonly no\ndir {self.dir}\n"
                        f"requirepass {ADMIN_PASSWORD}\ndaemonize no\nlogfile {self.dir / 'redis.log'}\n")
        conf.chmod(0o600)
        # Not through procs: the test's redis-server, held by its handle (stopped and waited for by pid).
        self.proc = subprocess.Popen([binary, str(conf)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(self._ready, 10, f"redis-server on port {self.port}")
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {log}")
        try:
            client = self.admin()
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:  # noqa: BLE001 - not listening yet
            return False

    def admin(self) -> Any:
        """A client of the default user (every right), through the fleet's own connect (nothing
        outside claudeguard/fleet/ imports redis); its password in a 0600 file."""
        from claudeguard.fleet.conn import connect  # noqa: PLC0415 - the fleet's optional extra (redis): only here

        secret = self.dir / "admin.pw"
        if not secret.exists():
            fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(ADMIN_PASSWORD + "\n")
        table = {"url": self.url, "password_file": str(secret), "machine": "admin"}
        if self.tls:
            table["ca_file"] = self.ca_file
        cfg = fleet_settings(table, environ={})
        assert cfg is not None
        return connect(cfg, io_timeout=10)

    def kill(self) -> None:
        """SIGKILL, as a crash; waits for it to be gone."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_port_free(port: int, timeout: float = 10.0) -> None:
    """After a kill, until the port can be bound again (redis sets SO_REUSEADDR, so at once)."""
    def free() -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    wait_until(free, timeout, f"port {port} free")
