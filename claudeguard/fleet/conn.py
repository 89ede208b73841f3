"""A Redis client for one thread, with bounded waits and no retries of redis-py's own (the
link retries on its own terms; a command never waits longer than ``io_timeout``). The only
module that imports redis.

Before a connection says a word (AUTH carries the password), it asks who accepted it
(``tcp_owner.server_inside_session``): a boxed command shares the host's network, so while a
Redis on this machine is down (restarted, not yet started) an agent could bind its port, take an
approver's password from the AUTH and hand the link forged answers. A server held by a process
inside a guarded session is refused with one line; a Redis on another machine is not in this
machine's table, and TLS (``rediss://``) is what vouches for it.
"""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from claudeguard.tcp_owner import server_inside_session

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

    from claudeguard.fleet.config import FleetConfig

    # redis-py types every reply as "a value, or an Awaitable of it" (one client class serves
    # both), which says nothing here: our callers take replies as data and check their shapes.
    Conn = Any

CONNECT_TIMEOUT_S = 2.0
# What a link or client treats as "Redis is not there right now" (OSError: TLS and socket
# failures that redis-py lets through).
FAILURES: tuple[type[Exception], ...] = (redis.RedisError, OSError)
NoPermission = redis.exceptions.NoPermissionError


def connect(cfg: FleetConfig, *, io_timeout: float) -> Conn:
    """A client for one thread (its connection is made by the first command). ``io_timeout`` bounds every
    read and write, a blocking XREAD's own BLOCK included, so it must exceed that BLOCK."""
    kwargs = dict(
        host=cfg.host, port=cfg.port, db=cfg.db, username=cfg.username, password=cfg.password(),
        socket_timeout=io_timeout, socket_connect_timeout=min(CONNECT_TIMEOUT_S, io_timeout),
        retry=Retry(NoBackoff(), 0), decode_responses=True,
        health_check_interval=0, protocol=2,
        redis_connect_func=_checked_on_connect_tls if cfg.tls else _checked_on_connect,
    )
    if cfg.tls:
        kwargs.update(ssl=True, ssl_cert_reqs="required", ssl_check_hostname=True)
        if cfg.ca_file:
            kwargs["ssl_ca_certs"] = cfg.ca_file
    try:
        # No CLIENT SETINFO: the roles' ACLs allow only the protocol's commands.
        return redis.Redis(driver_info=None, **kwargs)  # type: ignore[arg-type]  # the kwargs' types vary by key
    except TypeError:  # a redis-py before driver_info
        return redis.Redis(lib_name=None, lib_version=None, **kwargs)  # type: ignore[arg-type]  # as above


def _checked_on_connect_tls(conn: Any) -> None:
    # The certificate and host name are checked: a server this machine's table cannot place (a
    # loopback Redis NAT'd into a container) is let through; an agent has no certificate for the name.
    _checked_on_connect(conn, unseen_ok=True)


def _checked_on_connect(conn: Any, *, unseen_ok: bool = False) -> None:
    """redis-py's ``redis_connect_func``: called with the socket connected (and TLS done), before
    the handshake that sends the credentials."""
    why = server_inside_session(conn._sock, unseen_ok=unseen_ok)
    if why is not None:
        raise redis.ConnectionError(f"refused the fleet's Redis at {conn.host}:{conn.port}: {why}; "
                                    "no credentials were sent")
    handshake = getattr(conn, "on_connect_check_health", None)  # redis-py 6 on; on_connect before
    if handshake is not None:
        handshake(check_health=True)
    else:
        conn.on_connect()


def describe_failure(exc: BaseException) -> str:
    """A Redis failure in one line (redis-py's messages hold no credential)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
