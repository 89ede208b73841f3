"""``claudeguardctl`` and its sub-commands, one module each (``ctl`` dispatches).

The hook and ``mcp-serve`` are called by the real CLI on every tool call and start, so the
dispatcher picks the module by name before importing argparse or anything else.
"""
