"""The loopback HTTP endpoint the CLI posts hook events to: ``POST /hook/<session id>/<event>``.

Each session's hooks carry ``Authorization: Bearer $CLAUDEGUARD_HOOK_TOKEN``; the CLI fills the
variable from its own environment (``allowedEnvVars``), so the secret is in no argv. A request
without the session's secret gets 401 and posts nothing. A body over ``MAX_BODY`` or one that is
not a JSON object gets a deny with the reason (for a decision event), never a silent allow.

Every answer is written with one ``sendall`` on a TCP_NODELAY socket: status line, headers and
body in separate sends would meet Nagle's algorithm and the client's delayed ACK (+100 ms a call,
measured; bench/RESULTS.md). Connections are kept alive (HTTP/1.1): the CLI reuses them.
"""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 8 * 1024 * 1024
REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large"}


class HookHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "claudeguard"
    server: HookServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass  # no access log: the audit log records decisions

    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n{'Connection: close' + chr(13) + chr(10) if self.close_connection else ''}\r\n")
        self.wfile.write(head.encode() + data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.close_connection = True
        self.reply(405, {"error": "POST hook events to /hook/<session>/<event>"})

    def do_POST(self) -> None:  # noqa: N802
        from claudeguard.gate.hook import deny_output, run_event

        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if len(parts) != 3 or parts[0] != "hook":
            self.close_connection = True
            self.reply(404, {"error": "no such endpoint"})
            return
        _, session_id, event_name = parts
        auth = self.headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        reg = self.server.service.lookup(session_id, token)
        if reg is None:
            self.close_connection = True  # the body is not read: nothing of it is posted
            self.reply(401, {"error": "unknown session or wrong secret"})
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self.reply(200, deny_output(event_name, f"claudeguard: hook event of {length} bytes refused (limit {MAX_BODY}); denied") or {})
            return
        body = self.rfile.read(length)
        out = run_event(body, event_name, reg.session, client_alive=self._client_alive)
        self.reply(200, out if out is not None else {})

    def _client_alive(self) -> bool:
        from claudeguard.gate.server import _client_alive

        return _client_alive(self.connection)


class HookServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a restarted service takes its port back at once (TIME_WAIT)
    service: object

    @classmethod
    def bind(cls, service: object, port: int | None) -> HookServer:
        """Listen on 127.0.0.1: on ``port`` (the one a dead service had, so that the hooks of
        running sessions reach us again) if it is free, else on any port."""
        for candidate in ([port] if port else []) + [0]:
            try:
                server = cls(("127.0.0.1", candidate), HookHandler)
            except OSError:
                continue
            server.service = service
            return server
        raise OSError("cannot listen on 127.0.0.1")
