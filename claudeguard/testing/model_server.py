"""A scripted stand-in for the Anthropic Messages API, for running the real Claude CLI offline.

Point the CLI at it with ``ANTHROPIC_BASE_URL=<server.url>``. A *scenario* is a list of scripts;
each script has ``match`` (a substring of a conversation's first user message: the main prompt or
a subagent's prompt) and ``turns``. Which turn to play is derived from the conversation itself, by
counting the tool_result blocks in all of its user messages: the CLI can send a tool result
followed by further user messages (reminders), so looking at the last message alone goes wrong.
A turn that issues n tool calls is done once n more results have arrived, so with one call per
turn, turn k plays after k results. Turn kinds::

    {"text": "..."}                                     answer and end the turn
    {"tool_use": {"name": "Bash", "input": {...}}}      one tool call (id generated)
    {"tool_uses": [{"name": ..., "input": ...}, ...]}   several calls in one message
    {"stall_after_text": "partial"}                     start, send the text, then go silent
    {"slow": {"text": "...", "chunk_delay": 0.5}}       stream the text word by word

Past the last turn the conversation gets "done"; requests that match no script, and requests that
offer no tools (the CLI's side requests: titles, summaries, quota probes), get "ok". Every request
and every tool result is recorded, in memory and optionally as JSON lines in a file.

Stdlib only, so a user's test suite (and ``claudeguardctl demo``) can use it without extras. Also a
command: ``python -m claudeguard.testing.model_server --scenario FILE.json [--port N] [--record FILE]``
prints its URL on the first line and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

TURN_KINDS = ("text", "tool_use", "tool_uses", "stall_after_text", "slow")
DONE_TEXT = "done"
SIDE_TEXT = "ok"


# --- scenario ---------------------------------------------------------------------------------


def load_scenario(data: Any) -> list[dict[str, Any]]:
    """Validate a scenario (a list of scripts, or ``{"scripts": [...]}``) and return the list.

    Raises ValueError naming the first bad script or turn, so a typo in a test's scenario fails
    at once instead of as a CLI that never finishes.
    """
    if isinstance(data, dict) and "scripts" in data:
        data = data["scripts"]
    if not isinstance(data, list):
        raise ValueError("scenario: expected a list of scripts")
    for i, script in enumerate(data):
        if not isinstance(script, dict) or not isinstance(script.get("match"), str):
            raise ValueError(f"scenario script {i}: needs a 'match' string")
        turns = script.get("turns", [])
        if not isinstance(turns, list):
            raise ValueError(f"scenario script {i}: 'turns' must be a list")
        for j, turn in enumerate(turns):
            kinds = [k for k in TURN_KINDS if isinstance(turn, dict) and k in turn]
            if len(kinds) != 1:
                raise ValueError(f"scenario script {i} turn {j}: expected exactly one of {', '.join(TURN_KINDS)}")
            for call in _calls(turn):
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise ValueError(f"scenario script {i} turn {j}: a tool call needs a 'name'")
    return data


def _calls(turn: dict[str, Any]) -> list[dict[str, Any]]:
    if "tool_use" in turn:
        return [turn["tool_use"]]
    if "tool_uses" in turn:
        return list(turn["tool_uses"])
    return []


def pick_turn(turns: Sequence[dict[str, Any]], results: int) -> int:
    """Index of the turn to play after ``results`` tool results (``len(turns)`` when past the end).

    A tool turn is consumed by as many results as it made calls; a text turn ends the turn and
    is never consumed, so a conversation that goes on after it replays it.
    """
    idx = 0
    while idx < len(turns):
        n = len(_calls(turns[idx]))
        if n == 0 or results < n:
            break
        results -= n
        idx += 1
    return idx


# --- reading requests -------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "\n".join(parts)
    return ""


def first_user_text(body: dict[str, Any]) -> str:
    """The text of the conversation's first user message, without the ``<system-reminder>``
    blocks the CLI puts ahead of the prompt (they carry dates, CLAUDE.md and the like, which a
    ``match`` should not hit by accident)."""
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                own = [b for b in content if isinstance(b, dict) and b.get("type") == "text"
                       and not str(b.get("text", "")).lstrip().startswith("<system-reminder>")]
                if own:
                    return _text_of(own)
            return _text_of(content)
    return ""


def _session_id(body: dict[str, Any]) -> str | None:
    # The CLI sends metadata.user_id as a JSON string holding the session id (shared by the main
    # agent and its subagents).
    raw = (body.get("metadata") or {}).get("user_id")
    try:
        value = json.loads(raw).get("session_id") if isinstance(raw, str) else None
    except (ValueError, AttributeError):
        value = None
    return value if isinstance(value, str) else None


def _tool_result_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user" and isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield block


def _tool_names(body: dict[str, Any]) -> dict[str, str]:
    """tool_use id -> tool name, from the assistant messages the CLI sent back."""
    names = {}
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "assistant" and isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
    return names


def _estimate_tokens(text: str) -> int:
    # About four characters a token: close enough for anything that displays or sums usage.
    return max(1, len(text) // 4)


# --- the server -------------------------------------------------------------------------------


class _Stopped(Exception):
    """The server is stopping: leave the response unfinished."""


class ModelServer:
    """A Messages API server on 127.0.0.1 that plays ``scenario``; use as a context manager."""

    def __init__(self, scenario: Any = (), *, port: int = 0, record: str | Path | None = None,
                 keep_messages: bool = False):
        """``keep_messages``: each request's record also has ``messages``, its conversation as
        JSON text (what reached the model, memory files and tool results included), for a test
        that checks what the CLI sent by itself."""
        self.scenario = load_scenario(list(scenario) if isinstance(scenario, tuple) else scenario)
        self.keep_messages = keep_messages
        self._port = port
        self._record_path = Path(record) if record else None
        self._cond = threading.Condition()
        self._requests: list[dict[str, Any]] = []
        self._tool_results: list[dict[str, Any]] = []
        self._seen_results: set[str] = set()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._conns: set[Any] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> "ModelServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"model": self})
        httpd = _Server(("127.0.0.1", self._port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; stalled and slow responses are cut off (their connections close)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # releases stalled and slow responses
        httpd.shutdown()
        httpd.server_close()
        # Idle keep-alive connections park their handler threads in a read: cut them loose.
        with self._cond:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("model server not started")
        host, port = self._httpd.server_address[:2]
        if isinstance(host, bytes):
            host = host.decode()
        return f"http://{host}:{port}"

    # what was seen

    def requests(self) -> list[dict[str, Any]]:
        """Every request: method, path, first_user_text, model, has_tools, session_id, stream,
        script (its match, or None), turn (index, or None) and played (the turn kind, or
        "head", "get", "count_tokens", "404"); ``messages`` when kept (``keep_messages``)."""
        with self._cond:
            return [dict(r) for r in self._requests]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block, once each: tool_use_id, tool, content, is_error, script."""
        with self._cond:
            return [dict(r) for r in self._tool_results]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked whenever something is recorded, and at
        least every 0.2 s for predicates that look elsewhere); return its value or raise TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(r["path"], r.get("played")) for r in self._requests[-5:]]
                    raise TimeoutError(f"model server: condition not met within {timeout}s; last requests: {seen}")
                self._cond.wait(min(left, 0.2))

    # internals used by the handler

    def _record(self, kind: str, entry: dict[str, Any]) -> None:
        entry = dict(entry, time=time.time())
        with self._cond:
            (self._requests if kind == "request" else self._tool_results).append(entry)
            if self._record_path is not None:
                with self._record_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(dict(entry, kind=kind)) + "\n")
            self._cond.notify_all()

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}{uuid.uuid4().hex[:20]}"

    def _plan(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, int | None, dict[str, Any]]:
        """(script, turn index, turn) for a Messages request."""
        first = first_user_text(body)
        results = list(_tool_result_blocks(body))
        # Only requests that offer tools are conversations of an agent; side requests (titles,
        # summaries, probes) offer none and must not consume a script's turns.
        script = None
        if body.get("tools"):
            script = next((s for s in self.scenario if s["match"] and s["match"] in first), None)
        # Record each tool result once: the CLI resends the whole conversation every time.
        names = _tool_names(body)
        for block in results:
            tid = str(block.get("tool_use_id"))
            with self._cond:
                if tid in self._seen_results:
                    continue
                self._seen_results.add(tid)
            self._record("tool_result", {
                "tool_use_id": tid,
                "tool": names.get(tid),
                "content": _text_of(block.get("content")),
                "is_error": bool(block.get("is_error", False)),
                "script": script["match"] if script else None,
            })
        if script is None:
            return None, None, {"text": SIDE_TEXT}
        turns = script.get("turns", [])
        idx = pick_turn(turns, len(results))
        return script, idx, turns[idx] if idx < len(turns) else {"text": DONE_TEXT}


