"""The desk's HTTP server: one page, its static files, JSON endpoints and one server-sent event
stream, on 127.0.0.1 and a port of its own (never the hooks' port).

Security (docs/design.md, "The approval desk"):

- **Where**: bound to 127.0.0.1 only; every request's ``Host`` must be a loopback name
  (``127.0.0.1``, ``localhost``, ``[::1]``, any port: an ``ssh -L`` tunnel may use another local
  port), else 403: a DNS-rebinding page (Host ``evil.example``) is refused before anything else.
- **Who**: a random login token in the first URL (``/<base>/login?token=...``), single use and
  valid ``LOGIN_TTL_S``, is exchanged for a cookie (``HttpOnly``, ``SameSite=Strict``, ``Path=/<base>/``)
  and a redirect to a URL without the token. Every other request without a valid cookie gets
  401. ``<base>`` is random too: cookies are not kept apart by port, so a cookie for ``/`` would also go
  to any other server on 127.0.0.1 (a dev server the agent started) that the browser visits;
  scoped to the unguessable base path it goes only to the desk.
- **Changes**: every POST needs the session's CSRF token in ``X-Desk-CSRF`` (the page reads it
  from its ``<meta>``), a JSON body (``Content-Type: application/json``: a cross-origin form cannot
  send one without a CORS preflight, which is never granted), and, when the browser says, an
  ``Origin`` equal to the desk's own and ``Sec-Fetch-Site: same-origin``. SameSite alone does not
  do: a page on another 127.0.0.1 port is the same site.
- **What runs**: a strict Content-Security-Policy (``default-src 'self'``, no inline script or
  style, no framing, no other origin), ``nosniff``, ``no-referrer``, ``no-store``.
- **Provenance**: each change carries ``{"via": "desk", "uid", "browser_session"}``, the public id
  of the cookie session (never its secret).

Live updates: one thread (``Hub``) waits on the source's change notices and keeps the JSON of
each topic (``requests``, ``sessions``, ``audit``); each open stream sends a topic when its
version moved, else a comment every ``KEEPALIVE_S``. With no stream open the hub does nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import threading
import time
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from urllib.parse import parse_qs

from claudeguard.gate.grants import forever_blocker, next_call_fate
from claudeguard.commands.audit_suggest import parse_duration
from claudeguard.desk.views import call_view, forever_rules
from claudeguard.errors import GuardError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from collections.abc import Callable

    from claudeguard.desk.source import Decision, DeskSource, Provenance, Scope

    # Why a connection from (host, port) is refused before anything is read into a page, or None.
    Admit = Callable[[tuple[str, int]], "str | None"]

LOGIN_TTL_S = 600.0  # a login URL not used within this long is void
SESSION_IDLE_S = 24 * 3600.0  # a browser session unused this long is forgotten
MAX_SESSIONS = 64
MAX_STREAMS = 16
MAX_BODY = 64 * 1024
KEEPALIVE_S = 15.0
REFRESH_S = 5.0  # the hub lists everything again this often even without a change notice
COOKIE = "claudeguard_desk"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
STATIC = {"desk.js": "text/javascript; charset=utf-8", "desk.css": "text/css; charset=utf-8"}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)
REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large",
           415: "Unsupported Media Type", 429: "Too Many Requests", 500: "Internal Server Error"}


def _forever_blocked(item: Any, rules: list[str]) -> str | None:
    """Why ``forever`` would never take effect for a local request (an ask rule that matches it:
    ``gate.grants.forever_blocker``); None when it would, or when that cannot be judged (the
    answer itself judges again)."""
    try:
        return forever_blocker(session_id=str(item.get("session_id") or ""), tool=str(item.get("tool") or ""),
                               tool_input=dict(item.get("input") or {}), cwd=str(item.get("cwd") or "/"),
                               agent_type=item.get("agent_type"), rules=rules, target=str(item.get("forever_file")))
    except (GuardError, ValueError):
        return None


def loopback_host(host: str | None) -> bool:
    """``Host`` is a loopback name with an optional numeric port."""
    if not host:
        return False
    host = host.strip().lower()
    for name in LOOPBACK_NAMES:
        if host == name:
            return True
        if host.startswith(name + ":"):
            port = host[len(name) + 1:]
            return port.isdigit() and 0 < int(port) < 65536
    return False


class BrowserSession:
    __slots__ = ("id", "secret_hash", "csrf", "created", "used")

    def __init__(self) -> None:
        self.id = "bs-" + secrets.token_hex(6)  # public: shown as provenance
        self.csrf = secrets.token_urlsafe(32)
        self.created = self.used = time.time()
        self.secret_hash = ""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Hub:
    """The topics' current JSON and their versions, refreshed by one thread while streams are open."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.cond = threading.Condition()
        self.topics: dict[str, tuple[int, str]] = {}
        self.streams = 0
        self.stopped = False
        self._refresh_lock = threading.Lock()
        self._fresh_at = 0.0
        self._thread = threading.Thread(target=self._run, name="desk-hub", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        self._thread.join(timeout=5)

    def subscribe(self) -> bool:
        with self.cond:
            if self.streams >= MAX_STREAMS:
                return False
            self.streams += 1
            self.cond.notify_all()
        return True

    def unsubscribe(self) -> None:
        with self.cond:
            self.streams -= 1

    def refresh(self, force: bool = False) -> None:
        """List every topic again; a topic whose JSON changed gets a new version."""
        with self._refresh_lock:
            now = time.monotonic()
            if not force and now - self._fresh_at < 0.05:
                return  # just done by another thread
            self._fresh_at = now
            topics = {"requests": self.desk.requests_json, "sessions": self.desk.sessions_json,
                      "audit": self.desk.audit_json}
            fresh = {}
            for name, make in topics.items():
                try:
                    fresh[name] = make()
                except Exception as exc:  # noqa: BLE001 - one broken topic must not stop the others
                    fresh[name] = json.dumps({"error": _one_line(exc)})
            with self.cond:
                changed = False
                for name, text in fresh.items():
                    version, old = self.topics.get(name, (0, ""))
                    if text != old:
                        self.topics[name] = (version + 1, text)
                        changed = True
                if changed:
                    self.cond.notify_all()

    def poke(self) -> None:
        """Something changed through the desk itself: refresh now, not at the next notice."""
        threading.Thread(target=self.refresh, kwargs={"force": True}, daemon=True).start()

    def _run(self) -> None:
        source = self.desk.source
        last = 0.0
        while True:
            with self.cond:
                while self.streams <= 0 and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
            try:
                changed = source.wait_change(1.0)
            except Exception:  # noqa: BLE001 - a source that cannot tell: refresh on the timer
                changed = False
                time.sleep(1.0)
            if changed or time.monotonic() - last >= REFRESH_S:
                self.refresh(force=True)
                last = time.monotonic()


def _one_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).replace("\n", " ")[:300]


