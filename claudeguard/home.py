"""Whose home a process runs for: what keeps two homes of one user apart in the shared /tmp.

The guard's runtime dir (the approval channel, the sessions, the resident service and its desk)
defaults to ``/tmp/claudeguard-<uid>``. Two homes of one uid used to meet there: a script or a
test run with a temporary ``HOME`` beside the user's own sessions, or a container that shares
``/tmp``. The other home's service, with that home's config, fleet and audit log, took over the
slot, a printed desk URL died, and the sessions of the first home met a stranger on their port.
So the default root is keyed by home as well as uid:

- your own home (the one the password database gives your uid; also when ``HOME`` is unset, as
  under some cron daemons and ``sudo -u`` setups) keeps ``/tmp/claudeguard-<uid>``: cron, SSH,
  ``sudo -u`` and a systemd unit still find the same channel;
- any other ``HOME`` gets ``/tmp/claudeguard-<uid>-<key>``, the key a hash of that directory's
  identity (real path, device, inode): the same directory gives the same key in every
  environment, and a directory of the same name in a container (another file system) another.

Each runtime dir says whose it is in ``home.json`` (``{"home", "dev", "ino"}``), written when
it is made. That record settles the one case a path cannot: two processes whose own home has
the same path but is another directory (a container running as your uid with its own
``/home/you`` and the host's ``/tmp``). The first to make ``/tmp/claudeguard-<uid>`` owns it;
the other's own home is keyed like any other. Within one runtime dir shared on purpose
(``CLAUDEGUARD_RUNTIME_DIR`` set to the same dir from two homes, as the demo does), the
channel is shared but each home has its own service slot (``service_slot``): a service serves
the config, fleet and desk of the home that started it, and only that home's sessions.

Imports ``os`` (and ``pwd``, a built-in module, once per process): the launcher's start, the
hook's ancestry check and the watchdog's sampling all ask for the root.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Mapping

MARKER = "home.json"
SHARED_TMP = "/tmp"
_PASSWD_HOME: dict[int, str] = {}  # uid -> its home in the password database, looked up once


def passwd_home(uid: int | None = None) -> str:
    """The home the password database gives ``uid`` (default: ours), its real path; "" if none."""
    uid = os.getuid() if uid is None else uid
    found = _PASSWD_HOME.get(uid)
    if found is None:
        try:
            import pwd

            found = os.path.realpath(pwd.getpwuid(uid).pw_dir)
        except (KeyError, ImportError, OSError):
            found = ""
        _PASSWD_HOME[uid] = found
    return found


def home_of(env: Mapping[str, str] | None = None) -> str:
    """The real path of the home a process with environment ``env`` (default: ours) runs for:
    its ``HOME``, else the password database's."""
    env = os.environ if env is None else env
    home = env.get("HOME")
    return os.path.realpath(home) if home else passwd_home()


def identity(home: str) -> dict[str, object]:
    """What ``home.json`` says of ``home``: its real path, device and inode (0 when it does not exist)."""
    try:
        st = os.stat(home)
        dev, ino = st.st_dev, st.st_ino
    except OSError:
        dev = ino = 0
    return {"home": home, "dev": dev, "ino": ino}


def same(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """Two ``identity`` records name one directory."""
    if a.get("ino") and b.get("ino"):
        return (a.get("dev"), a.get("ino")) == (b.get("dev"), b.get("ino"))
    return a.get("home") == b.get("home")


def key(ident: Mapping[str, object]) -> str:
    """12 hex digits (48 bits of FNV-1a, 64-bit) of an identity: the suffix of a keyed dir."""
    h = 0xCBF29CE484222325
    for byte in f"{ident.get('home')}\0{ident.get('dev')}\0{ident.get('ino')}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h >> 16:012x}"


def read_marker(root: str) -> dict[str, object] | None:
    """The ``home.json`` of runtime dir ``root``, or None (missing, unreadable, not ours to trust:
    a link is not followed)."""
    from claudeguard.json_read import parse  # not json: the launcher's start path keeps ``re`` out

    try:
        fd = os.open(os.path.join(root, MARKER), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = parse(os.read(fd, 8192) or b"null")
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) and isinstance(data.get("home"), str) else None


def default_root(shared_tmp: str = SHARED_TMP, env: Mapping[str, str] | None = None) -> str:
    """The runtime dir a process of environment ``env`` uses when ``CLAUDEGUARD_RUNTIME_DIR`` is
    not set (see the module's docstring)."""
    base = os.path.join(shared_tmp, f"claudeguard-{os.getuid()}")
    home = home_of(env)
    ident = identity(home)
    if home == passwd_home():
        marker = read_marker(base)
        if marker is None or same(marker, ident):
            return base
    return f"{base}-{key(ident)}"


def owns(root: str, env: Mapping[str, str] | None = None, shared_tmp: str = SHARED_TMP) -> bool:
    """Runtime dir ``root`` is this home's: its ``home.json`` names this home, or it has none and
    is not the default dir of another home (an unmarked dir of one's own choosing,
    ``CLAUDEGUARD_RUNTIME_DIR``, belongs to whoever uses it)."""
    root = os.path.abspath(root)
    marker = read_marker(root)
    if marker is not None:
        return same(marker, identity(home_of(env)))
    base = os.path.join(shared_tmp, f"claudeguard-{os.getuid()}")
    if root == base or root.startswith(base + "-"):
        return root == default_root(shared_tmp, env)
    return True


def service_slot(root: str, env: Mapping[str, str] | None = None, shared_tmp: str = SHARED_TMP) -> str:
    """The name of this home's service dir in runtime dir ``root``: ``service`` for the home the
    dir is for, ``service-<key>`` for another home that shares it (``owns``)."""
    if owns(root, env, shared_tmp):
        return "service"
    return f"service-{key(identity(home_of(env)))}"


def mark(root: str, env: Mapping[str, str] | None = None, shared_tmp: str = SHARED_TMP) -> None:
    """Say in runtime dir ``root`` (ours, 0700, just checked) whose it is, unless it says so
    already or is another home's (``owns``): written once, never over another's record."""
    if os.path.lexists(os.path.join(root, MARKER)) or not owns(root, env, shared_tmp):
        return
    import json

    data = json.dumps(identity(home_of(env))).encode()
    tmp = os.path.join(root, f".{MARKER}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.link(tmp, os.path.join(root, MARKER))  # never over a marker another process wrote first
    except OSError:
        pass
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
