"""The ``[fleet]`` table and ``CLAUDEGUARD_FLEET_URL``: checked into a ``FleetConfig``, with one
line per mistake (``file:line`` where the config loader knows it); the credential is read only
when a connection is made, never kept in the config object, never printed.

```toml
[fleet]
url = "rediss://redis.internal:6380/0"       # or CLAUDEGUARD_FLEET_URL (which wins)
username = "cg-ci-runner-7"                  # the Redis ACL user (or in the URL: rediss://USER@host)
password_env = "CLAUDEGUARD_FLEET_PASSWORD"  # the default; or password_file = "~/.config/claudeguard/fleet.pw" (0600)
machine = "ci-runner-7"                      # default: the hostname
prefix = "claudeguard"                       # every key starts "<prefix>:"
ca_file = "/etc/ssl/internal-ca.pem"         # rediss:// only: the CA that signed the server's certificate
approver = "cg-alice"                        # optional: the approver ACL user the service's desk answers other
                                             # machines' requests as; its password as the member's:
approver_password_env = "CLAUDEGUARD_FLEET_APPROVER_PASSWORD"  # the default; or approver_password_file (0600)
```

A password never goes in the URL: a URL ends up in argv, logs and ``config show``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from urllib.parse import unquote, urlsplit

from claudeguard.errors import ConfigError, GuardError
from claudeguard.fleet.keys import DEFAULT_PREFIX, DEFAULT_USER, is_machine, is_prefix, is_user, machine_label

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    from claudeguard.config.load import Config

URL_ENV = "CLAUDEGUARD_FLEET_URL"
PASSWORD_ENV = "CLAUDEGUARD_FLEET_PASSWORD"  # password_env's default
APPROVER_PASSWORD_ENV = "CLAUDEGUARD_FLEET_APPROVER_PASSWORD"  # approver_password_env's default
KEYS = ("url", "username", "password_env", "password_file", "machine", "prefix", "ca_file", "approver",
        "approver_password_env", "approver_password_file")
SCHEMES = ("redis", "rediss")
PASSWORD_MAX = 4096
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


class Server:
    """Where the fleet's Redis is: its URL as given and where it was given, parsed, and the CA."""

    __slots__ = ("url", "url_source", "tls", "host", "port", "db", "ca_file")

    def __init__(self, url: str, url_source: str, tls: bool, host: str, port: int, db: int,
                 ca_file: str | None) -> None:
        self.url, self.url_source, self.tls, self.host, self.port, self.db = url, url_source, tls, host, port, db
        self.ca_file = ca_file


class Credential:
    """Who connects: the ACL user, and where its password is read from (never the password)."""

    __slots__ = ("username", "password_env", "password_env_explicit", "password_file", "key_prefix")

    def __init__(self, username: str | None, password_env: str | None, password_env_explicit: bool,
                 password_file: str | None, key_prefix: str = "") -> None:
        self.username, self.password_env, self.password_file = username, password_env, password_file
        self.password_env_explicit = password_env_explicit
        self.key_prefix = key_prefix


