"""The stream-json tap: reads the CLI's output as it passes, never changing a byte.

The relay thread only hands each chunk over (``StreamTap.feed``: a deque append, well under a
microsecond); a tap thread splits lines and summarizes them into ``StreamMsg``s: tool calls
started (tool_use) and ended (tool_result), token usage per message, background tasks, the
final result. Cheap cases first, so a 100 MB/s flow keeps up and the GIL is never held long:

- the line's type is read from its first bytes (the CLI writes ``{"type":...`` first, except
  for ``result`` lines, which are small and parsed whole);
- ``stream_event`` lines (``--include-partial-messages``, one per token) are only classified;
  ``message_start`` and ``message_delta`` (a few per message) are parsed for usage;
- ``user`` lines (tool results, often large) are scanned for ``"tool_use_id":"`` keys with
  ``bytes.find``; inside a JSON string every quote is escaped, so an unescaped match preceded
  by ``{`` or ``,`` can only be a real key;
- ``assistant``/``system`` lines are parsed with ``json.loads`` up to ``PARSE_MAX`` bytes and
  scanned the same way beyond it.

If the tap falls more than ``max_backlog`` bytes behind, chunks are dropped (counted in
``skipped_bytes``) and lines resynchronize at the next newline: the watchdog loses detail,
never the relay its speed.
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time
from typing import Any, Callable

from claudeguard.watchdog.signals import StreamMsg

PARSE_MAX = 1 << 20
YIELD_S = 0.0001
_DELTA_PREFIX = b'{"type":"stream_event","event":{"type":"content_block_delta"'
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_INT_RE = {k: re.compile(rb'"' + k.encode() + rb'":(\d+)') for k in _USAGE_KEYS}
_TOOL_USE_RE = re.compile(rb'[{,]"type":"tool_use","id":"([^"\\]{1,200})","name":"([^"\\]{1,200})"')


def _object(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is a JSON object, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _array(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` when it is a JSON array, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, list) else []


def _usage(u: object) -> tuple[int, int, int, int] | None:
    if not isinstance(u, dict):
        return None
    n = [v if isinstance(v, int) else 0 for v in map(u.get, _USAGE_KEYS)]
    return (n[0], n[1], n[2], n[3])


def _usage_scan(window: bytes) -> tuple[int, int, int, int] | None:
    found = False
    n = []
    for k in _USAGE_KEYS:
        m = _INT_RE[k].search(window)
        found = found or m is not None
        n.append(int(m.group(1)) if m else 0)
    return (n[0], n[1], n[2], n[3]) if found else None


def _key_values(line: bytes, key: bytes, limit: int = 200) -> list[str]:
    """Values of every structural ``"key":"value"`` in a JSON line, without parsing it."""
    pat = b'"' + key + b'":"'
    out: list[str] = []
    i = line.find(pat)
    while i >= 0:
        if i > 0 and line[i - 1] in b"{,":
            start = i + len(pat)
            end = line.find(b'"', start, start + limit)
            if end > start:
                out.append(line[start:end].decode("utf-8", "replace"))
        i = line.find(pat, i + len(pat))
    return out


def _head_type(line: bytes) -> str | None:
    if line.startswith(b'{"type":"'):
        end = line.find(b'"', 9, 64)
        if end > 9:
            return line[9:end].decode("ascii", "replace")
    return None


def _call_detail(name: str, inp: object) -> str:
    if not isinstance(inp, dict):
        return ""
    if name in ("Agent", "Task"):
        kind = inp.get("subagent_type") or "general-purpose"
        bg = " in background" if inp.get("run_in_background") else ""
        return f"{kind}{bg}: {str(inp.get('description') or '')[:60]}"
    for key in ("command", "file_path", "path", "pattern", "url", "query", "description"):
        v = inp.get(key)
        if isinstance(v, str) and v:
            return v.replace("\n", " ")[:80]
    return ""


class Context:
    """What a summary needs from earlier lines: the message that partial events belong to."""

    message_id: str | None = None


def summarize_line(line: bytes, t: float, ctx: Context | None = None) -> StreamMsg | None:
    """The watchdog's summary of one output line (None for a blank line)."""
    ctx = ctx or Context()
    line = line.strip()
    if not line:
        return None
    if not line.startswith(b"{"):
        return StreamMsg(t, "other")
    kind = _head_type(line)
    if kind == "stream_event":
        return _partial(line, t, ctx)
    if kind == "user":
        return _user(line, t)
    if len(line) > PARSE_MAX:
        if kind == "assistant":
            return _assistant_big(line, t)
        if kind == "result" or (kind is None and b'"type":"result"' in line[-4096:]):
            return StreamMsg(t, "result", tokens=_usage_scan(line[:8192]))
        return StreamMsg(t, "other")
    try:
        obj = json.loads(line)
    except ValueError:
        return StreamMsg(t, "other")
    if not isinstance(obj, dict):
        return StreamMsg(t, "other")
    return summarize_obj(obj, t, ctx)


