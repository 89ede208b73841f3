"""A guarded session's plan, below both the launcher (``shim/``) and the resident service
(``service/``), which prepare sessions with the same code (the service's planner for a launcher).

``options`` splits the guard's options from the CLI's, ``claude_args`` reads the CLI's own;
``discovery`` finds the real CLI and its version; ``session`` loads and checks the config
(``settings_sources``: Claude Code's settings that could silence the guard) and writes the
session file its hooks read; ``argv`` builds the CLI's argv and environment, with the hooks of
``hooks``; ``keeper`` keeps the session dir in place while it runs; ``report`` is the end of the
run (``--guard-report``, ``--guard-fail-on``); ``wire`` names what the launcher and the planner
send each other.
"""
