"""Where claudeguard's files live, and the checks that keep its runtime directory private.

platformdirs decides the defaults; it is imported only when a path is actually needed, so the
shim's pass-through path and ``--version`` never pay for it. Every runtime directory is created
0700 and checked (owner, mode, no symlink planted by another user) before it is used.
"""

from __future__ import annotations

import os
import stat
import sys

from claudeguard import home
from claudeguard.errors import InsecurePathError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Mapping, TypeVar, Union

    StrPath = Union[str, "os.PathLike[str]"]
    AnyPath = TypeVar("AnyPath", str, Path)  # private_dir gives back what it was given

    from claudeguard.config.load import Config

APP = "claudeguard"


# The default runtime root is /tmp/claudeguard-<uid>, the same for every process of a user's own
# home (another HOME gets /tmp/claudeguard-<uid>-<key>: claudeguard/home.py):
# - not $XDG_RUNTIME_DIR: cron and `sudo -u` have none (or another user's), a user without a
#   login session has no /run/user/<uid>, and systemd removes it at logout under runs that go on;
# - not $TMPDIR: it differs between a login shell (pam_tmpdir), cron and sudo;
# - not /dev/shm: logind's RemoveIPC empties it of a user's files at logout.
# /tmp is shared, so the directory is made 0700 and checked before every use (owner us, no
# group/other bits, not a symlink); one owned by anybody else is refused, never used.
SHARED_TMP = "/tmp"


def default_runtime_root() -> str:
    return home.default_root(SHARED_TMP)


def runtime_root() -> Path:
    """Root of the approval channel and session state (not yet checked; see ``private_dir``)."""
    from pathlib import Path

    return Path(os.environ.get("CLAUDEGUARD_RUNTIME_DIR") or default_runtime_root())


def legacy_runtime_root() -> str | None:
    """Where claudeguard 0.1.0 and earlier kept the channel (``$XDG_RUNTIME_DIR/claudeguard``) when
    it holds sessions or requests that today's root does not see; None otherwise."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if not xdg or os.environ.get("CLAUDEGUARD_RUNTIME_DIR"):
        return None
    old = os.path.join(xdg, APP)
    if os.path.abspath(old) == os.path.abspath(default_runtime_root()):
        return None
    try:
        busy = any(n.endswith(".json") for n in os.listdir(os.path.join(old, "channel"))) if os.path.isdir(
            os.path.join(old, "channel")) else False
        busy = busy or bool(os.path.isdir(os.path.join(old, "sessions")) and os.listdir(os.path.join(old, "sessions")))
    except OSError:
        return None
    return old if busy else None


def legacy_note() -> str | None:
    """One line for `pending`/`ps`/`doctor` when an older claudeguard's sessions are elsewhere."""
    old = legacy_runtime_root()
    if old is None:
        return None
    return (f"note: {old} holds sessions or requests of an older claudeguard (default then: "
            f"$XDG_RUNTIME_DIR/claudeguard); see them with CLAUDEGUARD_RUNTIME_DIR={old}")


class GuardPaths:
    """The guard's own files, which no tool of a guarded session may change (``writes``) and the
    ones holding secrets, which none may read either (``reads``): the built-in protected-paths
    rule (``policy.protect``) and the sandbox (``plan.sandbox``) both start from here. Plain
    strings, absolute, links not followed (the checks follow them)."""

    __slots__ = ("runtime", "config_dir", "config_file", "extra_config", "log_dir", "state_dir",
                 "fleet_password_file", "fleet_approver_password_file")

    def __init__(self, runtime: str, config_dir: str, config_file: str, extra_config: str | None, log_dir: str,
                 state_dir: str, fleet_password_file: str | None = None,
                 fleet_approver_password_file: str | None = None) -> None:
        self.runtime = runtime  # sessions, hook secrets, the channel's FIFOs and sockets, the service's record
        self.config_dir = config_dir  # the user's claudeguard config dir (config.toml, profiles, fleet.pw)
        self.config_file = config_file
        self.extra_config = extra_config  # CLAUDEGUARD_CONFIG, if set
        self.log_dir = log_dir  # the audit log
        self.state_dir = state_dir  # trust records
        self.fleet_password_file = fleet_password_file  # [fleet] password_file, when the caller knows it
        self.fleet_approver_password_file = fleet_approver_password_file  # [fleet] approver_password_file, as above

    def __repr__(self) -> str:
        return "GuardPaths(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"

    def reads(self) -> list[tuple[str, str]]:
        """(path, why) no tool may read or write: what holds a secret."""
        out = [(self.runtime, "the guard's runtime dir (sessions, hook secrets, the approval channel)")]
        # The runtime dirs of this user's other homes (claudeguard/home.py) hold their sessions'
        # secrets too: /tmp/claudeguard-<uid> and every /tmp/claudeguard-<uid>-<key>, made or not.
        base = os.path.join(SHARED_TMP, f"{APP}-{os.getuid()}")
        out += [(other, "another home's guard runtime dir (its sessions' hook secrets)")
                for other in (base, base + "-*") if other != self.runtime]
        if self.fleet_password_file:
            out.append((self.fleet_password_file, "the fleet's password file"))
        if self.fleet_approver_password_file:
            out.append((self.fleet_approver_password_file, "the fleet's approver password file"))
        return out

    def writes(self) -> list[tuple[str, str]]:
        """(path, why) no tool may write (besides ``reads``): the guard's policy, log and trust."""
        out = [(self.config_file, "the user's claudeguard config file"),
               (self.config_dir, "the user's claudeguard config dir (config file, profiles)")]
        if self.extra_config:
            out.append((self.extra_config, "the CLAUDEGUARD_CONFIG file"))
        out += [(self.log_dir, "the guard's audit log"), (self.state_dir, "the guard's state dir (trust records)")]
        return out


