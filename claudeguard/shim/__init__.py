"""The ``claudeguard`` executable: the drop-in in front of the real Claude CLI.

``options`` splits guard options from Claude's; ``claude_args`` reads Claude's own arguments;
``discovery`` finds the real CLI; ``command`` builds the child's argv and environment (the
injection); ``child`` is what both ways of running the CLI share, ``supervise`` runs it with
pipes, ``pty_relay`` through a pseudo-terminal (with ``leader``, ``terminal``, ``screen``,
``screen_watch``, ``detached`` and the ``dialogs`` package); ``activity`` feeds what they saw to
the watchdog; ``main`` ties them together.
"""
