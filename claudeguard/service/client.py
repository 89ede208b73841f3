"""The launcher's side of the resident service: find a live service of this version or start
one, register a session, and keep the registration alive while the session runs.

A launcher holds its control connection for the session's life: when the launcher ends (or dies)
the service drops the session. It also holds the hooks' listening socket, which the service
hands it with the registration (SCM_RIGHTS): while any session's launcher lives, no other process
can bind that port, not even while no service lives. When the service dies under a running
session, the link starts a new one with that socket (``--listen-fd``), or hands it to whichever
service it finds, and registers the session again with the same secret, so the calls that
queued on the socket meanwhile and the later ones are answered by the new service
(docs/design.md, "When the service dies"). The launcher never registers with, or hands its
socket to, a service that runs inside a guarded session's process tree (``ancestry``): an agent
that killed the service and started one of its own would get the session's hooks. A check
once a second (``portguard``) ends the session as compromised if a process other than the
service answers on the port.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time

from claudeguard.ancestry import inside_guarded_session
from claudeguard.procs import not_dumpable, process_start, start_thread
from claudeguard.service import files
from claudeguard.sockets import peer_creds

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable, Protocol

    from claudeguard.service.protocol import Received, RegisterCli, Request

    class Listener(Protocol):
        """What the link thread tells the launcher (``shim/activity.py``'s ``Feed``)."""

        def message(self, msg: Received) -> None:
            """A line of the service with an ``event`` key (``watching``, ``stall``, ...)."""

        def lost(self) -> None:
            """The service is gone (its connection ended)."""

        def registered(self) -> None:
            """A service took the session again after ``lost``."""

# Seconds a new service may take to answer: ~0.3 s on a quiet machine, over 10 s seen at load 17
# on 2 cores (the suite's workers beside eight busy processes); the wait ends as soon as it answers.
START_TIMEOUT_S = 30.0
GUARD_EVERY_S = 1.0  # how often the launcher checks who answers on its hooks' port
MAX_FDS = 4


class ServiceError(Exception):
    """The service cannot be reached or started; the message is one line."""


class InsideSession(ServiceError):
    """The service found runs inside a guarded session's process tree: never used."""


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
    reply, fds = request_fds(sock, msg, None, timeout)
    for fd in fds:
        os.close(fd)  # nothing asked for one
    return reply


def request_fds(sock: socket.socket, msg: Request, fds: list[int] | None,
                timeout: float = 10.0) -> tuple[Received, list[int]]:
    """One control request carrying ``fds`` (SCM_RIGHTS), and its answer with the descriptors
    that came with it (close-on-exec, the caller's to close)."""
    received: list[int] = []
    sock.settimeout(timeout)
    try:
        line = json.dumps(msg).encode() + b"\n"
        if fds:
            line = line[socket.send_fds(sock, [line], fds):]
        sock.sendall(line)
        data = b""
        while not data.endswith(b"\n"):
            chunk, got, _, _ = socket.recv_fds(sock, 65536, MAX_FDS, socket.MSG_CMSG_CLOEXEC)
            received += got
            if not chunk:
                raise ServiceError("the service closed the connection")
            data += chunk
    except OSError as exc:
        for fd in received:
            os.close(fd)
        raise ServiceError(f"the service did not answer: {exc}") from None
    finally:
        sock.settimeout(None)
    try:
        reply = json.loads(data)
    except ValueError:
        reply = None
    return (reply if isinstance(reply, dict) else {"ok": False, "error": "malformed reply"}), received


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


def connect(directory: str | None = None, listener: socket.socket | None = None,
            version: str | None = None) -> socket.socket:
    """A control connection to this user's service, started if needed (under ``start.lock``, so
    two launchers starting at once end up with one service); a service started here answers on
    ``listener``, the hooks' socket this launcher held (else on a new port). ``version``: this
    code's ``files.fingerprint()``, when the caller has it already."""
    directory = directory or files.service_dir()
    version = version or files.fingerprint()
    sock = _live_connection(directory, version)
    if sock is not None:
        return sock
    lock = os.open(os.path.join(directory, files.START_LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _live_connection(directory, version)  # another launcher may have started it meanwhile
        if sock is not None:
            return sock
        _start(directory, listener)
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


def _start(directory: str, listener: socket.socket | None = None) -> None:
    import subprocess

    log = os.open(os.path.join(directory, files.LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDEGUARD_SESSION", "CLAUDEGUARD_HOOK_TOKEN"))}
        # -E -S like the hook entry would be wrong here: the service imports the package the
        # normal way, once, and lives on.
        # Not through procs: only the service's first process is waited for (it double-forks and exits),
        # with the service's stderr going to its log.
        argv = [sys.executable, "-m", "claudeguard.service", "--detach"]
        keep: tuple[int, ...] = ()
        if listener is not None:  # the service before it had this socket: the hooks name its port
            keep = (listener.fileno(),)
            argv += ["--listen-fd", str(listener.fileno())]
        first = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env,
                                 close_fds=True, pass_fds=keep, cwd="/")
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

    def __init__(self, session_id: str, session_dir: str, token: str, kind: str = "foreground",
                 cli_pid: int = 0, verify: str | None = None, version: str | None = None) -> None:
        self.session_id, self.session_dir, self.token, self.kind = session_id, session_dir, token, kind
        self.port = 0
        self.sock: socket.socket | None = None
        self.closed = threading.Event()
        self.listener: Listener | None = None  # the launcher's watchdog feed, once the child runs
        self.held: socket.socket | None = None  # the hooks' listening socket, held for the session's life
        self.service_pid: int | None = None  # the service registered with (SO_PEERCRED), None between two
        self.compromised: str | None = None  # why the session was ended as compromised, once it was
        self.on_compromised: Callable[[str], None] | None = None
        # The CLI: the only process whose hook posts the service takes for a foreground session,
        # and whose tree a compromised session stops (``guard``).
        self._cli_pid = cli_pid
        self._verify = verify  # the CLI the service verifies in the background if it has not been
        # This code's fingerprint, when the planner said it (it checked it against its own): no
        # walk of the package's files while the CLI starts.
        self._version = version
        self._send_lock = threading.Lock()
        self._sockets: set[int] = set()  # the service's socket inodes, as it last said (``sockets``)
        self._sockets_told = threading.Event()

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

    def _start_link(self, always: bool = False) -> None:
        if self.kind == "foreground" or always:
            start_thread(self._watch, "claudeguard-service-link")

    def keep_linked(self) -> None:
        """For a background registration whose launcher lives on (agent view): once its own
        requests are done, register again with a new service if this one dies, handing back the
        hooks' socket it holds (its dispatched sessions' hooks name that port)."""
        self._start_link(always=True)

    def _register(self) -> None:
        sock = connect(listener=self.held, version=self._version)
        try:
            service_pid = _check_service(sock)
            reply, fds = request_fds(sock, self._register_msg(),
                                     [self.held.fileno()] if self.held is not None else None)
            unserved = reply.get("unserved")
            if not reply.get("ok") and isinstance(unserved, int) and self.held is None:
                # The port its hooks name (read from the service's record before the CLI started)
                # is not the service's: it died meanwhile, and nobody held the socket. Take the
                # port back for it, or find who holds it.
                self._take_port(unserved)
                reply, fds = request_fds(sock, self._register_msg(),
                                         [self.held.fileno()] if self.held is not None else None)
        except (ServiceError, ValueError):
            sock.close()
            raise
        if not reply.get("ok"):
            sock.close()
            for fd in fds:
                os.close(fd)
            raise ServiceError(f"the guard service refused the session: {reply.get('error')}")
        port = reply.get("port")
        if not isinstance(port, int):
            sock.close()
            for fd in fds:
                os.close(fd)
            raise ServiceError(f"the guard service answered no port: {reply}")
        self._hold(port, fds)
        self.port = port
        self.service_pid = service_pid
        files.bound_sends(sock)  # a service that stopped reading fails a send (then the link's EOF decides)
        old, self.sock = self.sock, sock
        if old is not None:
            old.close()  # a dead service's connection

    def _register_msg(self) -> RegisterCli:
        msg: RegisterCli = {"op": "register", "session_id": self.session_id, "dir": self.session_dir,
                         "token": self.token, "kind": self.kind, "port": self.port}
        if self._cli_pid > 0:  # the only process whose hook posts the service takes for the session
            msg["cli_pid"], msg["cli_start"] = self._cli_pid, process_start(self._cli_pid)
        if self._verify:
            msg["verify"] = self._verify
        return msg

    def _hold(self, port: int, fds: list[int]) -> None:
        """Keep the listening socket the service sent for ``port`` (the same socket as the one
        held already, if any: dups of one socket)."""
        for fd in fds:
            sock = socket.socket(fileno=fd)
            try:
                same = sock.getsockname()[1] == port and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            except OSError:
                same = False
            if same and (self.held is None or self.held.getsockname()[1] != port):
                not_dumpable()  # no process of this user may take it from us (pidfd_getfd, ptrace)
                old, self.held = self.held, sock
                if old is not None:
                    old.close()
            else:
                sock.close()

    def _take_port(self, port: int) -> None:
        """Bind the port the session's hooks name, to hand it to the service (it was free); a
        process already listening there is named and the session ended as compromised."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
            not_dumpable()
        except OSError:
            sock.close()
            from claudeguard.tcp_owner import LISTEN, command_of, owners, tcp_rows

            pids = [p for p in owners(inode for state, inode in tcp_rows(port) if state == LISTEN) if p != os.getpid()]
            who = f"pid {pids[0]} ({command_of(pids[0])})" if pids else "another process"
            self._compromised(f"127.0.0.1:{port} is held by {who}, not the guard service")
            raise ServiceError(f"the hooks' port {port} is held by {who}") from None
        self.held = sock

    def guard(self, cli_pid: int) -> None:
        """Check once a second that only the service answers on the hooks' port; else the session
        ends as compromised (``_compromised``). Started once the CLI runs."""
        def run() -> None:
            from claudeguard.service.portguard import PortGuard

            guard: PortGuard | None = None
            while not self.closed.wait(GUARD_EVERY_S) and self.compromised is None:
                held = self.held
                if held is None:
                    continue
                if guard is None or guard.port != self.port:
                    guard = PortGuard(self.port, os.fstat(held.fileno()).st_ino, self._service_sockets)
                why = guard.check(self.service_pid)
                if why is not None:
                    self._compromised(why)

        self._cli_pid = cli_pid
        if self.sock is not None:  # registered before the CLI started: say which it is now
            self.send({"op": "cli", "session_id": self.session_id, "pid": cli_pid, "start": process_start(cli_pid)})
        start_thread(run, "claudeguard-port-guard")

    def _service_sockets(self, pid: int) -> set[int] | None:
        """The service's socket inodes: asked on the registration's connection (the service is
        not dumpable: its descriptors are not ours to list), else read where the kernel lets us."""
        if pid == self.service_pid and self.sock is not None:
            self._sockets_told.clear()
            if self.send({"op": "sockets", "session_id": self.session_id}) and self._sockets_told.wait(1.0):
                return set(self._sockets)
        from claudeguard.tcp_owner import socket_inodes

        return socket_inodes(pid)

    def _compromised(self, why: str) -> None:
        """The session ends as compromised: one line, an audit row, the CLI's tree stopped (its
        exit is a signal's: non-zero), once."""
        if self.compromised is not None:
            return
        self.compromised = why
        print(f"claudeguard: compromised: {why}; stopping the CLI", file=sys.stderr, flush=True)
        from claudeguard.channel import audit

        audit.record({"event": "compromised", "session_id": self.session_id, "decision": "compromised",
                      "decided_by": "port-guard", "summary": why})
        if self.on_compromised is not None:
            self.on_compromised(why)
        if self._cli_pid > 0:
            from claudeguard.watchdog.sampler import kill_tree

            kill_tree(self._cli_pid, 2.0)

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
                    if isinstance(msg, dict) and msg.get("event") == "sockets":
                        inodes = msg.get("inodes")
                        self._sockets = {i for i in inodes if isinstance(i, int)} if isinstance(inodes, list) else set()
                        self._sockets_told.set()
                    elif isinstance(msg, dict) and "event" in msg:
                        self._tell("message", msg)
            if self.closed.is_set():
                return
            self._tell("lost")
            self.service_pid = None
            while not self.closed.is_set():
                try:
                    self._register()
                except InsideSession as exc:
                    if self._cli_pid > 0:  # a running session: its hooks' successor is an agent's
                        self._compromised(str(exc))
                        return
                    if self.closed.wait(1.0):
                        return
                    continue
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
        held, self.held = self.held, None
        if held is not None:
            held.close()  # the service, or the next session's launcher, holds it from here


def _check_service(sock: socket.socket) -> int | None:
    """The pid of the service at the other end; ServiceError when it runs inside a guarded
    session's process tree (an agent killed the service and started one of its own)."""
    creds = peer_creds(sock)
    if creds is None:
        return None
    inside = inside_guarded_session(creds[0])
    if inside is not None and creds[0] != os.getpid():
        raise InsideSession(f"the guard service (pid {creds[0]}) runs inside session {inside}, not outside every "
                            f"session")
    return creds[0]