def summarize_obj(obj: dict[str, Any], t: float, ctx: Context | None = None) -> StreamMsg:
    kind = obj.get("type")
    if kind == "assistant":
        msg = _object(obj, "message")
        uses = []
        for block in msg.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                name = str(block.get("name") or "?")
                uses.append((block["id"], name, _call_detail(name, block.get("input"))))
        return StreamMsg(t, "assistant", message_id=msg.get("id"), tokens=_usage(msg.get("usage")),
                         tool_uses=uses, parent_tool_use_id=obj.get("parent_tool_use_id"))
    if kind == "user":
        msg = _object(obj, "message")
        content = _array(msg, "content")
        ids = [b["tool_use_id"] for b in content
               if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)]
        return StreamMsg(t, "user", tool_results=ids, parent_tool_use_id=obj.get("parent_tool_use_id"))
    if kind == "result":
        return StreamMsg(t, "result", tokens=_usage(obj.get("usage")), is_error=bool(obj.get("is_error")))
    if kind == "system":
        sub = obj.get("subtype")
        if sub == "init":
            servers = [s for s in obj.get("mcp_servers") or [] if isinstance(s, dict)]
            return StreamMsg(t, "init", mcp_servers=servers)
        if sub == "task_started":
            return StreamMsg(t, "task-start", task_id=obj.get("task_id"), task={
                "description": obj.get("description"), "subagent_type": obj.get("subagent_type"),
                "tool_use_id": obj.get("tool_use_id"), "is_backgrounded": obj.get("is_backgrounded")})
        if sub == "task_notification":
            return StreamMsg(t, "task-end", task_id=obj.get("task_id"))
        if sub == "task_updated":
            patch = _object(obj, "patch")
            if patch.get("status") in ("completed", "failed", "stopped", "killed"):
                return StreamMsg(t, "task-end", task_id=obj.get("task_id"))
            return StreamMsg(t, "other")
        if sub == "background_tasks_changed":
            return StreamMsg(t, "tasks", tasks=[x for x in obj.get("tasks") or [] if isinstance(x, dict)])
        return StreamMsg(t, "other")
    if kind == "stream_event":
        event = _object(obj, "event")
        return _partial_obj(event, t, ctx or Context())
    if kind == "control_request":
        req = _object(obj, "request")
        return StreamMsg(t, "control", request=req.get("subtype"))
    return StreamMsg(t, "other")


def _partial(line: bytes, t: float, ctx: Context) -> StreamMsg:
    pat = b'"event":{"type":"'
    i = line.find(pat, 0, 128)
    if i < 0:
        return StreamMsg(t, "partial", partial_event="?")
    start = i + len(pat)
    end = line.find(b'"', start, start + 64)
    event = line[start:end].decode("ascii", "replace") if end > start else "?"
    if event in ("message_start", "message_delta") and len(line) < 65536:
        try:
            obj = json.loads(line)
            return _partial_obj(obj.get("event") or {}, t, ctx)
        except (ValueError, AttributeError):
            pass
    return StreamMsg(t, "partial", partial_event=event)


def _partial_obj(event: dict[str, Any], t: float, ctx: Context) -> StreamMsg:
    etype = str(event.get("type") or "?")
    if etype == "message_start":
        msg = _object(event, "message")
        ctx.message_id = msg.get("id")
        return StreamMsg(t, "partial", partial_event=etype, message_id=msg.get("id"), tokens=_usage(msg.get("usage")))
    if etype == "message_delta":
        return StreamMsg(t, "partial", partial_event=etype, message_id=ctx.message_id,
                         tokens=_usage(event.get("usage")))
    return StreamMsg(t, "partial", partial_event=etype)


def _user(line: bytes, t: float) -> StreamMsg:
    parent = _key_values(line[-2048:], b"parent_tool_use_id") or _key_values(line, b"parent_tool_use_id")
    return StreamMsg(t, "user", tool_results=list(dict.fromkeys(_key_values(line, b"tool_use_id"))),
                     parent_tool_use_id=parent[0] if parent else None)


