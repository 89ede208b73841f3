"""The watchdog: tells a stalled Claude CLI apart from one that is honestly working.

``sampler`` reads the child's process tree (CPU, states, io, blocked reads), ``stream`` taps the
stream-json output without changing a byte, ``state`` (pure) turns samples and events into a
state, its evidence and a stall verdict, ``monitor`` is the thread that ties them together and
acts on a stall, and ``status`` writes the per-session status files that ``claudeguardctl ps``
lists.
"""