class Desk:
    """The desk server over ``source``. ``start()`` serves in a thread; ``login_url()`` mints a
    first URL; ``stop()`` ends the server, its streams and the hub (the source is closed too)."""

    def __init__(self, source: DeskSource, *, port: int = 0, host: str = "127.0.0.1",
                 admit: Admit | None = None) -> None:
        if host not in ("127.0.0.1", "::1"):
            raise GuardError(f"desk: {host}: the desk listens on loopback only (127.0.0.1)")
        self.source = source
        # Asked once per connection, before its first request is answered (the guard service
        # passes its check that the connecting process runs outside every guarded session).
        self.admit = admit
        # Told of each refused request (the guard service writes the ones that matter to the audit log).
        self.on_refusal: Callable[[dict[str, Any]], None] | None = None
        self.base = secrets.token_urlsafe(12)
        self.uid = os.getuid()
        self.refusals: list[dict[str, Any]] = []  # the last refused requests, for people and tests
        self._logins: dict[str, float] = {}
        self._sessions: dict[str, BrowserSession] = {}
        self._lock = threading.Lock()
        self._views: dict[str, dict[str, Any]] = {}  # request id -> its call view (read once)
        self._last_items: tuple[object, str] = (None, "")  # the source's last request list and its JSON
        self.hub = Hub(self)
        self.httpd = _Server((host, port), Handler)
        self.httpd.desk = self
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> Desk:
        self.hub.start()
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 3600},
                                        name="desk-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.hub.stop()
        # shutdown() waits for serve_forever's loop, which sleeps up to poll_interval in select:
        # closing the socket wakes it at once.
        threading.Thread(target=self.httpd.shutdown, daemon=True).start()
        try:
            self.httpd.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.source.close()
        except Exception:  # noqa: BLE001 - stopping goes on whatever the source says
            pass

    def open_pages(self) -> int:
        """Event streams open now (a page that is being watched)."""
        with self.hub.cond:
            return self.hub.streams

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.base}/"

    def login_url(self) -> str:
        """A first URL for one browser: a fresh single-use token, valid ``LOGIN_TTL_S``."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = time.time()
            self._logins = {t: exp for t, exp in self._logins.items() if exp > now}
            self._logins[token] = now + LOGIN_TTL_S
        return f"{self.url}login?token={token}"

    def void_login(self, path: str) -> None:
        """Forget the login token in ``path`` (a login URL), if any."""
        where, _, query = path.partition("?")
        token = (parse_qs(query).get("token") or [""])[0]
        if where == f"/{self.base}/login" and token:
            with self._lock:
                self._logins.pop(token, None)

    # -- browser sessions -----------------------------------------------------------------------

    def log_in(self, token: str) -> tuple[BrowserSession, str] | None:
        with self._lock:
            now = time.time()
            found = None
            for known, expires in self._logins.items():
                if hmac.compare_digest(known.encode(), token.encode()):
                    found = (known, expires)
            if found is None or found[1] < now:
                return None
            del self._logins[found[0]]
            session = BrowserSession()
            secret = secrets.token_urlsafe(32)
            session.secret_hash = _hash(secret)
            self._sessions = {k: s for k, s in self._sessions.items() if now - s.used < SESSION_IDLE_S}
            while len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.used)
                del self._sessions[oldest.secret_hash]
            self._sessions[session.secret_hash] = session
            return session, secret

    def session_for(self, secret: str | None) -> BrowserSession | None:
        if not secret:
            return None
        with self._lock:
            session = self._sessions.get(_hash(secret))
            if session is None or time.time() - session.used > SESSION_IDLE_S:
                return None
            session.used = time.time()
            return session

    def log_out(self, session: BrowserSession) -> None:
        with self._lock:
            self._sessions.pop(session.secret_hash, None)

    def provenance(self, session: BrowserSession) -> Provenance:
        return {"via": "desk", "uid": self.uid, "browser_session": session.id}

    def refused(self, status: int, reason: str, path: str, had_cookie: bool) -> None:
        refusal = {"status": status, "reason": reason, "path": path.split("?", 1)[0], "cookie": had_cookie,
                   "time": time.time()}
        with self._lock:
            self.refusals.append(refusal)
            del self.refusals[:-100]
        if self.on_refusal is not None:
            try:
                self.on_refusal(refusal)
            except Exception:  # noqa: BLE001 - the refusal stands whatever its report does
                pass

    # -- topics ---------------------------------------------------------------------------------

    def requests_json(self) -> str:
        mine = self.source.requests()
        fleet = self.source.fleet_requests()
        with self._lock:
            if fleet is None and mine is self._last_items[0]:
                return self._last_items[1]  # the source says nothing changed: the same list
        items = list(mine) + (fleet or [])
        live = set()
        out: list[dict[str, Any]] = []
        for item in items:
            rid = item.get("id") or ""
            key = f"{item.get('machine')}/{rid}"
            live.add(key)
            with self._lock:
                view = self._views.get(key)
            if view is None:
                local = bool(item.get("local"))
                tool, tool_input, cwd = item.get("tool") or "", item.get("input") or {}, item.get("cwd") or ""
                rules = forever_rules(tool, tool_input, cwd)
                view = {"call": call_view(tool, tool_input, cwd, local=local), "grant_rules": rules}
                if not local:
                    view["forever"] = None
                    view["forever_why"] = "a request of another machine: forever would write its config from afar"
                elif not rules:
                    view["forever"] = None
                    view["forever_why"] = "this call cannot be granted beyond once (it cannot be read with confidence)"
                elif not item.get("forever_file"):
                    view["forever"] = None
                    view["forever_why"] = "no config file to write to"
                elif (blocked := _forever_blocked(item, rules)) is not None:
                    view["forever"] = None  # the written rule would never take effect (approve refuses it too)
                    view["forever_why"] = f"{blocked}: the next run would ask again; narrow that rule"
                    # nor would a grant for the agent or the session (approve refuses them too)
                    view["grant_why"] = (f"{blocked}: the next such call would be {next_call_fate(blocked)}; "
                                         f"narrow that rule")
                else:
                    kind = "allow"
                    view["forever"] = {"rules": rules, "file": item.get("forever_file"), "kind": kind}
                with self._lock:
                    self._views[key] = view
            row: dict[str, Any] = {k: v for k, v in item.items() if k != "input"}
            row.update(view)
            out.append(row)
        with self._lock:
            self._views = {k: v for k, v in self._views.items() if k in live}
        out.sort(key=lambda r: (-float(r.get("created") or 0), str(r.get("id") or "")))
        text = json.dumps({"machine": self.source.machine, "fleet": fleet is not None, "requests": out},
                          default=str, separators=(",", ":"))
        with self._lock:
            self._last_items = (mine, text)
        return text

    def sessions_json(self) -> str:
        keep = ("session_id", "pid", "child_pid", "state", "base_state", "detail", "cpu_s", "tokens",
                "last_activity_s", "pending", "cwd", "prompt", "stalled", "diagnosis", "background", "short_id",
                "name", "guarded", "started", "child_alive", "watcher", "on_stall")
        rows = [{k: row.get(k) for k in keep} for row in self.source.sessions()]
        # Idle grows by itself: the page counts it from "now"; round so a tick alone is no change.
        for row in rows:
            idle = row.get("last_activity_s")
            if isinstance(idle, (int, float)):
                row["last_activity_at"] = round(time.time() - idle)
                del row["last_activity_s"]
        return json.dumps({"sessions": rows}, default=str, separators=(",", ":"))

    def audit_json(self) -> str:
        rows = self.source.audit_rows()
        return json.dumps({"count": len(rows)})  # the page fetches /api/audit when this moves


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    desk: Desk


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # a client that sends nothing for this long loses its thread (the stream waits elsewhere)
    server_version = "claudeguard-desk"
    sys_version = ""
    server: _Server
    _admitted: bool = False  # this connection's peer was checked and let in (one handler per connection)

    def parse_request(self) -> bool:
        """The request line and headers; then, once per connection, ``Desk.admit``: a refused
        peer gets a 403 with the reason and the connection closes, before anything is answered."""
        if not super().parse_request():
            return False
        desk = self.server.desk
        if self._admitted or desk.admit is None:
            return True
        try:
            why = desk.admit(self.client_address)
        except Exception as exc:  # noqa: BLE001 - a check that fails refuses (fail closed)
            why = f"the connecting process could not be checked: {_one_line(exc)}"
        if why is not None:
            desk.void_login(self.path)  # a login token in a refused request has leaked: it logs in nobody
            self._refuse(403, f"refused: {why}")
            return False
        self._admitted = True
        return True

    def log_message(self, format: str, *args: object) -> None:  # `format`: the base class's name
        pass  # no access log: changes go to the audit log

    # -- replies --------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", f"Content-Type: {content_type}",
                f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in SECURITY_HEADERS + headers]
        if self.close_connection:
            head.append("Connection: close")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def _json(self, status: int, value: object) -> None:
        self._send(status, json.dumps(value, default=str, separators=(",", ":")).encode(),
                   "application/json; charset=utf-8")

    def _refuse(self, status: int, reason: str, had_cookie: bool = False) -> None:
        self.server.desk.refused(status, reason, self.path, had_cookie)
        self.close_connection = True
        self._json(status, {"error": reason})

    # -- dispatch -------------------------------------------------------------------------------

    def do_GET(self) -> None:  # http.server's naming
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._refuse(405, "method not allowed")

    do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = do_PUT  # no CORS preflight is ever granted

    def _cookie(self) -> str | None:
        header = self.headers.get("Cookie") or ""
        for part in header.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and value:
                return value
        return None

    def _handle(self, method: str) -> None:
        desk = self.server.desk
        if not loopback_host(self.headers.get("Host")):
            self._refuse(403, "wrong Host: the desk answers only to a loopback name (127.0.0.1, localhost, [::1])")
            return
        path, _, query = self.path.partition("?")
        base = f"/{desk.base}/"
        cookie = self._cookie()
        if path == base + "login" and method == "GET":
            self._login(query, cookie)
            return
        session = desk.session_for(cookie)
        if session is None:
            self._refuse(401, "not logged in: open the URL `claudeguardctl desk` prints", cookie is not None)
            return
        if not path.startswith(base):
            self._refuse(404, "no such page", True)
            return
        route = path[len(base):]
        try:
            if method == "POST":
                self._post(route, session)
            else:
                self._get(route, query, session)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _login(self, query: str, cookie: str | None) -> None:
        desk = self.server.desk
        token = (parse_qs(query).get("token") or [""])[0]
        made = desk.log_in(token) if token else None
        if made is None:
            if desk.session_for(cookie) is not None:
                self._redirect(f"/{desk.base}/")  # already logged in (the first URL reloaded)
                return
            self._refuse(401, "this login URL is unknown, used or expired: run `claudeguardctl desk` for a new one",
                         cookie is not None)
            return
        session, secret = made
        cookie_text = f"{COOKIE}={secret}; Path=/{desk.base}/; HttpOnly; SameSite=Strict"
        self._redirect(f"/{desk.base}/", (("Set-Cookie", cookie_text),))
        del session

    def _redirect(self, where: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.close_connection = True
        self._send(303, b"", "text/plain", (("Location", where),) + headers)

    # -- reads ------------------------------------------------------------------------------------

    def _get(self, route: str, query: str, session: BrowserSession) -> None:
        desk = self.server.desk
        if route == "":
            self._send(200, _index(session.csrf, session.id), "text/html; charset=utf-8")
        elif route.startswith("static/") and route[len("static/"):] in STATIC:
            name = route[len("static/"):]
            self._send(200, _static(name), STATIC[name])
        elif route == "api/events":
            self._events()
        elif route == "api/state":
            desk.hub.refresh()
            with desk.hub.cond:
                topics = {name: text for name, (_, text) in desk.hub.topics.items()}
            body = "{" + ",".join(f'"{name}":{text}' for name, text in topics.items()) + f',"now":{time.time()}' + "}"
            self._send(200, body.encode(), "application/json; charset=utf-8")
        elif route == "api/audit":
            self._json(200, _audit(desk.source.audit_rows(), query))
        elif route == "api/suggestions":
            try:
                self._json(200, desk.source.suggestions(_since(query)))
            except GuardError as exc:
                self._json(400, {"error": _one_line(exc)})
        else:
            self._refuse(404, "no such page", True)

    def _events(self) -> None:
        hub = self.server.desk.hub
        if not hub.subscribe():
            self._refuse(429, "too many open desk pages", True)
            return
        try:
            head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream; charset=utf-8", "Connection: close"]
            head += [f"{k}: {v}" for k, v in SECURITY_HEADERS]
            self.close_connection = True
            self.wfile.write(("\r\n".join(head) + "\r\n\r\nretry: 1000\n\n").encode())
            hub.refresh()
            sent: dict[str, int] = {}
            while True:
                with hub.cond:
                    hub.cond.wait_for(lambda: hub.stopped or any(sent.get(n) != v for n, (v, _) in hub.topics.items()),
                                      timeout=KEEPALIVE_S)
                    if hub.stopped:
                        return
                    due = [(n, v, t) for n, (v, t) in hub.topics.items() if sent.get(n) != v]
                chunks = [f"event: {name}\ndata: {text}\n\n" for name, _, text in due]
                for name, version, _ in due:
                    sent[name] = version
                self.wfile.write(("".join(chunks) or ": keep-alive\n\n").encode()
                                 + f"event: now\ndata: {time.time():.3f}\n\n".encode())
                self.wfile.flush()
        except OSError:
            pass  # the page went away
        finally:
            hub.unsubscribe()

    # -- changes ----------------------------------------------------------------------------------

    def _post(self, route: str, session: BrowserSession) -> None:
        desk = self.server.desk
        # The CSRF token first: it is what stops a page of another 127.0.0.1 port (same site, so
        # the cookie goes along); Origin and Sec-Fetch-Site are a second line where browsers send them.
        token = self.headers.get("X-Desk-CSRF") or ""
        if not hmac.compare_digest(token.encode(), session.csrf.encode()):
            self._refuse(403, "missing or wrong CSRF token", True)
            return
        expected_origin = f"http://{self.headers.get('Host', '').strip().lower()}"
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() != expected_origin:
            self._refuse(403, f"cross-origin change refused (Origin {origin[:80]})", True)
            return
        fetch_site = self.headers.get("Sec-Fetch-Site")
        if fetch_site is not None and fetch_site != "same-origin":
            self._refuse(403, f"cross-site change refused (Sec-Fetch-Site {fetch_site[:40]})", True)
            return
        if (self.headers.get("Content-Type") or "").split(";")[0].strip().lower() != "application/json":
            self._refuse(415, "a change is a JSON body", True)
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self._refuse(413, "body too large", True)
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._json(400, {"error": "the body is not a JSON object"})
            return
        by = desk.provenance(session)
        try:
            if route == "api/answer":
                result: dict[str, Any] = dict(self._answer(body, by))
            elif route == "api/stop":
                result = {"line": desk.source.stop_session(str(body.get("session_id") or ""), by)}
            elif route == "api/apply":
                kind = body.get("kind")
                if kind not in ("allow", "deny"):
                    raise GuardError(f"kind {str(kind)[:20]!r}: expected allow or deny")
                result = {"line": desk.source.apply_suggestion(str(body.get("rule") or ""), kind,
                                                               _since_value(body.get("since")), by)}
            elif route == "api/logout":
                desk.log_out(session)
                result = {"line": "logged out"}
            else:
                self._refuse(404, "no such endpoint", True)
                return
        except GuardError as exc:
            self._json(409, {"error": _one_line(exc)})
            return
        desk.hub.poke()
        self._json(200, dict(result, by=by))

    def _answer(self, body: dict[str, Any], by: Provenance) -> dict[str, Any]:
        desk = self.server.desk
        answer = body.get("answer")
        words: dict[str, tuple[Decision, Scope]] = {
            "once": ("allow", "once"), "agent": ("allow", "agent"), "session": ("allow", "session"),
            "forever": ("allow", "forever"), "deny": ("deny", "once")}
        if answer not in words:
            raise GuardError(f"answer {str(answer)[:20]!r}: expected one of {', '.join(words)}")
        decision, scope = words[answer]
        message = body.get("message")
        message = message.strip()[:2000] or None if isinstance(message, str) else None
        choice = body.get("choice") if isinstance(body.get("choice"), str) else None
        rid = str(body.get("id") or "")
        machine = body.get("machine")
        if machine not in (None, desk.source.machine):
            return dict(desk.source.answer_remote(str(machine), rid, decision, scope, message, choice, by))
        result = desk.source.answer(rid, decision, scope, message, choice, by)
        return dict(result)


def _since_value(value: object) -> float | None:
    if value in (None, "", "all"):
        return None

    return parse_duration(str(value))


def _since(query: str) -> float | None:
    return _since_value((parse_qs(query).get("since") or [""])[0])


AUDIT_FIELDS = ("time", "session_id", "agent_type", "tool", "summary", "decision", "decided_by", "scope", "waited_s",
                "rule", "source", "request_id", "via", "event", "browser_session")


def _audit(rows: list[dict[str, Any]], query: str) -> dict[str, Any]:
    """The newest rows matching the filters of ``query``: ``q`` (text anywhere in the row),
    ``decision``, ``decided_by``, ``tool``, ``session`` (an id prefix), ``limit`` (<= 2000)."""
    params = {k: v[0] for k, v in parse_qs(query).items() if v}
    try:
        limit = max(1, min(2000, int(params.get("limit", "300"))))
    except ValueError:
        limit = 300
    text = params.get("q", "").lower()
    out = []
    for row in reversed(rows):
        if params.get("decision") and row.get("decision") != params["decision"]:
            continue
        if params.get("decided_by") and row.get("decided_by") != params["decided_by"]:
            continue
        if params.get("tool") and row.get("tool") != params["tool"]:
            continue
        if params.get("session") and not str(row.get("session_id") or "").startswith(params["session"]):
            continue
        if text and text not in json.dumps(row, default=str, ensure_ascii=False).lower():
            continue
        out.append({k: row.get(k) for k in AUDIT_FIELDS if row.get(k) is not None})
        if len(out) >= limit:
            break
    return {"rows": out, "total": len(rows)}


_files: dict[str, bytes] = {}


def _static(name: str) -> bytes:
    data = _files.get(name)
    if data is None:
        data = files("claudeguard.desk").joinpath("static", name).read_bytes()
        _files[name] = data
    return data


def _index(csrf: str, browser_session: str) -> bytes:
    # The page's only per-session values, as attributes of <meta> (no inline script under the CSP).

    return (_static("index.html").replace(b"{{csrf}}", escape(csrf).encode())
            .replace(b"{{browser_session}}", escape(browser_session).encode()))
