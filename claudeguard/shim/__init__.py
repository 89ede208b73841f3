"""The ``claudeguard`` executable: the drop-in in front of the real Claude CLI.

``options`` splits guard options from Claude's; ``claude_args`` reads Claude's own arguments;
``discovery`` finds the real CLI; ``command`` builds the child's argv and environment (the
injection); ``supervise`` runs the child with pipes, ``pty_relay`` through a pseudo-terminal;
``main`` ties them together.
"""
