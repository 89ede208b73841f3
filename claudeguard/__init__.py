"""claudeguard: a drop-in guard in front of the Claude Code CLI.

Kept empty on purpose: `claudeguard --version` and every hook call import this package, so it
must cost nothing. The parts live in sub-packages:

- ``shim/``      the ``claudeguard`` executable: the launcher and its process supervision
                 (pipes and pseudo-terminal).
- ``plan/``      a session's plan: options, CLI discovery, the config check, the session file,
                 the CLI's argv and the guard's hooks (shared by the launcher and the service).
- ``service/``   the resident guard service: hooks over HTTP, the registry, the planner.
- ``gate/``      where the CLI calls back: the hook, the prompt tool, the decision.
- ``config/``    layered TOML configuration with file:line for every value.
- ``policy/``    Claude-Code-compatible permission rules and the decision for one tool call.
- ``channel/``   the FIFO approval channel, grants, and the audit log.
- ``watchdog/``  stall detection from process-tree CPU, output flow and guard events.
- ``commands/``  ``claudeguardctl`` and one module per sub-command.
- ``testing/``   a scripted Messages-API model server for offline runs, and the CLI installer.
"""

from __future__ import annotations

__version__ = "0.1.0"
