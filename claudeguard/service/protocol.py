"""The control protocol's messages (``control.sock``, one JSON object per line each way; the ops
are listed in ``server``'s docstring, the watchdog's in ``watch``'s), as types: what a launcher
or ``claudeguardctl`` sends (``Request``), what the service answers (``Reply``), and what it
sends unasked on a session's connection (``Event``).

Types only (nothing here runs; the launcher's start path pays nothing for it). A message read
off the socket is a ``Received`` until its fields are checked: a peer of this user may still
send anything.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Literal, TypedDict, Union

    from claudeguard.fleet.model import LinkStatus, RequestView
    from claudeguard.watchdog.monitor import StallState

    Carry = StallState  # a stall episode handed from one monitor to the next
    # A message as read off the socket, before its fields are checked.
    Received = dict[str, object]

    class WatchSettings(TypedDict, total=False):
        """What a session's watchdog is told (``watchdog.monitor.WatchConfig``'s fields): the
        ``[watchdog]`` section and whether a person is at the CLI. ``background.json`` carries
        the same."""

        stall_after: float
        tool_stall_after: float
        on_stall: str
        sample_interval: float
        kill_grace: float
        interactive: bool
        writes_are_screen: bool  # a --bg session: it draws on a pty nobody reads

    # -- requests --------------------------------------------------------------------------

    class Hello(TypedDict):
        op: Literal["hello"]

    class Register(TypedDict):
        op: Literal["register"]
        session_id: str
        dir: str  # the session dir, whose session.json the service reads
        token: str  # the session's secret: its hooks' Bearer token
        kind: str  # "foreground" (dropped with its connection) | "background"
        # The port its hooks name (0: not known yet, any). The message may carry the listening
        # socket of that port (SCM_RIGHTS), which a launcher held while no service lived.
        port: int

    class RegisterCli(Register, total=False):
        """A foreground session's CLI, once it runs: the only process whose hook posts are taken."""

        cli_pid: int
        cli_start: str | None
        verify: str  # the real CLI, for a background verification (service/verify.py)

    class SocketsEvent(TypedDict):
        """The service's answer to ``sockets``, as an event on the registration's connection."""

        event: Literal["sockets"]
        inodes: list[int]

    class Cli(TypedDict):
        op: Literal["cli"]
        session_id: str
        pid: int
        start: str | None

    class Watch(TypedDict):
        op: Literal["watch"]
        session_id: str
        pid: int  # the launcher's
        child_pid: int
        child_start: str | None  # procs.process_start of the child: the service checks it is the same
        config: WatchSettings
        output_format: str | None
        prompt: str | None
        cwd: str
        argv: list[str]
        carry: Carry

    class _Activity(TypedDict):
        op: Literal["activity"]
        session_id: str

    class Activity(_Activity, total=False):
        out: list[float]  # [bytes written so far, monotonic time of the last write]
        msgs: list[dict[str, object]]  # stream summaries (shim.activity.compact)
        calls: list[list[object]]  # [kind, monotonic time, value] of the relay's notes
        tail: list[str] | None  # the screen's last lines

    class _WatchEnd(TypedDict):
        op: Literal["watch-end"]
        session_id: str

    class WatchEnd(_WatchEnd, total=False):
        code: int | None  # the child's exit code
        final: bool  # false: the launcher watches itself after all (no last status)

    class Attach(TypedDict):
        op: Literal["attach"]
        session_id: str

    class Unregister(TypedDict):
        op: Literal["unregister"]
        session_id: str

    class Simple(TypedDict):
        op: Literal["status", "stop", "retire"]

    class Sockets(TypedDict):
        op: Literal["sockets"]
        session_id: str

    class DeskAsk(TypedDict):
        """``claudeguardctl desk``: a first URL of the desk (started at the first ask); refused to a
        caller inside a guarded session's process tree."""

        op: Literal["desk"]

    class FleetPendingAsk(TypedDict):
        """``claudeguardctl pending --fleet``: the fleet's requests as the service's approver lists
        them; refused to a caller inside a guarded session's process tree."""

        op: Literal["fleet-pending"]

    Request = Union[Hello, Register, RegisterCli, Cli, Sockets, Watch, Activity, WatchEnd, Attach, Unregister, Simple,
                    DeskAsk, FleetPendingAsk]

    # -- replies ---------------------------------------------------------------------------

    class Failed(TypedDict):
        ok: Literal[False]
        error: str

    class Unserved(Failed):
        """A register naming a port the service does not answer on (its socket was not handed back)."""

        unserved: int

    class Done(TypedDict):
        ok: bool

    class HelloReply(TypedDict):
        ok: Literal[True]
        version: str
        pid: int
        port: int
        retired: bool

    class RegisterReply(TypedDict):
        """Sent with the session's listening socket (SCM_RIGHTS): the launcher holds it."""

        ok: Literal[True]
        port: int
        version: str
        pid: int

    class SessionRow(TypedDict):
        """A registered session, as ``status`` lists it."""

        session_id: str
        kind: str
        cwd: str | None
        launcher_pid: int | None
        registered: float
        short_id: str | None
        cli_pid: int | None
        agent_view: str | None

    class _Status(TypedDict):
        ok: Literal[True]
        pid: int
        version: str
        port: int
        started: float
        retired: bool
        idle_exit: float
        ports: list[int]  # every port it answers hooks on: its own, and those launchers handed back
        sessions: list[SessionRow]
        waiting: int
        desk_port: int | None  # the desk's port once someone asked for it (``desk``), else None

    class DeskReply(TypedDict):
        ok: Literal[True]
        url: str  # http://127.0.0.1:PORT/<base>/login?token=...: single use, void after 10 minutes
        port: int  # the desk's own port (never a hooks' port)

    class FleetPendingReply(TypedDict):
        ok: Literal[True]
        fleet: str  # FleetConfig.fleet_id(): which fleet the service lists as its approver
        requests: list[RequestView]  # FleetClient.requests(): every live machine's, this one's included

    class Status(_Status, total=False):
        fleet: LinkStatus  # FleetLink.status(): machine, redis, connected, last_error, counts
        fleet_desk: str  # what the desk shows of the fleet, and why (service/fleet.py, Fleet.desk_line)

    class Stopping(TypedDict):
        ok: Literal[True]
        sessions: int

    # -- events: sent on a session's connection ----------------------------------------------

    class _Watching(TypedDict):
        event: Literal["watching"]
        ok: bool

    class Watching(_Watching, total=False):
        error: str  # why not (the launcher watches itself)
        pid: int  # the service's

    class WatchEnded(TypedDict):
        event: Literal["watch-ended"]

    class Stall(TypedDict):
        event: Literal["stall"]
        session_id: str
        diagnosis: str
        action: str  # "warn" | "interrupt" | "kill": the launcher carries it out
        stall: dict[str, object]  # the watchdog's record of the episode (for the run's report)
        notify: list[str] | None  # the notify command, filled in
        carry: Carry

    class Calm(TypedDict):
        event: Literal["calm"]
        session_id: str
        carry: Carry

    class Waiting(TypedDict):
        """A request of the session waits in the channel (once per request): the launcher of a
        session on pipes says so in one stderr line (``shim/activity.py``, ``waiting_line``)."""

        event: Literal["waiting"]
        session_id: str
        id: str
        tool: str
        summary: str
        agent_type: str | None
        agent_id: str | None
        deadline_s: float
        desk_port: int | None  # the service's desk, when it serves one

    Event = Union[Watching, WatchEnded, Stall, Calm, Waiting]
    Reply = Union[SocketsEvent, Unserved, Failed, Done, HelloReply, RegisterReply, Status, Stopping, Watching,
                  WatchEnded, DeskReply, FleetPendingReply]
