"""``claudeguardctl service status|start|stop [--json]``: the resident guard service of this user.

``status`` prints the service's pid, version, hook port and the sessions it answers for (exit 1
when no service runs); ``start`` starts it now instead of at the first launch; ``stop`` asks it
to exit (its sessions' hooks then go unanswered, so the CLI denies their calls until the
launchers re-register with a new service: docs/design.md, "When the service dies").
"""

from __future__ import annotations

import json
import time

from claudeguard.commands.cli import parser as command_parser
from claudeguard.errors import UsageError
from claudeguard.procs import process_start
from claudeguard.service import client, files

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any


def main(argv: list[str]) -> int:
    parser = command_parser("service")
    parser.add_argument("action", choices=("status", "start", "stop"),
                        help="status: pid, version, hook port and sessions (exit 1 when none runs); start: start it "
                             "now instead of at the first launch; stop: ask it to exit (its sessions' hooks "
                             "go unanswered)")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    args = parser.parse_args(argv[1:])

    directory = files.service_dir()
    if args.action == "start":
        sock = client.connect(directory)
        reply = client.request(sock, {"op": "status"})
        sock.close()
        return _print_status(reply, args.json)
    live = client.live_connection(directory)
    if live is None:
        if args.json:
            print(json.dumps({"running": False}))
        else:
            print("no guard service runs")
        return 1
    try:
        if args.action == "stop":
            pid = client.request(live, {"op": "hello"}).get("pid")
            reply = client.request(live, {"op": "stop"})
            if not reply.get("ok"):
                raise UsageError(f"the service refused to stop: {reply.get('error')}")
            _wait_gone(pid, directory)
            print(f"guard service stopping ({reply.get('sessions', 0)} session(s) lose their hooks)")
            return 0
        return _print_status(client.request(live, {"op": "status"}), args.json)
    finally:
        live.close()


def _wait_gone(pid: object, directory: str, timeout: float = 5.0) -> None:
    """Return once the service has exited, so that a script's next step finds it gone."""
    deadline = time.monotonic() + timeout
    while isinstance(pid, int) and time.monotonic() < deadline:
        if process_start(pid) is None:
            return
        time.sleep(0.05)


def _print_status(reply: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps(dict(reply, running=True), indent=2))
        return 0
    print(f"guard service pid {reply.get('pid')}, version {reply.get('version')}, hooks on "
          f"127.0.0.1:{reply.get('port')}"
          + (", retiring" if reply.get("retired") else ""))
    fleet = reply.get("fleet")
    if isinstance(fleet, dict):
        connected = fleet.get("connected") or {}
        state = "connected" if connected and all(connected.values()) else f"not connected ({fleet.get('last_error')})"
        print(f"fleet: machine {fleet.get('machine')} on {fleet.get('redis')}: {state}; {fleet.get('pending', 0)} "
              f"request(s) mirrored, {fleet.get('applied', 0)} answer(s) applied, {fleet.get('refused', 0)} refused")
        if reply.get("fleet_desk"):
            print(f"fleet: {reply.get('fleet_desk')}")
    sessions = reply.get("sessions") or []
    if not sessions:
        print("no sessions")
    for s in sessions:
        print(f"  {s['session_id']}  {s['kind']:10}  pid {s.get('launcher_pid')}  {s.get('cwd')}")
    return 0
