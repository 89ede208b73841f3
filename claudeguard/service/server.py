"""The service process: one per user and runtime dir, started on demand by the first launcher.

Threads: the control socket's accept loop (one thread per connection), the HTTP endpoint's
(one thread per hook call, see ``http``), and the main loop, which ends the service after
``idle_exit`` seconds without a registered session, or at ``stop``.

Control protocol (``control.sock``, 0600 in the 0700 service dir; the peer's uid is checked
too): one JSON object per line each way.

- ``{"op": "hello"}`` → ``{"ok": true, "version", "pid", "port"}``
- ``{"op": "register", "session_id", "dir", "token", "kind", "port"}`` → ``{"ok": true, "port"}``,
  sent with the listening socket of that port (``SCM_RIGHTS``): the launcher holds it for the
  session's life, so the hooks' port is never free for another process while a session lives,
  even while no service does. A register may carry such a socket itself (a launcher handing
  back what it held while no service lived): the service answers on it too (``listeners``). A
  ``port`` the service does not answer on gets ``{"ok": false, "error", "unserved"}`` after up
  to ``PORT_WAIT_S`` (another launcher may be handing it back). The session's snapshot is read
  from ``<dir>/session.json``. A ``foreground`` session belongs to the connection that
  registered it and is dropped when that connection closes (the launcher exited or died); a
  ``background`` one stays until ``unregister``.
- ``{"op": "watch"|"activity"|"watch-end", ...}`` on the connection that registered a
  foreground session: the service runs its watchdog (``service/watch.py``); ``activity`` has
  no answer, the service sends ``stall`` and ``calm`` events on that connection unasked.
- ``{"op": "attach", "session_id"}`` → ``{"ok"}``: keep a registered background session (a
  ``--bg`` or agent view launch, once its ``background.json`` says what to keep).
- ``{"op": "cli", "session_id", "pid", "start"}`` (no answer), or ``cli_pid``/``cli_start`` in
  ``register``: a foreground session's CLI, the only process whose hook posts are taken for it
  (``poster_refused``: a tool that read the session's secret still cannot post).
- ``{"op": "desk"}`` → ``{"ok": true, "url", "port"}``: a fresh single-use first URL of the
  approval desk, which the service serves on a port of its own from the first ask
  (``service/desk.py``); refused (``{"ok": false, "error"}`` and an audit row) when the caller
  (``SO_PEERCRED``) runs inside a guarded session's process tree.
- ``{"op": "fleet-pending"}`` → ``{"ok": true, "fleet", "requests"}``: the fleet's waiting
  requests as this service lists them as ``[fleet] approver`` on its kept connection (for
  ``claudeguardctl pending --fleet``); refused, as ``desk``, to a caller inside a session.
- ``{"op": "unregister", "session_id"}``, ``{"op": "status"}``, ``{"op": "stop"}``,
  ``{"op": "retire"}`` (a launcher of another version found this one: stop taking sessions,
  give up the slot, keep the desk already served, exit when the last session ends and no page
  is open on that desk).

Each message's type is in ``protocol``.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

from claudeguard.ancestry import ancestry, caller_inside_session, is_claude_cli
from claudeguard.errors import GuardError
from claudeguard.gate.session import load_session
from claudeguard.paths import check_private_dir
from claudeguard.procs import not_dumpable, process_start
from claudeguard.service import agent_view, files, fleet, planner, watch
from claudeguard.service.desk import DeskHost
from claudeguard.home import home_of
from claudeguard.service.background import Keeper, end_session, hooks_port, keep, read_record
from claudeguard.service.http import HookServer, listening_port
from claudeguard.tcp_owner import command_of, owners, socket_inodes, tcp_peer
from claudeguard.service.registry import Registered
from claudeguard.service.verify import Verifications, sweep_leftovers
from claudeguard.service.watch import Link
from claudeguard.sockets import peer_creds

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:

    from collections.abc import Mapping

    from claudeguard.gate.session import Session
    from claudeguard.service.fleet import Fleet
    from claudeguard.service.files import ServiceRecord
    from claudeguard.service.planner import Planner
    from claudeguard.service.protocol import (
        DeskReply, Done, Failed, FleetPendingReply, HelloReply, Received, RegisterReply, Reply, SessionRow,
        SocketsEvent, Status, Stopping, Unserved, WatchEnded, Watching,
    )

DEFAULT_IDLE_EXIT = 600.0  # seconds without a session before the service exits
# A launcher that knows the service's port from its record starts the CLI first and registers
# while the CLI starts (shim/main.py): a hook or MCP request for a session not registered yet
# waits this long for the registration, then gets its 401. The secret is checked as always.
REGISTRATION_WAIT_S = 2.0
MAX_REGISTRATION_WAITERS = 32  # more requests for unknown sessions get their 401 at once
SLOT_CHECK_S = 2.0  # how often the service checks that its socket and record are still there
PORT_WAIT_S = 2.0  # a registration naming a port not served yet waits this long for its socket
ADOPT_WAIT_S = 5.0  # a background session's port must be handed back by then, or the session ends
MAX_FDS = 4  # descriptors a control message may carry (one listening socket, in practice)


@dataclass
class Slot:
    """What holds this home's service slot: the control socket we bound (and its file's inode:
    fstat of a socket says another), the flocked ``run.lock``, and the lock ``retire`` and the
    main loop's ``_keep_slot`` take around them."""

    control: socket.socket | None = None
    run_lock: int | None = None  # fd of run.lock, flocked while this service holds the slot
    control_ino: int = 0
    # Held by ``retire`` (a control thread) and ``_keep_slot`` (the main loop): without it a
    # retire that lands while the main loop checks the slot finds its socket gone, publishes
    # it again and keeps the slot its successor is about to take. Re-entered: _keep_slot may retire.
    lock: threading.RLock = field(default_factory=threading.RLock)


