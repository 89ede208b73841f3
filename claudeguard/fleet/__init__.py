"""The fleet: one approval desk for many machines, through a Redis (or Valkey) the user runs.

Needs the optional extra ``claudeguard[fleet]`` (redis-py); importing this package without it
is a one-line error naming the extra. Nothing outside this package imports redis.

- ``config``  the ``[fleet]`` table and ``CLAUDEGUARD_FLEET_URL`` (``fleet_settings``), the
              credential (``password_env`` / a 0600 ``password_file``, read at connect time),
              ``url_warning`` for ``doctor``, ``secret_env_names`` for the launcher to strip.
- ``keys``    names, every key, and the two roles' ACLs (``member_acl``, ``approver_acl``).
- ``model``   the records on the wire, ``call_sha256``, ``request_view``, ``done_from_answer``.
- ``link``    ``FleetLink``, the owning machine's side (the service owns one), and
              ``channel_apply``, ``apply_answer`` through today's channel.
- ``client``  ``FleetClient``, the approver's side: list, answer and wait for the verdict, ps.
- ``view``    ``FleetDeskView``, the service's desk's view of the other machines (``[fleet] approver``):
              their requests from memory, an answer with the desk's provenance (``vouched``).
- ``conn``    the one module that imports redis.

The protocol (keys under ``<prefix>:``; the owning machine is M, an approver's ACL user U):

1. M's service posts a request in its channel as always, then ``link.request_posted(view)``:
   the link writes the view (``pending --json``'s fields + ``machine``, ``user``, ``uid``,
   ``cwd``, ``deadline``, ``call_sha256`` = SHA-256 of the canonical JSON of
   ``{"tool", "input"}``) into the hash ``m:M:reqs``. It heartbeats ``m:M:hb`` (sessions, their
   state and stall verdict, the pending count) every 2 s with a 10 s TTL (five beats), and ``machines``
   (zset, machine -> last beat). A machine without a heartbeat is gone: its requests are not
   listed, and its keys expire with the heartbeat's TTL.
2. An approver lists ``machines`` and, in one pipeline, each live machine's ``m:M:reqs``.
3. To answer, the approver reads Redis's clock (TIME), then ``SADD ax:M U`` and ``XADD
   a:M:U`` one entry ``a`` = ``{request_id, machine, call_sha256, decision, scope, message,
   choice, valid_until_ms, sender, vouched}`` (``vouched``: a desk's provenance, when its
   service relays the desk's answer) (``XADD bell:M`` too when U was new in ``ax:M``), and
   waits on ``m:M:results`` for the verdict on its entry ``U/<entry id>``.
4. M's link blocks in ``XREAD`` on ``bell:M`` and every ``a:M:<user>`` of ``ax:M``. The
   author of an entry is the ``<user>`` of the stream's key: the approver's ACL allows it to
   write ``a:*:U`` only, so it cannot answer in another's name, and a member (M's own
   credentials included) can write no ``a:`` key at all. Each entry is read once. It is
   refused unless it is for M, still valid (Redis's clock), for a request M holds, with that
   request's ``call_sha256``, ``allow``/``deny``, and scope once/agent/session (``forever`` from
   another machine would write M's config from afar). Else it goes to ``apply_answer``, which
   delivers it through the channel: the channel's waiter takes the first answer that reaches
   it, local or remote, and refuses every later one. The link writes an audit row
   (``fleet-answer``: the ACL user, the machine and uid its client gave, applied or why not).
5. M's link publishes one verdict per entry on ``m:M:results``: applied, or why not
   ("already answered by <who> at <when>": when the channel refused it, the link waits for
   ``request_done`` to learn who won). The approver reports success only on "applied".
6. When the call's wait ends, the service calls ``link.request_done(id, done)``: the request
   leaves ``m:M:reqs`` and its end goes into ``m:M:done`` for ten minutes.

Redis is never on the critical path of safety: calls wait in the local channel with their own
deadlines and local answers go there directly; when Redis is down, slow, paused or emptied,
the link reconnects with a backoff and publishes everything again (also every 30 s, and when
its heartbeat finds the database emptied). An answer the owner cannot confirm in time is
reported as not confirmed, never as given; it stops being valid (Redis's clock) before the
approver stops waiting, so it cannot be applied after its sender gave up.
"""

from __future__ import annotations

from claudeguard.errors import GuardError


class FleetExtraMissing(GuardError, ImportError):
    """``claudeguard[fleet]`` is not installed: one line, exit 2."""


def _require_extra() -> None:
    # find_spec, not an import: the check costs nothing, and redis (~100 ms of imports, asyncio
    # among them) is imported only by the modules that talk to it.
    import importlib.util  # noqa: PLC0415 - the fleet's optional extra is looked for only when the fleet is used

    try:
        found = importlib.util.find_spec("redis") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise FleetExtraMissing("the fleet needs the optional extra claudeguard[fleet] (the redis client): "
                                "pip install 'claudeguard[fleet]'")


_require_extra()
