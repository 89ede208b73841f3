"""claudeguard: a drop-in guard in front of the Claude Code CLI.

Kept empty on purpose: `claudeguard --version` and every hook call import this package, so it
must cost nothing. The parts live in sub-packages:

- ``shim/``      the ``claudeguard`` executable: options, CLI discovery, command building,
                 process supervision (pipes and pseudo-terminal).
- ``config/``    layered TOML configuration with file:line for every value.
- ``policy/``    Claude-Code-compatible permission rules and the decision for one tool call.
- ``channel/``   the FIFO approval channel, grants, and the audit log.
- ``watchdog/``  stall detection from process-tree CPU, output flow and guard events.
- ``commands/``  ``claudeguardctl`` and one module per sub-command.
- ``testing/``   a scripted Messages-API model server for offline runs, and the CLI installer.
"""

__version__ = "0.1.0"