class FleetConfig:
    """A checked fleet config. Holds no secret: ``password()`` reads it when a connection is made."""

    __slots__ = ("url", "tls", "host", "port", "db", "username", "password_env", "password_env_explicit",
                 "password_file", "machine", "prefix", "ca_file", "url_source", "approver",
                 "key_prefix")

    def __init__(self, server: Server, credential: Credential, *, machine: str, prefix: str,
                 approver: FleetConfig | None = None) -> None:
        self.url, self.url_source = server.url, server.url_source  # url_source: "path:line" or "env ..."
        self.tls, self.host, self.port, self.db, self.ca_file = server.tls, server.host, server.port, server.db, \
            server.ca_file
        self.username = credential.username
        self.password_env = credential.password_env
        self.password_env_explicit = credential.password_env_explicit
        self.password_file = credential.password_file
        self.key_prefix = credential.key_prefix  # "approver_" for the approver's: its keys' names in errors
        self.machine = machine
        self.prefix = prefix
        # The approver the service's desk answers other machines' requests as ([fleet] approver):
        # the same server, machine and prefix, its own ACL user and credential. None: no desk answers.
        self.approver = approver

    @property
    def acl_user(self) -> str:
        """The Redis ACL user this config connects as (``default`` when it names none)."""
        return self.username or DEFAULT_USER

    def describe(self) -> str:
        """One line for ``doctor`` and errors: where, as whom, which machine (no secret)."""
        scheme = "rediss" if self.tls else "redis"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (f"{scheme}://{host}:{self.port}/{self.db} as {self.acl_user} "
                f"(machine {self.machine}, prefix {self.prefix})")

    def fleet_id(self) -> str:
        """Which fleet: its server, database and prefix, whoever connects (member or approver)."""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{self.host}:{self.port}/{self.db} {self.prefix}"

    def __repr__(self) -> str:
        return f"FleetConfig({self.describe()})"

    def password(self) -> str | None:
        """The credential, from ``password_file`` (0600, ours, not a link) or ``password_env``.
        None when neither is configured (a Redis without AUTH, or an ACL user with nopass)."""
        if self.password_file:
            return read_password_file(self.password_file, f"fleet.{self.key_prefix}password_file")
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None and self.password_env_explicit:
                raise GuardError(f"fleet.{self.key_prefix}password_env: ${self.password_env} is not set")
            return value or None
        return None


def fleet_settings(table: Mapping[str, Any] | None, *, where: Callable[[tuple[str, ...]], str] | None = None,
                   environ: Mapping[str, str] | None = None, hostname: str | None = None) -> FleetConfig | None:
    """Check a ``[fleet]`` table (None when the config has none) and ``CLAUDEGUARD_FLEET_URL``
    (which sets or overrides ``url``). None when neither is there: the fleet is off. Raises
    ConfigError with one line, ``where(("fleet", key))`` first (the loader's ``Layer.where``
    gives ``file:line``)."""
    env = os.environ if environ is None else environ

    def at(key: str | None = None) -> str:
        path = ("fleet",) if key is None else ("fleet", key)
        return where(path) if where is not None else ".".join(path)

    env_url = env.get(URL_ENV) or None
    if table is None and env_url is None:
        return None
    if table is None:
        table = {}
    if not hasattr(table, "items"):
        raise ConfigError(f"{at()}: [fleet] must be a table")
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"{at(key)}: unknown key 'fleet.{key}' (known here: {', '.join(KEYS)})")
        if not isinstance(value, str):
            raise ConfigError(f"{at(key)}: 'fleet.{key}' must be a string, not {type(value).__name__}")
    if env_url is not None:
        url, url_source = env_url, f"env {URL_ENV}"
    elif "url" in table:
        url, url_source = table["url"], at("url")
    else:
        raise ConfigError(f"{at()}: [fleet] needs url = \"rediss://host:port/db\" (or {URL_ENV})")
    tls, host, port, db, url_user = parse_url(url, url_source)

    username = table.get("username")
    if username is not None and not is_user(username):
        raise ConfigError(f"{at('username')}: fleet.username {username!r}: 1-64 letters, digits, '.', '_', '-', '@'")
    if url_user is not None and username is not None and url_user != username:
        raise ConfigError(f"{at('username')}: fleet.username {username!r} differs from the user in the URL "
                          f"({url_source}: {url_user!r}); give it once")
    username = username or url_user

    password_file = table.get("password_file")
    password_env = table.get("password_env")
    password_env, password_file, explicit = _credential(table, at, "", password_env, password_file, PASSWORD_ENV)

    machine = table.get("machine")
    if machine is None:
        machine = machine_label(hostname if hostname is not None else socket.gethostname())
    elif not is_machine(machine):
        raise ConfigError(f"{at('machine')}: fleet.machine {machine!r}: 1-64 letters, digits, '.', '_', '-'")
    prefix = table.get("prefix", DEFAULT_PREFIX)
    if not is_prefix(prefix):
        raise ConfigError(f"{at('prefix')}: fleet.prefix {prefix!r}: 1-64 letters, digits, '.', '_', '-', ':' "
                          "(not first or last)")
    ca_file = table.get("ca_file")
    if ca_file is not None:
        if not tls:
            raise ConfigError(f"{at('ca_file')}: fleet.ca_file is for rediss:// (TLS); the URL is redis://")
        ca_file = os.path.expanduser(ca_file)
        if not os.path.isfile(ca_file):
            raise ConfigError(f"{at('ca_file')}: fleet.ca_file {ca_file}: no such file")
    server = Server(url, url_source, tls, host, port, db, ca_file)
    approver_cfg = _approver(table, at, server, username, machine, prefix)
    return FleetConfig(server, Credential(username, password_env, explicit, password_file), machine=machine,
                       prefix=prefix, approver=approver_cfg)