def guard_paths(env: Mapping[str, str] | None = None, cfg: Config | None = None) -> GuardPaths:
    """Where the guard's own files are for a process with environment ``env`` (default: ours);
    with ``cfg``, also the fleet's password files it names (no tool may read them)."""
    from claudeguard.config.find import state_dir, user_config_file as find_user_file

    env = os.environ if env is None else env
    runtime = env.get("CLAUDEGUARD_RUNTIME_DIR") or home.default_root(SHARED_TMP, env)
    config_file = find_user_file(env)
    extra = env.get("CLAUDEGUARD_CONFIG") or None
    log = env.get("CLAUDEGUARD_LOG_DIR") or _log_dir_of(env)
    return GuardPaths(os.path.abspath(runtime), os.path.dirname(os.path.abspath(config_file)),
                      os.path.abspath(config_file), os.path.abspath(extra) if extra else None,
                      os.path.abspath(log), os.path.abspath(state_dir(env)),
                      cfg.fleet_password_file() if cfg is not None else None,
                      cfg.fleet_approver_password_file() if cfg is not None else None)


def _log_dir_of(env: Mapping[str, str]) -> str:
    if sys.platform.startswith("linux"):
        state = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local",
                                                          "state")
        return os.path.join(state, APP, "log")
    return log_dir_text()


def user_config_file() -> Path:
    from pathlib import Path

    from claudeguard.config.find import user_config_file as find_user_file

    return Path(find_user_file())


def log_dir() -> Path:
    from pathlib import Path

    return Path(log_dir_text())


def log_dir_text() -> str:
    """``log_dir()`` as a string, for the hook's audit write (no platformdirs import on Linux)."""
    env = os.environ.get("CLAUDEGUARD_LOG_DIR")
    if env:
        return env
    if sys.platform.startswith("linux"):
        return os.path.join(state_dir_text(), "log")  # what platformdirs.user_log_dir gives on Linux
    import platformdirs

    return platformdirs.user_log_dir(APP)


def state_dir_text() -> str:
    """The user's state dir: what claudeguard keeps across sessions (the audit log's default
    home, the record of verified CLIs). ``$XDG_STATE_HOME/claudeguard`` on Linux (no
    platformdirs import: the launcher's path reads it). Not created here: ``private_dir``."""
    if sys.platform.startswith("linux"):
        state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        return os.path.join(state, APP)
    import platformdirs

    return platformdirs.user_state_dir(APP)


def cache_dir() -> Path:
    from pathlib import Path

    env = os.environ.get("CLAUDEGUARD_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP))


def _check_components(path: StrPath, uid: int) -> None:
    """Refuse a symlink in ``path`` that someone other than us or root planted, and a parent
    that others can write into without the sticky bit (they could swap our directory)."""
    current = os.sep
    for part in os.path.abspath(path).split(os.sep)[1:]:
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (0, uid):
                raise InsecurePathError(f"{current}: symlink owned by uid {st.st_uid}; refusing to follow it")
            continue
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX and st.st_uid != uid:
            raise InsecurePathError(f"{current}: writable by others; refusing to keep private files below it")


def check_private_dir(path: StrPath) -> None:
    """Raise unless ``path`` is a real directory owned by us with no group/other access."""
    uid = os.getuid()
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise InsecurePathError(f"{path}: is a symlink; refusing to use it as a private directory")
    if not stat.S_ISDIR(st.st_mode):
        raise InsecurePathError(f"{path}: not a directory")
    if st.st_uid != uid:
        raise InsecurePathError(f"{path}: owned by uid {st.st_uid}, not by you (uid {uid})")
    if st.st_mode & 0o077:
        raise InsecurePathError(f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets others in; expected 0700")


def private_dir(path: AnyPath) -> AnyPath:
    """Create (0700) or verify a private directory, including missing parents, and return it
    (a str or a Path, whichever was given: the hook's path avoids pathlib)."""
    uid = os.getuid()
    _check_components(path, uid)
    try:
        os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        if parent != os.path.abspath(path):
            try:
                os.lstat(parent)
            except FileNotFoundError:
                private_dir(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # created by a concurrent process: verified below like any other
    check_private_dir(path)
    return path


def service_slot() -> Path:
    """This home's service dir in the runtime dir, made and checked: ``service``, or
    ``service-<key>`` for a home that shares another home's runtime dir (``home.service_slot``)."""
    root = runtime_dir()
    return runtime_dir(home.service_slot(str(root), shared_tmp=SHARED_TMP))


def runtime_dir(*parts: str) -> Path:
    """A checked private directory below the runtime root, e.g. ``runtime_dir("sessions")``."""
    root = runtime_root()
    try:
        private_dir(root)
    except InsecurePathError as exc:
        how = "set CLAUDEGUARD_RUNTIME_DIR to a private directory" if os.environ.get("CLAUDEGUARD_RUNTIME_DIR") \
            else "remove it if it is not yours, or set CLAUDEGUARD_RUNTIME_DIR"
        raise InsecurePathError(f"runtime dir {exc}; {how}") from None
    home.mark(str(root), shared_tmp=SHARED_TMP)  # whose it is (a second home sharing it: its own service slot)
    path = root
    for part in parts:
        path = private_dir(path / part)
    return path

