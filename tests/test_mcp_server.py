"""The hand-written MCP permission-prompt server: JSON-RPC units, and conformance with the
official `mcp` client library (a test-only dependency) over real stdio."""

from __future__ import annotations

import asyncio
import io
import json
import sys

import pytest

from claudeguard.gate import fast_entry_path
from claudeguard.gate.mcp_server import Server, decide_prompt


def _exchange(*messages: dict) -> list[dict]:
    out = io.StringIO()
    server = Server(out)
    for msg in messages:
        server.handle_line(json.dumps(msg))
    for thread in server.threads:
        thread.join(timeout=60)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_initialize_negotiates_a_supported_version():
    (reply,) = _exchange({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18"}})
    assert reply["result"]["protocolVersion"] == "2025-06-18"
    assert reply["result"]["capabilities"] == {"tools": {"listChanged": False}}
    (reply,) = _exchange({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "1999-01-01"}})
    assert reply["result"]["protocolVersion"] == "2025-11-25"


def test_notifications_get_no_reply_and_unknown_methods_an_error():
    replies = _exchange(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "resources/list"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
    )
    assert replies[0] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert replies[1]["error"]["code"] == -32601
    assert [t["name"] for t in replies[2]["result"]["tools"]] == ["approve"]


def test_garbage_gets_a_parse_error():
    out = io.StringIO()
    Server(out).handle_line("{not json")
    assert json.loads(out.getvalue())["error"]["code"] == -32700


def test_malformed_call_is_denied_with_a_reason():
    (reply,) = _exchange({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                          "params": {"name": "approve", "arguments": {"tool_name": 3}}})
    answer = json.loads(reply["result"]["content"][0]["text"])
    assert answer["behavior"] == "deny" and "without tool_name/input" in answer["message"]


def test_unreadable_session_fails_closed(tmp_path):
    answer = decide_prompt({"tool_name": "Bash", "input": {"command": "ls"}, "tool_use_id": "t"},
                           session_dir=str(tmp_path / "gone"))
    assert answer["behavior"] == "deny" and "could not decide" in answer["message"]


@pytest.fixture
def policy_env(tmp_path, monkeypatch):
    cfg = tmp_path / "guard.toml"
    cfg.write_text('[permissions]\ndeny = ["Bash(rm *)"]\nallow = ["Bash(git status)"]\n')
    env = {"CLAUDEGUARD_CONFIG": str(cfg), "CLAUDEGUARD_RUNTIME_DIR": str(tmp_path / "rt"),
           "CLAUDEGUARD_LOG_DIR": str(tmp_path / "log"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return env


def test_conformance_with_the_official_client(policy_env, tmp_path):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def session() -> tuple:
        params = StdioServerParameters(command=sys.executable, args=["-E", "-S", fast_entry_path(), "mcp-serve"],
                                       env=policy_env, cwd=str(tmp_path))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                init = await client.initialize()
                tools = await client.list_tools()
                await client.send_ping()
                denied = await client.call_tool("approve",
                                                {"tool_name": "Bash", "input": {"command": "rm -rf /"},
                                                 "tool_use_id": "toolu_1"})
                allowed = await client.call_tool("approve",
                                                 {"tool_name": "Bash", "input": {"command": "git status"},
                                                  "tool_use_id": "toolu_2"})
                return init, tools, denied, allowed

    init, tools, denied, allowed = asyncio.run(asyncio.wait_for(session(), 60))
    info = getattr(init, "server_info", None) or init.serverInfo  # the field was renamed across mcp releases
    assert info.name == "claudeguard"
    assert [t.name for t in tools.tools] == ["approve"]
    schema = getattr(tools.tools[0], "input_schema", None) or tools.tools[0].inputSchema
    assert schema["required"] == ["tool_name", "input"]
    deny = json.loads(denied.content[0].text)
    assert deny == {"behavior": "deny", "message": deny["message"]} and "denied by Bash(rm *)" in deny["message"]
    assert json.loads(allowed.content[0].text) == {"behavior": "allow", "updatedInput": {"command": "git status"}}
