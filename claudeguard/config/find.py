"""Which config files exist, found with ``os.path`` alone.

The shim's pass-through path (``--version``, ``doctor``, ``mcp``) asks this first and loads the
TOML machinery only when a file is there: most machines have none, and every millisecond on
that path is paid by every ``claude`` call.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Iterator, Mapping

PROJECT_FILE = ".claudeguard.toml"


def user_config_file(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(xdg, "claudeguard", "config.toml")
    if sys.platform.startswith("linux"):
        # platformdirs' answer on Linux, without importing it.
        return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config", "claudeguard", "config.toml")
    import platformdirs

    return os.path.join(platformdirs.user_config_dir("claudeguard"), "config.toml")


def state_dir(env: Mapping[str, str] | None = None) -> str:
    """The user's claudeguard state dir (``$XDG_STATE_HOME/claudeguard``, else
    ``~/.local/state/claudeguard`` on Linux): where the trust records live (``config.trust``),
    beside the default log dir. Never inside a project."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_STATE_HOME")
    if xdg:
        return os.path.join(xdg, "claudeguard")
    if sys.platform.startswith("linux"):
        return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state", "claudeguard")
    import platformdirs

    return platformdirs.user_state_dir("claudeguard")


def _parents(cwd: str) -> Iterator[str]:
    path = os.path.abspath(cwd)
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def project_config_file(cwd: str) -> str | None:
    """Nearest ``.claudeguard.toml`` from cwd upwards, stopping at the repository root."""
    for directory in _parents(cwd):
        candidate = os.path.join(directory, PROJECT_FILE)
        if os.path.isfile(candidate):
            return candidate
        if os.path.exists(os.path.join(directory, ".git")):
            return None
    return None


def project_root(cwd: str) -> str:
    for directory in _parents(cwd):
        if os.path.exists(os.path.join(directory, ".git")) or os.path.isfile(os.path.join(directory, PROJECT_FILE)):
            return directory
    return os.path.abspath(cwd)


def any_config(cwd: str) -> bool:
    """Is there any config file (or CLAUDEGUARD_CONFIG) to read at all?"""
    return (bool(os.environ.get("CLAUDEGUARD_CONFIG")) or os.path.exists(user_config_file())
            or project_config_file(cwd) is not None)
