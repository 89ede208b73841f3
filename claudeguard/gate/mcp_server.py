"""``claudeguardctl mcp-serve``: the stdio MCP server behind ``--permission-prompt-tool``.

Hand-written JSON-RPC 2.0 over newline-delimited stdio (initialize, tools/list, tools/call,
ping, notifications) because importing the official SDK costs about a second and 64 MB on
every Claude start. One tool, ``approve``: arguments ``{tool_name, input, tool_use_id}``, result
a text block holding ``{"behavior": "allow", "updatedInput": ...}`` or ``{"behavior": "deny",
"message": ...}``. Each call is answered on its own thread, since one may wait minutes for a
human while the CLI sends pings or asks about a parallel call.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import IO, Any

from claudeguard import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.gate.session import Session

TOOL_NAME = "approve"
SUPPORTED_PROTOCOLS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
TOOL = {
    "name": TOOL_NAME,
    "description": "claudeguard: decides a Claude Code permission prompt by policy or by asking a human through the "
                   "approval channel",
    "inputSchema": {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string"},
            "input": {"type": "object"},
            "tool_use_id": {"type": "string"},
        },
        "required": ["tool_name", "input"],
    },
}


class Server:
    def __init__(self, out: IO[str], session_dir: str | None = None) -> None:
        self.out = out
        self.session_dir = session_dir  # from our command line (``mcp-serve --session-dir DIR``)
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"))
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def result(self, msg_id: object, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def error(self, msg_id: object, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def handle_line(self, line: str) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            self.error(None, -32700, "parse error")
            return
        if isinstance(msg, list):  # JSON-RPC batch (older protocol revisions)
            for item in msg:
                self.handle(item)
            return
        self.handle(msg)

    def handle(self, msg: object) -> None:
        if (isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and msg.get("method") == "tools/call"
                and msg.get("id") is not None):
            # Each call on its own thread: one may wait minutes for a human.
            thread = threading.Thread(target=self.answer, args=(msg,), daemon=True)
            self.threads.append(thread)
            thread.start()
            return
        self.answer(msg)

    def answer(self, msg: object) -> None:
        out = respond(msg, session_dir=self.session_dir)
        if out is not None:
            self.send(out)


def respond(msg: object, session: Session | None = None, session_dir: str | None = None) -> dict[str, Any] | None:
    """The JSON-RPC answer to one message; None for a notification or a response. The same for
    the stdio server (``session_dir``: the one on its command line) and the service's HTTP
    endpoint (``service.http``, ``session`` given); ``tools/call`` decides here and may wait for
    a human."""
    def error(msg_id: object, code: int, message: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}

    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return error(msg.get("id") if isinstance(msg, dict) else None, -32600, "invalid request")
    method = msg.get("method")
    msg_id = msg.get("id")
    if method is None or msg_id is None:
        return None  # a response to something we never sent; notifications need no answer
    params = msg.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in SUPPORTED_PROTOCOLS else SUPPORTED_PROTOCOLS[0]
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "claudeguard", "version": __version__},
        }
    elif method in ("ping", "server/discover"):  # 2.1.330 sends server/discover before initialize
        result = {}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        if params.get("name") != TOOL_NAME:
            return error(msg_id, -32602, f"unknown tool: {params.get('name')}")
        from claudeguard.decision import prompt_tool_result

        result = prompt_tool_result(decide_prompt(params.get("arguments") or {}, session, session_dir))
    else:
        return error(msg_id, -32601, f"method not found: {method}")
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def decide_prompt(args: dict[str, Any], session: Session | None = None,
                  session_dir: str | None = None) -> dict[str, Any]:
    """The prompt tool's answer; any failure is a deny with the reason (fail closed). The stdio
    server reads its session from the dir on its command line, the service passes the
    registered one; without either, a session from the config files (nothing is taken from the
    environment, which a settings ``env`` block sets)."""
    from claudeguard.decision import failure, prompt_tool_answer

    tool = args.get("tool_name")
    tool_input = args.get("input")
    if not isinstance(tool, str) or not isinstance(tool_input, dict):
        return prompt_tool_answer(failure("claudeguard: prompt-tool call without tool_name/input; denied"), {})
    try:
        from claudeguard.gate.decide import decide_call, reuse_answer
        from claudeguard.gate.session import current_session, recall_call

        session = session or current_session(directory=session_dir)  # an unreadable one raises: a deny
        from claudeguard.gate.proof import NO_SIGN, end_session, lifeless

        if lifeless(session):  # the CLI asks before any hook of the guard's reached it
            assert session.dir is not None
            why = NO_SIGN.format(what=f"a {tool} call")
            end_session(session.dir, why)
            return prompt_tool_answer(failure(why), tool_input)
        tool_use_id = args.get("tool_use_id")
        who = recall_call(session, tool_use_id)
        verdict = reuse_answer(session, tool, tool_input, who.get("agent_id"), tool_use_id) if tool_use_id else None
        if verdict is None:
            from claudeguard.gate.hook import held_still

            cwd = session.snapshot.get("cwd") or os.getcwd()
            # The boxes held still from the look at the paths to the CLI's use (gate/freeze.py).
            from claudeguard.gate.call import Asking, Call

            call = Call(tool, tool_input, who.get("agent_type"), who.get("agent_id"), cwd,
                        tool_use_id if isinstance(tool_use_id, str) else None)
            # Every call passes the PreToolUse hook first, which notes it: with HTTP hooks, a call
            # without that note is one the service did not answer (down, or restarting).
            asking = Asking("prompt-tool", "ask", unseen_by_hook=not who and session.snapshot.get("hooks") == "http")
            verdict = held_still(session, call, "prompt-" + str(tool_use_id or ""), lambda: "ask", lambda: None,
                                 lambda: decide_call(session, call, asking))
        from claudeguard.gate.box import allowed_input

        run_input = allowed_input(session, tool, tool_input, verdict) or tool_input
    except Exception as exc:  # noqa: BLE001 - fail closed with a reason
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        verdict = failure(f"claudeguard: the guard could not decide ({detail}); denied")
        run_input = tool_input
    return prompt_tool_answer(verdict, run_input)


def serve(stdin: IO[str] | None = None, stdout: IO[str] | None = None, session_dir: str | None = None) -> int:
    server = Server(stdout or sys.stdout, session_dir)
    for line in stdin or sys.stdin:
        if line.strip():
            server.handle_line(line)
    # stdin closed: the CLI is gone; answer nothing more, but let calls in flight finish writing.
    for thread in server.threads:
        thread.join(timeout=0.1)
    return 0
