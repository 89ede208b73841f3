"""The gate: where the real CLI calls back into the guard for a decision.

``hook`` is the Claude Code hook command (PreToolUse, PermissionRequest and the events the
watchdog listens to); ``mcp_server`` is the stdio MCP permission-prompt server; both decide
through ``decide.decide_call``: policy, then grants, then the approval channel, then audit.
"""

from __future__ import annotations


def fast_entry_path() -> str:
    """The file the CLI runs for ``hook`` and ``mcp-serve`` (found without importing it)."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "fast_entry.py")
