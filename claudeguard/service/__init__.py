"""The resident guard service: one process per user that answers the CLI's HTTP hooks for every
guarded session, holds the channel waits and the session registry, and outlives the launcher
(Claude Code's own background sessions do too).

- ``files``: where the service lives (``<runtime>/service/``), its record, the version fingerprint.
- ``protocol``: the control protocol's messages, as types.
- ``registry``: a registered session, and what the parts below know of the service.
- ``server``: the service process: control socket, registry, the hook endpoint, idle exit.
- ``http``: the loopback HTTP endpoint the CLI posts hook events to (one send per answer).
- ``client``: the launcher's side: find or start the service, register and unregister a session.
- ``planner``: the warm process that prepares a launcher's session (``plan/``'s code).
- ``watch``: the watchdog of foreground sessions, sampled here, acted on by their launchers.
- ``background``, ``agent_view``: keep ``--bg`` sessions and the sessions of agent view.

The channel itself stays in files (``claudeguard.channel``) so that any process of the user,
and later a bridge to a shared store, can list and answer requests without the service.
"""