def _approver(table: Mapping[str, Any], at: Callable[..., str], server: Server, username: str | None, machine: str,
              prefix: str) -> FleetConfig | None:
    """``[fleet] approver``: the ACL user the service's desk answers other machines' requests as
    (its own credential); None without one."""
    approver = table.get("approver")
    if approver is None:
        for key in ("approver_password_env", "approver_password_file"):
            if key in table:
                raise ConfigError(f"{at(key)}: fleet.{key} without fleet.approver (the approver's ACL user)")
    else:
        if not is_user(approver):
            raise ConfigError(f"{at('approver')}: fleet.approver {approver!r}: 1-64 letters, digits, '.', '_', '-', "
                              "'@'")
        if approver == (username or DEFAULT_USER):
            raise ConfigError(f"{at('approver')}: fleet.approver {approver!r} is this machine's member user too; a "
                              "member's credentials cannot answer: name the approver's own ACL user")
        a_env, a_file, a_explicit = _credential(table, at, "approver_", table.get("approver_password_env"),
                                                table.get("approver_password_file"), APPROVER_PASSWORD_ENV)
        return FleetConfig(server, Credential(approver, a_env, a_explicit, a_file, key_prefix="approver_"),
                           machine=machine, prefix=prefix)
    return None


def _credential(table: Mapping[str, Any], at: Callable[[str], str], role: str, password_env: str | None,
                password_file: str | None, default_env: str) -> tuple[str | None, str | None, bool]:
    """``<role>password_env`` / ``<role>password_file`` checked: (env name, file, env named explicitly)."""
    env_key, file_key = f"{role}password_env", f"{role}password_file"
    if password_file is not None and password_env is not None:
        raise ConfigError(f"{at(file_key)}: give fleet.{env_key} or fleet.{file_key}, not both")
    if password_env is not None and not _is_env_name(password_env):
        raise ConfigError(f"{at(env_key)}: fleet.{env_key} {password_env!r} is not an environment variable name")
    if password_file is not None:
        if not password_file:
            raise ConfigError(f"{at(file_key)}: fleet.{file_key} is empty")
        password_file = os.path.expanduser(password_file)
        if not os.path.isabs(password_file):
            raise ConfigError(f"{at(file_key)}: fleet.{file_key} {password_file!r} must be an absolute path (or "
                              "start with ~/)")
    explicit = password_env is not None
    if password_file is None and password_env is None:
        password_env = default_env
    return password_env, password_file, explicit


def from_config(cfg: Config, environ: Mapping[str, str] | None = None) -> FleetConfig | None:
    """The fleet of a loaded config (``[fleet]`` of the user's own files, ``CLAUDEGUARD_FLEET_URL``),
    None when there is none; a mistake is one line with the ``file:line`` of its key."""
    table = cfg.fleet_table()
    env = os.environ if environ is None else environ
    if table is None and not env.get(URL_ENV):
        return None

    def where(path: tuple[str, ...]) -> str:
        key = ".".join(path)
        if key in cfg.values:
            return cfg.source(key)
        known = [cfg.source(f"fleet.{k}") for k in table or {}]
        return known[0].rsplit(":", 1)[0] if known else "[fleet]"

    return fleet_settings(table, where=where, environ=env)


