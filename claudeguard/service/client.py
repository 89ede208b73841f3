"""The launcher's side of the resident service: find a live service of this version or start
one, register a session, and keep the registration alive while the session runs.

A launcher holds its control connection for the session's life: when the launcher ends (or dies)
the service drops the session. When the service dies under a running session, the link starts
a new one (which takes the old port back when it can) and registers the session again with the
same secret, so the session's hooks are answered again within about a second; until then the
CLI's own flags and prompt path apply (docs/design.md, "When the service dies").
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time

from claudeguard.service import files

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Protocol

    from claudeguard.service.protocol import Received, Request

    class Listener(Protocol):
        """What the link thread tells the launcher (``shim/activity.py``'s ``Feed``)."""

        def message(self, msg: Received) -> None:
            """A line of the service with an ``event`` key (``watching``, ``stall``, ...)."""

        def lost(self) -> None:
            """The service is gone (its connection ended)."""

        def registered(self) -> None:
            """A service took the session again after ``lost``."""

START_TIMEOUT_S = 10.0


class ServiceError(Exception):
    """The service cannot be reached or started; the message is one line."""


def _connect_control(directory: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with files.socket_path(directory, files.CONTROL) as path:
            sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def request(sock: socket.socket, msg: Request, timeout: float = 10.0) -> Received:
    """One control request and its one-line answer (as received: its fields are the caller's to check)."""
    sock.settimeout(timeout)
    try:
        sock.sendall(json.dumps(msg).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ServiceError("the service closed the connection")
            data += chunk
    except OSError as exc:
        raise ServiceError(f"the service did not answer: {exc}") from None
    finally:
        sock.settimeout(None)
    reply = json.loads(data)
    return reply if isinstance(reply, dict) else {"ok": False, "error": "malformed reply"}


def _live_connection(directory: str, version: str) -> socket.socket | None:
    """A control connection to the live service of ``version``; a service of another version is
    asked to retire (it keeps serving its own sessions until they end)."""
    record = files.read_record(directory)
    if record is None:
        return None
    try:
        sock = _connect_control(directory)
    except OSError:
        return None
    try:
        hello = request(sock, {"op": "hello"})
        if hello.get("ok") and hello.get("version") == version and not hello.get("retired"):
            return sock
        if hello.get("ok") and hello.get("version") != version:
            request(sock, {"op": "retire"})
    except (ServiceError, ValueError):
        pass
    sock.close()
    return None


def live_connection(directory: str) -> socket.socket | None:
    """A control connection to the running service of whatever version, or None."""
    if files.read_record(directory) is None:
        return None
    try:
        return _connect_control(directory)
    except OSError:
        return None


def connect(directory: str | None = None) -> socket.socket:
    """A control connection to this user's service, started if needed (under ``start.lock``, so
    two launchers starting at once end up with one service)."""
    directory = directory or files.service_dir()
    version = files.fingerprint()
    sock = _live_connection(directory, version)
    if sock is not None:
        return sock
    lock = os.open(os.path.join(directory, files.START_LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _live_connection(directory, version)  # another launcher may have started it meanwhile
        if sock is not None:
            return sock
        _start(directory)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            sock = _live_connection(directory, version)
            if sock is not None:
                return sock
            time.sleep(0.02)
        raise ServiceError(f"the guard service did not start within {START_TIMEOUT_S:g} s (see "
                           f"{os.path.join(directory, files.LOG)})")
    finally:
        os.close(lock)


def _start(directory: str) -> None:
    import subprocess

    log = os.open(os.path.join(directory, files.LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDEGUARD_SESSION", "CLAUDEGUARD_HOOK_TOKEN"))}
        # -E -S like the hook entry would be wrong here: the service imports the package the
        # normal way, once, and lives on.
        # Not through procs: only the service's first process is waited for (it double-forks and exits),
        # with the service's stderr going to its log.
        first = subprocess.Popen([sys.executable, "-m", "claudeguard.service", "--detach"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=log, env=env, close_fds=True, cwd="/")
        first.wait(timeout=START_TIMEOUT_S)  # the first process forks the service and exits at once
    finally:
        os.close(log)


class Registration:
    """A session registered with the service for as long as this object lives; re-registered
    on a new service if the old one dies.

    After registering, the connection carries the watchdog's traffic (``shim/activity.py``): the
    launcher sends ``watch``, ``activity`` and ``watch-end``; the service sends events (a line
    with an ``event`` key), which the link thread hands to ``listener.message``. The listener
    also hears ``lost()`` when the service goes and ``registered()`` when a new one took the
    session again."""

    def __init__(self, session_id: str, session_dir: str, token: str, kind: str = "foreground") -> None:
        self.session_id, self.session_dir, self.token, self.kind = session_id, session_dir, token, kind
        self.port = 0
        self.sock: socket.socket | None = None
        self.closed = threading.Event()
        self.listener: Listener | None = None  # the launcher's watchdog feed, once the child runs
        self._send_lock = threading.Lock()

    def open(self) -> int:
        """Register (starting the service if needed) and return the hook port."""
        self._register()
        self._start_link()
        return self.port

    def open_started(self, port: int) -> None:
        """Register a session whose CLI already runs with hooks that name ``port``
        (``files.known_port``). Never raises: when the service cannot be had now, the link keeps
        trying as it does after the service's death (the session is as safe meanwhile: the
        CLI's own flags, no call allowed unanswered)."""
        self.port = port
        try:
            self._register()
        except (ServiceError, OSError, ValueError):
            pass  # the link finds no connection and registers it, every second, until it can
        if self.port != port and os.environ.get("CLAUDEGUARD_DEBUG"):
            print(f"claudeguard: the guard service listens on {self.port}, not {port}: this session's hooks miss it",
                  file=sys.stderr)
        self._start_link()

    def _start_link(self) -> None:
        if self.kind == "foreground":
            # The thread starts with every signal blocked: the launcher's supervisor takes its
            # signals (SIGCHLD above all) with sigwait in one thread, and a thread that left them
            # unblocked would receive and drop them (the child would never be reaped).
            import signal

            old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
            try:
                threading.Thread(target=self._watch, name="claudeguard-service-link", daemon=True).start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _register(self) -> None:
        sock = connect()
        try:
            reply = request(sock, {"op": "register", "session_id": self.session_id, "dir": self.session_dir,
                                   "token": self.token, "kind": self.kind})
        except (ServiceError, ValueError):
            sock.close()
            raise
        if not reply.get("ok"):
            sock.close()
            raise ServiceError(f"the guard service refused the session: {reply.get('error')}")
        port = reply.get("port")
        if not isinstance(port, int):
            sock.close()
            raise ServiceError(f"the guard service answered no port: {reply}")
        self.port = port
        files.bound_sends(sock)  # a service that stopped reading fails a send (then the link's EOF decides)
        old, self.sock = self.sock, sock
        if old is not None:
            old.close()  # a dead service's connection

    def request(self, msg: Request) -> Received:
        """One request on the registration's connection, and its answer (the connection carries
        no watchdog traffic: a ``--bg`` or agent view launch). ServiceError when it is closed."""
        if self.sock is None:
            raise ServiceError("the registration's connection is closed")
        return request(self.sock, msg)

    def send(self, msg: Request) -> bool:
        """One line to the service; False when the connection is gone (the link notices)."""
        sock = self.sock
        if sock is None:
            return False
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        try:
            with self._send_lock:
                sock.sendall(data)
        except OSError:
            return False
        return True

    def _tell(self, what: str, msg: Received | None = None) -> None:
        """``listener.message(msg)``, ``.lost()`` or ``.registered()``, if there is a listener;
        what it raises is said on stderr, and the link lives on."""
        listener = self.listener
        if listener is None:
            return
        try:
            if msg is not None:
                listener.message(msg)
            elif what == "lost":
                listener.lost()
            else:
                listener.registered()
        except Exception as exc:  # noqa: BLE001 - the link must live on
            print(f"claudeguard: service link: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def _watch(self) -> None:
        """Read the service's events until EOF, which means the service is gone: then tell the
        listener and register again (every second) until a service takes the session."""
        while not self.closed.is_set():
            sock = self.sock
            buf = b""
            while sock is not None:
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    break
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(msg, dict) and "event" in msg:
                        self._tell("message", msg)
            if self.closed.is_set():
                return
            self._tell("lost")
            while not self.closed.is_set():
                try:
                    self._register()
                except (ServiceError, OSError, ValueError):
                    if self.closed.wait(1.0):
                        return
                    continue
                self._tell("registered")
                break

    def close(self) -> None:
        self.closed.set()
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
