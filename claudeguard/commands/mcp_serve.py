"""``claudeguardctl mcp-serve [--session-dir DIR]``: the permission-prompt MCP server (see
``claudeguard.gate.mcp_server``)."""

from __future__ import annotations


def main(argv: list[str]) -> int:
    from claudeguard.commands.hook import own_environment, session_dir_arg

    directory = session_dir_arg(argv)
    if directory is not None:
        own_environment(directory)
    from claudeguard.gate.mcp_server import serve

    return serve(session_dir=directory)