@dataclass
class Service:
    directory: str
    idle_exit: float = DEFAULT_IDLE_EXIT
    sessions: dict[str, Registered] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    retired: bool = False
    port: int = 0
    version: str = ""
    started: float = field(default_factory=time.time)
    slot: Slot = field(default_factory=Slot)  # the control socket and the lock that hold this home's slot
    registered: threading.Condition = field(init=False)  # notified at each register (on ``lock``)
    waiters: int = 0  # requests waiting in ``lookup`` for their session's registration
    planner: Planner | None = None  # the process that prepares launchers' sessions (service/planner.py)
    listen_fd: int | None = None  # a listening socket handed over at start (``--listen-fd``)
    listeners: dict[int, HookServer] = field(default_factory=dict)  # port -> the socket answering on it
    verifications: Verifications | None = None  # the CLIs being verified in the background (service/verify.py)
    fleet: Fleet | None = None  # this machine's link to the fleet, when the user's config names one (service/fleet.py)
    # The approval desk, served on a port of its own from the first ``desk`` op (service/desk.py).
    # Its ``fleet`` (``desk_fleet``: the fleet's ``desk.source.FleetView``, or None) shows the other
    # machines' requests when the fleet names an approver; without it, this machine's only.
    desk: DeskHost = field(init=False)

    def __post_init__(self) -> None:
        self.registered = threading.Condition(self.lock)
        self.desk = DeskHost(stopper=self.stop_watched, fleet=self.desk_fleet)

    def desk_fleet(self) -> object | None:
        """The desk's view of the fleet (``desk.source.FleetView``): None without a fleet, or
        without an approver to list and answer as (service/fleet.py)."""
        found = self.fleet
        return found.desk_view() if found is not None else None

    def stop_watched(self, session_id: str, why: str) -> int | None:
        """The desk's Stop of a stalled session this service watches: its launcher kills the
        CLI and exits 124 (``watch.stop``); None when it is not watched here."""
        with self.lock:
            reg = self.sessions.get(session_id)
        return watch.stop(reg, why) if reg is not None else None

    # --- the registry ---------------------------------------------------------------------

    def lookup(self, session_id: str, token: str | None, wait: float = REGISTRATION_WAIT_S) -> Registered | None:
        """The session, if ``token`` is its secret (compared in constant time). A session not
        registered (yet) is waited for up to ``wait`` seconds: its launcher may still be
        registering it while its CLI already runs."""
        with self.lock:
            reg = self.sessions.get(session_id)
            if reg is None and token is not None and wait > 0 and self.waiters < MAX_REGISTRATION_WAITERS:
                self.waiters += 1
                try:
                    deadline = time.monotonic() + wait
                    while reg is None and not self.stopping.is_set() and (left := deadline - time.monotonic()) > 0:
                        self.registered.wait(left)
                        reg = self.sessions.get(session_id)
                finally:
                    self.waiters -= 1
        if reg is None or token is None or not hmac.compare_digest(reg.token.encode(), token.encode()):
            return None
        return reg

    # --- the hooks' listening sockets ---------------------------------------------------------

    def take_listener(self, sock: socket.socket) -> int | None:
        """Answer hooks on ``sock`` too, a listening socket on 127.0.0.1 handed over (at start, or
        by a launcher that held it while no service lived): its port, or None when it is not
        one (closed). A port already answered on keeps its socket; this one is closed."""
        port = listening_port(sock)
        if port is None:
            sock.close()
            return None
        with self.lock:
            if port in self.listeners:
                sock.close()
                return port
            server = HookServer.adopt(self, sock)
            self.listeners[port] = server
            self.registered.notify_all()
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name=f"claudeguard-http-{port}",
                         daemon=True).start()
        return port

    def _serve_new_port(self) -> int:
        server = HookServer.bind(self)
        port = int(server.server_address[1])
        with self.lock:
            self.listeners[port] = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name=f"claudeguard-http-{port}",
                         daemon=True).start()
        return port

    def wait_port(self, port: int, wait: float) -> bool:
        """Whether hooks are answered on ``port``, waiting up to ``wait`` seconds for a launcher
        to hand its socket back."""
        deadline = time.monotonic() + wait
        with self.lock:
            while port not in self.listeners and not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.registered.wait(left)
            return port in self.listeners

    def listener_fd(self, port: int) -> int | None:
        with self.lock:
            server = self.listeners.get(port)
        return server.socket.fileno() if server is not None else None

    def register(self, msg: Mapping[str, object], owner: object) -> RegisterReply | Failed | Unserved:
        """The ``register`` op (``msg`` as received, or one of ours: ``adopt``, agent view)."""
        if self.retired:
            return {"ok": False, "error": "retiring: another version took over"}
        sid, directory, token = msg.get("session_id"), msg.get("dir"), msg.get("token")
        kind = str(msg.get("kind") or "foreground")
        if not (isinstance(sid, str) and sid and isinstance(directory, str) and isinstance(token, str)
                and len(token) >= 32):
            return {"ok": False, "error": "register needs session_id, dir and a token of 32+ characters"}
        want = msg.get("port")
        port = want if isinstance(want, int) and 0 < want < 65536 else self.port
        if not self.wait_port(port, PORT_WAIT_S):
            return {"ok": False, "error": f"the hooks' port {port} is not answered here (its listening socket was "
                                          "not handed back)", "unserved": port}

        try:
            check_private_dir(directory)
            session = load_session(directory)
        except Exception as exc:  # noqa: BLE001 - one line back to the launcher
            return {"ok": False, "error": f"{directory}: {exc}"}
        cli_pid, cli_start = msg.get("cli_pid"), msg.get("cli_start")
        with self.lock:
            old = self.sessions.get(sid)
            if old is not None and old.watch is not None and old.owner is not owner:
                watch.end(old, ...)  # registered again on another connection: that one asks anew
            self.sessions[sid] = Registered(session, token, kind, time.time(), owner if kind == "foreground" else None,
                                            old.keeper if old is not None else None, port=port,
                                            cli=(cli_pid, cli_start if isinstance(cli_start, str) else None)
                                            if isinstance(cli_pid, int) else old.cli if old is not None else None)
            self.registered.notify_all()
        return {"ok": True, "port": port, "version": self.version, "pid": os.getpid()}

    def attach(self, session_id: str) -> Done | Failed:
        """Start keeping a registered background session, once its launcher knows the CLI's
        short id (written into the session's ``background.json``)."""
        with self.lock:
            reg = self.sessions.get(session_id)
        if reg is None or reg.kind != "background" or reg.session.dir is None:
            return {"ok": False, "error": f"no background session {session_id}"}
        record = read_record(reg.session.dir)
        if record is not None and record.get("agent_view"):
            return agent_view.start(self, session_id, reg, record)
        short_id = record.get("short_id") if record is not None else None
        if record is None or not short_id:
            return {"ok": False, "error": "background.json has no short_id"}
        if reg.keeper is not None:
            return {"ok": True}
        reg.session.snapshot["cli_short_id"] = short_id  # shown by pending and audit
        keeper = Keeper(session_id, reg.session.dir, short_id, record.get("config_dir") or "",
                        record.get("watch") or {}, prompt=record.get("prompt"), cwd=reg.session.snapshot.get("cwd"),
                        log_dir=reg.session.snapshot.get("log_dir"), report=record.get("report"))
        reg.keeper = keeper
        threading.Thread(target=keep, args=(keeper, lambda: self.forget(session_id, keeper)),
                         name=f"claudeguard-bg-{session_id}",
                         daemon=True).start()
        return {"ok": True}

    def session_for(self, reg: Registered, body: bytes) -> Session:
        """The session a hook event is decided in: its keeper's word (a view's events go to the
        child of their CLI session, ``service/agent_view.py``), else the session itself."""
        if reg.keeper is None:
            return reg.session
        return reg.keeper.session_for(self, reg, body)

    def set_cli(self, msg: Received, owner: object) -> None:
        """The ``cli`` op: the foreground session's CLI, on the connection that registered it."""
        reg = self.owned(msg, owner)
        pid, start = msg.get("pid"), msg.get("start")
        if reg is not None and isinstance(pid, int):
            with self.lock:
                reg.cli = (pid, start if isinstance(start, str) else None)
                self.registered.notify_all()

    def poster_refused(self, reg: Registered, local_port: int, remote_port: int) -> str | None:
        """Why the process at the other end of a hook post (a loopback connection from
        ``remote_port``) may not post for ``reg``; None when it may: a foreground session's own
        CLI (waiting up to REGISTRATION_WAIT_S for the launcher to say which it is), or, for a
        background session (run by Claude Code's daemon), a Claude Code process whose parent is
        one (its pty host) and that runs in no foreground session's tree. Anything else was
        started by an agent: it may have read the secret, but it does not post."""
        inode = tcp_peer(local_port, remote_port)
        if inode is None:
            return "the posting process cannot be identified"
        if reg.owner is not None:  # foreground: its launcher said (or is about to say) which its CLI is
            deadline = time.monotonic() + REGISTRATION_WAIT_S
            with self.lock:
                while reg.cli is None and not self.stopping.is_set() and (left := deadline - time.monotonic()) > 0:
                    self.registered.wait(left)
                cli = reg.cli
            if cli is not None and process_start(cli[0]) == cli[1] and inode in (socket_inodes(cli[0]) or ()):
                return None
        else:
            if any(_daemon_hosted(pid) for pid in owners([inode])):
                return None
        posters = owners([inode])
        who = f"pid {posters[0]} ({command_of(posters[0])})" if posters else "a process that cannot be seen"
        return f"posted by {who}, not the session's Claude Code"

    def forget(self, session_id: str, keeper: object) -> None:
        with self.lock:
            reg = self.sessions.get(session_id)
            if reg is not None and reg.keeper is keeper:
                del self.sessions[session_id]

    def adopt(self) -> None:
        """Background sessions of an earlier service (it died, or was stopped): registered again
        from their ``background.json``, so their hooks are answered and they are watched, if
        their hooks' port was handed back (by a launcher that held it) within ADOPT_WAIT_S. A
        session whose port nobody held ends: while no service lived, any process could have
        taken that port and answered its hooks (``background.end_session``)."""
        root = os.path.join(os.path.dirname(self.directory), "sessions")
        try:
            entries = list(os.scandir(root))
        except OSError:
            return
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            record = read_record(entry.path)
            # A session dispatched from agent view is made again by its view (service/agent_view.py).
            if record is None or not (record.get("short_id") or record.get("agent_view")) or record.get("parent") \
                    or not isinstance(record.get("token"), str):
                continue
            port = hooks_port(entry.path, record)
            if port is None or not self.wait_port(port, ADOPT_WAIT_S):
                why = (f"its hooks' port {port} was not held while no guard service lived" if port is not None
                       else "its hooks' port is not known")
                end_session(entry.path, record, why, root)
                continue
            reply = self.register({"op": "register", "session_id": entry.name, "dir": entry.path,
                                   "token": record["token"], "kind": "background", "port": port}, None)
            if reply.get("ok"):
                self.attach(entry.name)

    def drop_owned_by(self, owner: object) -> None:
        with self.lock:
            dropped = [self.sessions.pop(sid)
                       for sid in [sid for sid, reg in self.sessions.items() if reg.owner is owner]]
        for reg in dropped:
            if reg.watch is not None:
                watch.end(reg, ...)

    def owned(self, msg: Received, owner: object) -> Registered | None:
        """The foreground session ``msg`` names, if ``owner`` (a control connection) registered it."""
        with self.lock:
            reg = self.sessions.get(str(msg.get("session_id")))
        return reg if reg is not None and reg.owner is owner else None

    def watch_op(self, op: str, msg: Received, owner: Link | None) -> Watching | WatchEnded | None:
        """``watch``, ``activity``, ``watch-end`` (``service/watch.py``); None: no answer."""
        reg = self.owned(msg, owner)
        if op == "activity":
            monitor = reg.watch if reg is not None else None
            if monitor is not None:
                watch.activity(monitor, msg)
            return None
        if op == "watch":
            if reg is None or owner is None:
                return {"event": "watching", "ok": False, "error": "not registered on this connection"}
            return watch.start(reg, msg, owner)
        if reg is not None:
            code = msg.get("code")
            watch.end(reg, (code if isinstance(code, int) else None) if msg.get("final", True) else ...)
        return {"event": "watch-ended"}

    def status(self) -> Status:
        with self.lock:
            sessions = [_row(sid, reg) for sid, reg in self.sessions.items()]
        with self.lock:
            ports = sorted(self.listeners)
        status: Status = {"ok": True, "pid": os.getpid(), "version": self.version, "port": self.port,
                          "started": self.started, "retired": self.retired, "idle_exit": self.idle_exit, "ports": ports,
                          "sessions": sessions, "waiting": self.waiters, "desk_port": self.desk.port}
        fleet = self.fleet
        if fleet is not None:
            status["fleet"] = fleet.status()
            status["fleet_desk"] = fleet.desk_line()
        return status

    def desk_op(self, link: Link | None) -> DeskReply | Failed:
        """The ``desk`` op: a first URL of the desk for a caller outside every guarded session
        (its pid as the kernel says, ``SO_PEERCRED``), the desk started at the first ask."""
        if self.retired:
            return {"ok": False, "error": "desk: this service is retiring: ask again"}
        first = self.desk.port is None
        reply = self.desk.url(link.peer_pid if link is not None else None)
        if first and self.desk.port is not None:
            with self.slot.lock:
                if not self.retired:
                    files.write_record(self.directory, self._record())  # status readers see desk_port
        return reply

    def _record(self) -> ServiceRecord:
        record: ServiceRecord = {"pid": os.getpid(), "start": process_start(os.getpid()), "version": self.version,
                                 "port": self.port, "started": self.started, "home": home_of()}
        if self.desk.port is not None:
            record["desk_port"] = self.desk.port
        return record

    # --- the control socket ---------------------------------------------------------------

    def _accept_control(self, control: socket.socket) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = control.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_control, args=(conn,), name="claudeguard-control", daemon=True).start()

    def _serve_control(self, conn: socket.socket) -> None:
        creds = peer_creds(conn)  # None: no SO_PEERCRED here, and the directory's mode is the guard
        if creds is not None and creds[1] != os.getuid():
            return  # the directory is 0700 already; a peer of another uid is never served

        # the owner of the sessions it registers; the watchdog writes to it too
        link = Link(conn, creds[0] if creds is not None else None)
        buf = b""
        fds: list[int] = []  # descriptors that came with the line being read (SCM_RIGHTS)
        try:
            while True:
                data, got, _, _ = socket.recv_fds(conn, 65536, MAX_FDS, socket.MSG_CMSG_CLOEXEC)
                fds += got
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    taken, fds = fds, []
                    if not self._control_line(line, link, taken):
                        return
        except OSError:
            pass
        finally:
            for fd in fds:
                os.close(fd)
            self.drop_owned_by(link)
            conn.close()

    def _control_line(self, line: bytes, link: Link, fds: list[int]) -> bool:
        """One control message and its answer; False when the answer could not be sent."""
        reply: Reply | None
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            for fd in fds:
                os.close(fd)
            return link.send({"ok": False, "error": "malformed control message"})
        if msg.get("op") == "register":
            for fd in fds:  # a listening socket handed back: answered on from now on
                self.take_listener(socket.socket(fileno=fd))
            reply = self.register(msg, link)
            if reply.get("ok"):
                port = reply.get("port")
                held = self.listener_fd(port) if isinstance(port, int) else None
                sent = link.send(reply, [held] if held is not None else None)
                if "verify" in msg and self.verifications is not None:  # after the answer: off the launch's path
                    self.verifications.asked(msg.get("verify"), link.peer_pid)
                return sent
            return link.send(reply)
        for fd in fds:
            os.close(fd)  # only a register hands a socket over
        reply = self.control_op(msg, link)
        return reply is None or link.send(reply)

    def control_op(self, msg: Received, conn: Link | None) -> Reply | None:
        """One control message's answer (None: the op has none)."""
        op = msg.get("op")
        if op == "hello":
            hello: HelloReply = {"ok": True, "version": self.version, "pid": os.getpid(), "port": self.port,
                                 "retired": self.retired}
            return hello
        if op == "register":
            return self.register(msg, conn)
        if op == "watch" or op == "activity" or op == "watch-end":
            return self.watch_op(op, msg, conn)
        if op == "attach":
            return self.attach(str(msg.get("session_id")))
        if op == "cli":
            self.set_cli(msg, conn)
            return None
        if op == "sockets":  # for a launcher's port guard: this process is not dumpable
            sockets: SocketsEvent = {"event": "sockets", "inodes": sorted(socket_inodes(os.getpid()) or ())}
            return sockets
        if op == "unregister":
            with self.lock:
                found = self.sessions.pop(str(msg.get("session_id")), None)
            return {"ok": found is not None}
        if op == "status":
            return self.status()
        if op == "stop":
            self.stopping.set()
            stopping: Stopping = {"ok": True, "sessions": len(self.sessions)}
            return stopping
        if op == "retire":
            self.retire()
            return {"ok": True}
        if op == "desk":
            return self.desk_op(conn)
        if op == "fleet-pending":
            return self.fleet_pending_op(conn)
        return {"ok": False, "error": f"unknown op {op!r}"}

    def fleet_pending_op(self, link: Link | None) -> FleetPendingReply | Failed:
        """The ``fleet-pending`` op: the fleet's waiting requests as this service's approver lists
        them, on its kept connection (``claudeguardctl pending --fleet`` without redis-py's import
        and a connection of its own). Refused to a caller inside a guarded session, as the desk."""
        peer_pid = link.peer_pid if link is not None else None
        inside = caller_inside_session(peer_pid) if peer_pid is not None else "an unknown caller"
        if inside is not None:
            return {"ok": False, "error": f"fleet-pending: refused from inside session {inside}"}
        found = self.fleet
        view = found.desk_view() if found is not None else None
        if view is None:
            return {"ok": False, "error": "fleet-pending: this service lists no fleet (no [fleet] approver)"}
        try:
            listed = view.list_all()
        except GuardError as exc:
            return {"ok": False, "error": f"fleet-pending: {exc}"}
        return {"ok": True, "fleet": view.cfg.fleet_id(), "requests": listed}

    def retire(self) -> None:
        """Give up the slot (record and control socket) to a service of another version; the
        sessions registered here keep being served until they end, and its desk while they do
        or a page is open on it (then the main loop ends it)."""
        with self.slot.lock:
            if self.retired:
                return
            self.retired = True
            self._release_slot()
            try:  # for doctor: another install's service still serves sessions here
                files.write_retired(self.directory, self._record())
            except OSError:
                pass
        self._stop_planner()  # the successor starts its own; sessions here need none
        self._stop_fleet()  # the successor's link speaks for this machine (one link per machine)
        # The desk stays: a page open on it, or a URL printed for a session here, keeps working
        # while this service serves (its sessions, an open page); new URLs are the successor's.

    def _release_slot(self) -> None:
        record = files.read_record(self.directory)
        if record is not None and record.get("pid") == os.getpid():
            try:
                os.unlink(os.path.join(self.directory, files.RECORD))
            except OSError:
                pass
        run_lock, self.slot.run_lock = self.slot.run_lock, None
        if run_lock is not None:
            os.close(run_lock)  # the slot is free for a successor (after the record is gone)
        control, self.slot.control = self.slot.control, None
        if control is not None:
            try:
                # Only our own socket file: a successor may have bound a new one there already.
                if os.stat(os.path.join(self.directory, files.CONTROL)).st_ino == self.slot.control_ino:
                    os.unlink(os.path.join(self.directory, files.CONTROL))
            except OSError:
                pass
            try:
                control.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            control.close()

    def _keep_slot(self) -> None:
        """The runtime dir can be removed under the service (a tmp cleaner, a hand, a logout):
        its socket and record are then gone, and the next launcher would start a second
        service. Publish them again, under a new run lock; if another service took the slot
        meanwhile, retire (serve the sessions here until they end)."""
        with self.slot.lock:
            if not self.retired:
                self._publish_again()

    def _publish_again(self) -> None:
        path = os.path.join(self.directory, files.CONTROL)
        try:
            if os.stat(path).st_ino == self.slot.control_ino and files.read_record(self.directory) is not None:
                return
        except OSError:
            pass
        try:
            files.service_dir()  # made again, 0700, checked
            run_lock = os.open(os.path.join(self.directory, files.RUN_LOCK),
                               os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except Exception as exc:  # noqa: BLE001 - try again at the next check
            print(f"claudeguard service: cannot publish again: {exc}", file=sys.stderr, flush=True)
            return
        try:
            fcntl.flock(run_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(run_lock)
            self.retire()  # a successor holds the slot
            return
        try:  # stderr went to the removed log: a new one in the new dir
            log = os.open(os.path.join(self.directory, files.LOG),
                          os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            os.dup2(log, 2)
            os.close(log)
        except OSError:
            pass
        old_lock, self.slot.run_lock = self.slot.run_lock, run_lock
        if old_lock is not None:
            os.close(old_lock)
        old_control = self.slot.control
        self._bind_control()
        if old_control is not None:
            old_control.close()
        self._stop_planner()  # its socket went with the dir
        self._start_planner()
        files.write_record(self.directory, self._record())
        print("claudeguard service: the runtime dir was removed; socket and record published again",
              file=sys.stderr, flush=True)

    def _stop_fleet(self) -> None:
        found, self.fleet = self.fleet, None
        if found is not None:
            found.stop()

    def _has_sessions(self) -> bool:
        with self.lock:
            return bool(self.sessions)

    def _start_planner(self) -> None:
        """The warm process that prepares launchers' sessions (service/planner.py)."""
        self.planner = planner.start(self.directory, self.port, self.version)

    def _stop_planner(self) -> None:
        found, self.planner = self.planner, None
        if found is not None:
            found.stop()

    def _bind_control(self) -> None:
        control_path = os.path.join(self.directory, files.CONTROL)
        try:
            os.unlink(control_path)  # stale: the run lock says no live service owns it
        except FileNotFoundError:
            pass
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            with files.socket_path(self.directory, files.CONTROL) as path:
                control.bind(path)
        finally:
            os.umask(old)
        self.slot.control_ino = os.stat(control_path).st_ino
        control.listen(64)
        self.slot.control = control
        threading.Thread(target=self._accept_control, args=(control,), name="claudeguard-control-accept",
                         daemon=True).start()

    # --- life -----------------------------------------------------------------------------

    def run(self) -> int:
        run_lock = os.open(os.path.join(self.directory, files.RUN_LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(run_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(run_lock)
            return 0  # a live service holds the slot
        self.slot.run_lock = run_lock

        self.version = files.fingerprint()
        # The socket of the service before us, held by a launcher while no service lived (the
        # hooks of its sessions name that port, and the calls they made meanwhile wait on it),
        # else a new port.
        port = self.take_listener(socket.socket(fileno=self.listen_fd)) if self.listen_fd is not None else None
        self.port = port if port is not None else self._serve_new_port()
        self.verifications = Verifications()  # before the control socket: a register may name its CLI
        self._bind_control()
        self._start_planner()
        threading.Thread(target=self.adopt, name="claudeguard-adopt", daemon=True).start()
        # What an interrupted verification left (the service before us killed under it, say).
        threading.Thread(target=sweep_leftovers, name="verify-leftovers", daemon=True).start()
        files.write_record(self.directory, self._record())
        self.fleet = fleet.start(self._has_sessions)
        idle_since = time.monotonic()
        next_check = time.monotonic() + SLOT_CHECK_S
        try:
            while not self.stopping.wait(0.5):
                if not self.retired and time.monotonic() >= next_check:
                    next_check = time.monotonic() + SLOT_CHECK_S
                    self._keep_slot()
                    self.verifications.reap()
                    if self.planner is not None and not self.planner.alive():
                        print("claudeguard service: the planner died; started again", file=sys.stderr, flush=True)
                        self._stop_planner()
                        self._start_planner()
                with self.lock:
                    busy = bool(self.sessions)
                if busy or self.desk.busy():  # an open desk page keeps the service too
                    idle_since = time.monotonic()
                elif self.retired or time.monotonic() - idle_since >= self.idle_exit:
                    break
        finally:
            with self.lock:
                keepers = [reg.keeper for reg in self.sessions.values() if reg.keeper is not None]
            for keeper in keepers:
                keeper.stop.set()  # the session lives on: the next service adopts it
            self._release_slot()
            if self.retired:
                try:
                    os.unlink(files.retired_path(self.directory, os.getpid()))
                except OSError:
                    pass
            self._stop_planner()
            self._stop_fleet()
            self.desk.stop()
            with self.lock:
                servers = list(self.listeners.values())
            for server in servers:  # the launchers of running sessions hold these ports still
                server.shutdown()
                server.server_close()
        return 0


def _daemon_hosted(pid: int) -> bool:
    """``pid`` is a Claude Code process under another (a session under the daemon's pty host),
    and above the first process that is not Claude Code's (what started the daemon) there is no
    Claude Code process: not a CLI that a tool of some session started."""
    chain = ancestry(pid)
    if len(chain) < 2 or not is_claude_cli(chain[0]["pid"]) or not is_claude_cli(chain[1]["pid"]):
        return False
    rest = chain[2:]
    while rest and is_claude_cli(rest[0]["pid"]):
        rest = rest[1:]
    return not any(is_claude_cli(p["pid"]) for p in rest)


def _row(session_id: str, reg: Registered) -> SessionRow:
    shown = reg.keeper.shown() if reg.keeper is not None else None
    snapshot = reg.session.snapshot
    return {"session_id": session_id, "kind": reg.kind, "cwd": snapshot.get("cwd"), "launcher_pid": snapshot.get("pid"),
            "registered": reg.registered, "short_id": shown["short_id"] if shown else None,
            "cli_pid": shown["cli_pid"] if shown else None, "agent_view": snapshot.get("agent_view")}


def main(argv: list[str]) -> int:
    """``python -m claudeguard.service [--detach]``: run the service for this user's runtime dir."""
    directory = files.service_dir()
    idle = float(os.environ.get("CLAUDEGUARD_SERVICE_IDLE") or DEFAULT_IDLE_EXIT)
    listen_fd = int(argv[argv.index("--listen-fd") + 1]) if "--listen-fd" in argv[:-1] else None
    if "--detach" in argv:
        # The launcher waits for this first process only: the service itself is nobody's child
        # but init's, in a session of its own, so no terminal signal or launcher exit reaches it.
        # The service's own double fork (not through procs): no other program starts.
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
    os.chdir("/")
    os.umask(0o077)
    not_dumpable()  # it holds the hooks' socket: no process of this user may take it (pidfd_getfd, ptrace)
    for name in ("CLAUDEGUARD_SESSION_DIR", "CLAUDEGUARD_SESSION", "CLAUDEGUARD_EXEC_PID", "CLAUDEGUARD_HOOK_TOKEN"):
        os.environ.pop(name, None)
    service = Service(directory, idle_exit=idle, listen_fd=listen_fd)

    # SIGTERM and SIGINT end the service the clean way (record and socket removed); the main
    # loop wakes from its wait within half a second.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: service.stopping.set())
    return service.run()
