"""The loopback HTTP endpoint the CLI posts hook events to: ``POST /hook/<session id>/<event>``,
and its permission-prompt tool's MCP messages: ``POST /mcp/<session id>``.

Each session's hooks carry ``Authorization: Bearer <secret>``, written literally into the 0600
settings file in its session dir (``plan/hooks.py``): in no argv and no environment. A request
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

from claudeguard.channel import audit
from claudeguard.channel.audit import session_log
from claudeguard.gate.hook import deny_output, run_event
from claudeguard.gate.mcp_server import respond
from claudeguard.gate.server import client_alive

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.service.registry import Registered, Registry

MAX_BODY = 8 * 1024 * 1024
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           413: "Payload Too Large"}


class HookHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "claudeguard"
    server: HookServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.posters: set[str] = set()  # sessions this connection's process may post for (checked)

    def log_message(self, format: str, *args: object) -> None:  # `format`: the base class's name
        pass  # no access log: the audit log records decisions

    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: "
                f"{len(data)}\r\n{'Connection: close' + chr(13) + chr(10) if self.close_connection else ''}\r\n")
        self.wfile.write(head.encode() + data)

    def do_GET(self) -> None:  # http.server's naming
        # Also an MCP client asking for a server-to-client event stream: none is offered (405,
        # as the transport allows), the answers come in the POST responses.
        self.close_connection = True
        self.reply(405, {"error": "POST hook events to /hook/<session>/<event>, MCP to /mcp/<session>"})

    def do_DELETE(self) -> None:  # an MCP client ending its session: nothing to end
        self.close_connection = True
        self.reply(200, {})

    def _registered(self, session_id: str) -> Registered | None:
        """The session if the request carries its secret and comes from its Claude Code process;
        else a 401 (no secret) or 403 (someone else) is sent and None returned (the body is not
        read: nothing of it is posted)."""
        auth = self.headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        service = self.server.service
        reg = service.lookup(session_id, token)
        if reg is None:
            self.close_connection = True
            self.reply(401, {"error": "unknown session or wrong secret"})
            return None
        # Who posts, once per connection and session: the secret is readable to a tool that can
        # read the session's settings file (no sandbox), the process at the other end is not.
        if session_id not in self.posters:
            refused = service.poster_refused(reg, self.server.server_address[1], self.client_address[1])
            if refused is not None:
                self._audit_refused(reg, refused)  # first: the row is there when the poster hears
                self.close_connection = True
                self.reply(403, {"error": f"hook post refused: {refused}"})
                return None
            self.posters.add(session_id)
        return reg

    def _audit_refused(self, reg: Registered, why: str) -> None:
        session_log.set(reg.session.snapshot.get("log_dir"))
        try:
            audit.record({"event": "hook-refused", "session_id": reg.session.id,
                          "summary": f"hook post refused: {why}", "path": self.path.split("?", 1)[0]})
        finally:
            session_log.set(None)

    def do_POST(self) -> None:
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "mcp":
            self._mcp(parts[1])
            return
        if len(parts) != 3 or parts[0] != "hook":
            self.close_connection = True
            self.reply(404, {"error": "no such endpoint"})
            return
        _, session_id, event_name = parts
        reg = self._registered(session_id)
        if reg is None:
            return
        length = self._body_length()
        if length is None:
            self.close_connection = True
            self.reply(200,
                       deny_output(event_name,
                                   f"claudeguard: hook event of {self.headers.get('Content-Length')} bytes refused "
                                   f"(limit {MAX_BODY}); denied") or {})
            return
        body = self.rfile.read(length)
        session = self.server.service.session_for(reg, body)
        out = run_event(body, event_name, session, client_alive=self._client_alive)
        self.reply(200, out if out is not None else {})

    def _body_length(self) -> int | None:
        """The body's declared length, or None when it is malformed or over ``MAX_BODY`` (the
        body is then not read)."""
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            return None
        return length if 0 <= length <= MAX_BODY else None

    def _mcp(self, session_id: str) -> None:
        """The permission-prompt tool over MCP's HTTP transport (JSON responses, no event
        stream): both pinned CLIs accept it with a header (checked: initialize, tools/list and
        tools/call arrive with the secret; 2.1.330 sends ``server/discover`` first)."""
        reg = self._registered(session_id)
        if reg is None:
            return
        length = self._body_length()
        if length is None:
            self.close_connection = True
            self.reply(413,
                       {"jsonrpc": "2.0", "id": None,
                        "error": {"code": -32600, "message": f"body over {MAX_BODY} bytes"}})
            return
        try:
            msg = json.loads(self.rfile.read(length))
        except ValueError:
            self.reply(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            return

        session_log.set(reg.session.snapshot.get("log_dir"))
        try:
            answers = [a
                       for a in (respond(m, reg.session) for m in (msg if isinstance(msg, list) else [msg]))
                       if a is not None]
        finally:
            session_log.set(None)
        if not answers:
            self.reply_empty(202)  # notifications only
        else:
            self.reply(200, answers if isinstance(msg, list) else answers[0])

    def reply_empty(self, status: int) -> None:
        self.wfile.write(f"HTTP/1.1 {status} Accepted\r\nContent-Length: 0\r\n\r\n".encode())

    def _client_alive(self) -> bool:
        return client_alive(self.connection)


class HookServer(ThreadingHTTPServer):
    """One listening socket the service answers hooks on. Never SO_REUSEPORT: with it, another
    process of this user could bind the same port beside us and take a share of the hook calls."""

    daemon_threads = True
    allow_reuse_address = True  # a new port is not refused for a TIME_WAIT of an earlier one
    request_queue_size = 128  # calls that queue while the socket changes hands (a service restarting)
    service: Registry

    @classmethod
    def bind(cls, service: Registry) -> HookServer:
        """Listen on a new port of 127.0.0.1 (any free one)."""
        server = cls(("127.0.0.1", 0), HookHandler)
        server.service = service
        return server

    @classmethod
    def adopt(cls, service: Registry, sock: socket.socket) -> HookServer:
        """Serve ``sock``, a listening socket on 127.0.0.1 another process held (a launcher that
        kept it while no service lived, and handed it over): the same port, the same socket, and
        the calls that queued on it meanwhile."""
        server = cls(sock.getsockname(), HookHandler, bind_and_activate=False)
        server.socket.close()
        sock.setblocking(True)
        sock.set_inheritable(False)
        server.socket = sock
        server.server_address = sock.getsockname()
        sock.listen(cls.request_queue_size)
        server.service = service
        return server


def listening_port(sock: socket.socket) -> int | None:
    """The port of ``sock`` if it is a TCP socket listening on 127.0.0.1, else None."""
    try:
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        host, port = sock.getsockname()[:2]
    except (OSError, ValueError):
        return None
    if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM or not listening or host != "127.0.0.1":
        return None
    return int(port)
