"""``claudeguardctl desk [--open]``: the loopback URL of the approval desk, with its one-time login
token, from the resident guard service (started if none runs; the desk itself starts at the
first ask, on a port of its own).

The service knows who asks (``SO_PEERCRED`` on its 0600 control socket) and refuses a caller
inside a guarded session's process tree: an agent never gets a login URL. Exit 1 with the
service's one line when refused, 2 when the service cannot be reached or started.
"""

from __future__ import annotations

import os
import sys

from claudeguard.ancestry import inside_guarded_session
from claudeguard.commands.cli import parser as command_parser
from claudeguard.service import client, files


def main(argv: list[str]) -> int:
    parser = command_parser("desk", epilog="The URL works once and for 10 minutes; run the command again for another "
                                           "browser. From another machine: ssh -L 8765:127.0.0.1:PORT this-host, then "
                                           "open the URL with 8765 for PORT.")
    parser.add_argument("--open", action="store_true", help="also open the URL in your browser (Python's webbrowser: "
                                                            "$BROWSER, else the desktop's default)")
    args = parser.parse_args(argv[1:])
    # Said here first, so that a tool of a session does not even start a service; the service
    # refuses such a caller by itself all the same (it asks the kernel who is calling).
    inside = inside_guarded_session(os.getpid())
    if inside is not None:
        print(f"claudeguardctl desk: refused from inside session {inside}", file=sys.stderr)
        return 1
    try:
        sock = client.connect(files.service_dir())
        try:
            reply = client.request(sock, {"op": "desk"})
        finally:
            sock.close()
    except client.ServiceError as exc:
        print(f"claudeguardctl desk: {exc}", file=sys.stderr)
        return 2
    url = reply.get("url")
    if not reply.get("ok") or not isinstance(url, str):
        print(f"claudeguardctl {reply.get('error') or 'desk: the service gave no URL'}", file=sys.stderr)
        return 1
    print(url, flush=True)
    if args.open:
        import webbrowser  # noqa: PLC0415 - only with --open

        # The user's browser (not through procs): webbrowser picks and starts it the platform's way.
        if not webbrowser.open(url):
            print("claudeguardctl desk: no browser could be opened; open the URL above yourself", file=sys.stderr)
            return 1
    return 0