def _assistant_big(line: bytes, t: float) -> StreamMsg:
    uses = [(m.group(1).decode(), m.group(2).decode(), "") for m in _TOOL_USE_RE.finditer(line[:PARSE_MAX])]
    ids = _key_values(line[:512], b"id")
    usage_at = line.rfind(b'"usage":{')
    tokens = _usage_scan(line[usage_at:usage_at + 1024]) if usage_at >= 0 else None
    parent = _key_values(line[-2048:], b"parent_tool_use_id")
    return StreamMsg(t, "assistant", message_id=ids[0] if ids else None, tokens=tokens, tool_uses=uses,
                     parent_tool_use_id=parent[0] if parent else None)


class LineSplitter:
    """Reassembles lines from chunks; keeps at most ``line_max`` bytes of one unfinished line."""

    def __init__(self, on_line: Callable[[bytes, float], None], line_max: int = 64 << 20) -> None:
        self.on_line = on_line
        self.line_max = line_max
        self._parts: list[bytes] = []
        self._size = 0
        self._discard = False  # inside a line that was dropped: wait for its end

    def feed(self, data: bytes, t: float) -> None:
        start = 0
        nl = data.find(b"\n")
        if nl < 0:
            self._keep(data)
            return
        if self._parts or self._discard:
            if not self._discard:
                self._parts.append(data[:nl])
                self.on_line(b"".join(self._parts), t)
            self._parts, self._size, self._discard = [], 0, False
            start = nl + 1
        find = data.find
        on_line = self.on_line
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            on_line(data[start:nl], t)
            start = nl + 1
        if start < len(data):
            self._keep(data[start:])

    def _keep(self, data: bytes) -> None:
        if self._discard:
            return
        self._parts.append(data)
        self._size += len(data)
        if self._size > self.line_max:
            self._parts, self._size, self._discard = [], 0, True

    def resync(self) -> None:
        """Forget the unfinished line: data was dropped in between."""
        self._parts, self._size, self._discard = [], 0, True


class StreamTap:
    """Summarizes stream-json output on its own thread; ``sink`` gets each ``StreamMsg``.

    The relay never wakes the tap: ``feed`` is a deque append (a thread wake-up per chunk would
    cost the relay more than the append itself on a busy machine). The tap polls every
    ``poll`` seconds, sooner when ``wake_bytes`` piled up, and gives the GIL away after every
    chunk it processed so the relay thread never waits behind a long run of parsing.
    """

    def __init__(self, sink: Callable[[StreamMsg], None], *, max_backlog: int = 64 << 20,
                 poll: float = 0.1, wake_bytes: int = 4 << 20) -> None:
        self.sink = sink
        self.max_backlog = max_backlog
        self.poll = poll
        self.wake_bytes = wake_bytes
        self._q: collections.deque[tuple[float, bytes]] = collections.deque()
        self._wake = threading.Event()
        self._stopping = False
        self.fed_bytes = 0  # written by the relay thread only
        self.done_bytes = 0  # written by the tap thread only
        self.skipped_bytes = 0
        self.lines = 0
        self._splitter = LineSplitter(self._line)
        self._ctx = Context()
        self._delta_at: float | None = None
        self._thread: threading.Thread | None = None

    def feed(self, data: bytes, t: float) -> None:
        self.fed_bytes += len(data)
        self._q.append((t, data))
        if self.fed_bytes - self.done_bytes > self.wake_bytes and not self._wake.is_set():
            self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="claudeguard-stream-tap", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Finish what was fed (up to ``timeout``), then end the thread."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def drain(self) -> None:
        """Process everything fed so far (the tap thread's work; also usable without it)."""
        q = self._q
        while q:
            t, data = q.popleft()
            self.done_bytes += len(data)
            if self.fed_bytes - self.done_bytes > self.max_backlog:
                self.skipped_bytes += len(data)
                self._splitter.resync()
                continue
            self._splitter.feed(data, t)
            if self._delta_at is not None:
                self._flush_deltas(self._delta_at)
            time.sleep(YIELD_S)  # let the relay thread take the GIL if it wants it

    def _line(self, line: bytes, t: float) -> None:
        self.lines += 1
        if line.startswith(_DELTA_PREFIX):
            # Token deltas are most lines and tell only "the stream flows": one summary per run.
            self._delta_at = t
            return
        if self._delta_at is not None:
            self._flush_deltas(self._delta_at)
        try:
            msg = summarize_line(line, t, self._ctx)
        except Exception:  # noqa: BLE001 - a strange line must never stop the tap
            msg = StreamMsg(t, "other")
        if msg is not None:
            self.sink(msg)

    def _run(self) -> None:
        while True:
            self.drain()
            if self._stopping:
                self.drain()
                return
            self._wake.wait(self.poll)
            self._wake.clear()

    def _flush_deltas(self, at: float) -> None:
        self.sink(StreamMsg(at, "partial", partial_event="content_block_delta"))
        self._delta_at = None
