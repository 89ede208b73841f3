"""``claudeguardctl mcp-serve``: the permission-prompt MCP server (see ``claudeguard.gate.mcp_server``)."""

from __future__ import annotations


def main(argv: list[str]) -> int:
    from claudeguard.gate.mcp_server import serve

    return serve()
