"""A permission-prompt MCP stdio server that allows every request unchanged and logs it (issue 24).

    claude --mcp-config '{"mcpServers": {"p": {"command": "python3", "args": ["bench/prompt_tool_allow.py"]}}}' \
           --permission-prompt-tool mcp__p__approve ...

Each `tools/call` appends its arguments (`tool_name`, `input`, `tool_use_id`) as a JSON line to
`$PROMPT_LOG` and answers `{"behavior": "allow", "updatedInput": <the input it got>}`: what the
CLI shows a prompt after a PreToolUse `ask` with `updatedInput`, and what then runs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main() -> int:
    log = os.environ.get("PROMPT_LOG", os.devnull)
    for line in sys.stdin:
        msg = json.loads(line)
        mid, method = msg.get("id"), msg.get("method")
        if mid is None:
            continue  # a notification
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "prompt-allow", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "approve", "description": "allow", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            args = msg["params"].get("arguments", {})
            with open(log, "a") as fh:
                fh.write(json.dumps(args) + "\n")
            answer = {"behavior": "allow", "updatedInput": args.get("input")}
            result = {"content": [{"type": "text", "text": json.dumps(answer)}]}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
