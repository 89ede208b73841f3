"""The launcher: the ``claudeguard`` executable in front of the real Claude CLI.

``main`` plans the session (``claudeguard.plan``, or the service's planner through ``planned``),
starts the CLI and supervises it: ``child`` is what both ways of running the CLI share,
``supervise`` runs it with pipes, ``pty_relay`` through a pseudo-terminal (with ``leader``,
``terminal``, ``screen``, ``screen_watch``, ``detached`` and the ``dialogs`` package);
``activity`` feeds what they saw to the watchdog. ``background`` and ``agent_view`` launch
``--bg`` sessions and agent view; ``session_commands`` holds lockdown for the sub-commands that
start sessions; ``leftovers`` stops what a signal-ended CLI left running.
"""