def parse_url(url: str, where: str) -> tuple[bool, str, int, int, str | None]:
    """``redis[s]://[USER@]HOST[:PORT][/DB]`` -> (tls, host, port, db, user). No password, query
    or fragment (each refused with one line)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: fleet.url {_shown(url)}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"{where}: fleet.url {_shown(url)}: expected redis:// or rediss:// (TLS)")
    if parts.password is not None:
        raise ConfigError(f"{where}: fleet.url holds a password; put it in fleet.password_env or "
                          "fleet.password_file (a URL ends up in argv, logs and `config show`)")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: fleet.url {_shown(url)}: no ?query or #fragment (the fleet takes its "
                          "options from [fleet])")
    host = parts.hostname
    if not host:
        raise ConfigError(f"{where}: fleet.url {_shown(url)}: no host")
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise ConfigError(f"{where}: fleet.url {_shown(url)}: the path is a database number (/0), not {path!r}")
    user = parts.username
    if user is not None:
        user = unquote(user)
        if not is_user(user):
            raise ConfigError(f"{where}: fleet.url: user {user!r}: 1-64 letters, digits, '.', '_', '-', '@'")
    return parts.scheme == "rediss", host, port or 6379, int(path or 0), user


def _shown(url: str) -> str:
    """The URL for an error line, without anything between '//' and '@' (never a secret)."""
    scheme, sep, rest = url.partition("//")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = "…@" + rest.split("@", 1)[1]
    return repr(scheme + sep + rest)


def _is_env_name(text: str) -> bool:
    return bool(text) and not text[0].isdigit() and all(c.isascii() and (c.isalnum() or c == "_") for c in text)


def read_password_file(path: str, key: str = "fleet.password_file") -> str:
    """The first line of a 0600 regular file owned by us, opened without following a link.
    Anything else is one line that names the file and what is wrong, never its content."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise GuardError(f"{key} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GuardError(f"{key} {path}: not a regular file")
        if st.st_uid != os.geteuid():
            raise GuardError(f"{key} {path}: owned by uid {st.st_uid}, not by you")
        if st.st_mode & 0o077:
            raise GuardError(f"{key} {path}: mode {stat.S_IMODE(st.st_mode):04o}; it must be 0600 "
                             f"(chmod 600 {path})")
        data = os.read(fd, PASSWORD_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > PASSWORD_MAX:
        raise GuardError(f"{key} {path}: longer than {PASSWORD_MAX} bytes")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise GuardError(f"{key} {path}: not UTF-8 text") from None
    password = text.split("\n", 1)[0].rstrip("\r")
    if not password:
        raise GuardError(f"{key} {path}: empty")
    return password


def secret_env_names(cfg: FleetConfig) -> list[str]:
    """The environment variables that may hold the fleet's credential: the launcher strips them
    from the CLI's environment (the agent must never reach Redis with them)."""
    names = [PASSWORD_ENV, APPROVER_PASSWORD_ENV]
    for one in (cfg, cfg.approver):
        if one is not None and one.password_env and one.password_env not in names:
            names.append(one.password_env)
    return names


def url_warning(cfg: FleetConfig) -> str | None:
    """For ``doctor``: a warning line when requests (which can hold secrets: commands, file
    contents) and answers would cross a network in clear text: redis:// to a host that is not
    loopback. None when TLS is on or the host is this machine."""
    if cfg.tls or is_loopback(cfg.host):
        return None
    return (f"fleet.url ({cfg.url_source}): redis:// to {cfg.host} sends requests (which can hold secrets) and "
            "answers in clear text; use rediss:// (TLS)")


def is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