def _kind(turn: dict[str, Any]) -> str:
    return next(k for k in TURN_KINDS if k in turn)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a CLI killed, a connection reset) is no error of
        the server's: no traceback on stderr (``doctor --verify`` prints its own lines)."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    model: ModelServer  # set on the per-server subclass
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.model._cond:
            self.model._conns.add(self.connection)

    def finish(self) -> None:
        with self.model._cond:
            self.model._conns.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass  # the peer or stop() already closed it

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read the recording, not a request log

    # plumbing

    def _send_json(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        return body if isinstance(body, dict) else {}

    def _event(self, name: str, data: dict[str, Any]) -> None:
        if self.model._stopping.is_set():
            raise _Stopped
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    # routes

    def _record_plain(self, played: str) -> None:
        self.model._record("request", {"method": self.command, "path": self.path, "first_user_text": "",
                                       "model": None, "has_tools": False, "session_id": None, "stream": False,
                                       "script": None, "turn": None, "played": played})

    def do_HEAD(self) -> None:
        # The CLI probes reachability with HEAD /.
        self._record_plain("head")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        root = self.path in ("/", "")
        self._record_plain("get" if root else "404")
        self._send_json(200 if root else 404, {"ok": True} if root else _error("not_found_error", self.path))

    def do_POST(self) -> None:
        body = self._read_body()
        path = self.path.split("?", 1)[0]
        base = {"method": "POST", "path": self.path, "first_user_text": first_user_text(body),
                "model": body.get("model"), "has_tools": bool(body.get("tools")),
                "session_id": _session_id(body),
                "stream": bool(body.get("stream"))}
        if self.model.keep_messages:
            base["messages"] = json.dumps(body.get("messages"))
        if path.endswith("/messages/count_tokens"):
            self.model._record("request", dict(base, script=None, turn=None, played="count_tokens"))
            self._send_json(200, {"input_tokens": _estimate_tokens(json.dumps(body))})
            return
        if not path.endswith("/messages"):
            self.model._record("request", dict(base, script=None, turn=None, played="404"))
            self._send_json(404, _error("not_found_error", self.path))
            return
        script, idx, turn = self.model._plan(body)
        self.model._record("request", dict(base, script=script["match"] if script else None, turn=idx,
                                           played=_kind(turn)))
        input_tokens = _estimate_tokens(json.dumps(body.get("messages", "")) + json.dumps(body.get("system", "")))
        try:
            if body.get("stream"):
                self._stream(body, turn, input_tokens)
            else:
                self._whole(body, turn, input_tokens)
        except (_Stopped, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # replies

    def _blocks(self, turn: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        calls = _calls(turn)
        if calls:
            return ([{"type": "tool_use", "id": self.model._new_id("toolu"), "name": c["name"],
                      "input": c.get("input", {})} for c in calls], "tool_use")
        text = turn.get("text") or turn.get("stall_after_text") or (turn.get("slow") or {}).get("text", "")
        return [{"type": "text", "text": text}], "end_turn"

    def _whole(self, body: dict[str, Any], turn: dict[str, Any], input_tokens: int) -> None:
        if "stall_after_text" in turn:
            # A non-streaming stall: headers never come; hold the connection until stop.
            self.model._stopping.wait()
            raise _Stopped
        content, stop = self._blocks(turn)
        self._send_json(200, {
            "id": self.model._new_id("msg"), "type": "message", "role": "assistant",
            "model": body.get("model") or "claude-scripted", "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": _estimate_tokens(json.dumps(content))},
        })

    def _stream(self, body: dict[str, Any], turn: dict[str, Any], input_tokens: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # No length and no chunking: the body ends when the connection closes.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self._event("message_start", {"type": "message_start", "message": {
            "id": self.model._new_id("msg"), "type": "message", "role": "assistant",
            "model": body.get("model") or "claude-scripted", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
        content, stop = self._blocks(turn)
        out_tokens = 0
        for index, block in enumerate(content):
            if block["type"] == "tool_use":
                self._event("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": dict(block, input={})})
                partial = json.dumps(block["input"])
                self._event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "input_json_delta", "partial_json": partial}})
                out_tokens += _estimate_tokens(partial) + 10
            else:
                self._event("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": {"type": "text", "text": ""}})
                delay = float((turn.get("slow") or {}).get("chunk_delay", 0))
                chunks = re.findall(r"\S+\s*|\s+", block["text"]) if delay else [block["text"]]
                for n, chunk in enumerate(chunks):
                    if n and self.model._stopping.wait(delay):
                        raise _Stopped
                    self._event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                        "delta": {"type": "text_delta", "text": chunk}})
                out_tokens += _estimate_tokens(block["text"])
                if "stall_after_text" in turn:
                    self.model._stopping.wait()
                    raise _Stopped
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})
        self._event("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": max(1, out_tokens)}})
        self._event("message_stop", {"type": "message_stop"})


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# --- command line -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m claudeguard.testing.model_server",
                                     description="Serve a scripted Messages API for the Claude CLI.")
    parser.add_argument("--scenario", required=True, help="scenario JSON file (a list of scripts)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    parser.add_argument("--record", help="append every request and tool result to this file as JSON lines")
    args = parser.parse_args(argv)
    try:
        scenario = json.loads(Path(args.scenario).read_text(encoding="utf-8"))
        server = ModelServer(scenario, port=args.port, record=args.record)
    except (OSError, ValueError) as exc:
        print(f"model_server: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with server:
        print(server.url, flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
