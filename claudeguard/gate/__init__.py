"""The gate: where the real CLI calls back into the guard for a decision.

``hook`` is the Claude Code hook command (PreToolUse, PermissionRequest and the events the
watchdog listens to); ``mcp_server`` is the stdio MCP permission-prompt server; both decide
through ``decide.decide_call``: policy, then grants, then the approval channel, then audit.
"""
