"""A program run by a path, or a file copied or linked, that is a binary a deny or ask rule names.

``Bash(touch *)`` denied must hold for ``/tmp/t x`` when ``/tmp/t`` is a link to touch, and for
``cp /usr/bin/touch /tmp/t`` (the copy would run unnoticed later). A binary is the file ``PATH``
and the system directories find for the name, compared by device and inode after links are
followed; the table is built for the names the rules mention and kept for a short while (the
service answers many calls). A path that does not exist (yet) resolves to nothing: what a
program that the rules let run does later is the OS sandbox's to hold.
"""

from __future__ import annotations

import os
import time

from claudeguard.policy.bash.model import basename
from claudeguard.policy.bash.programs import (
    AWKS, FOREIGN_SHELLS, INLINE_ANYWHERE, PRIVILEGED, RUNS_UNREAD, SEDS, SHELL_GRAMMARS, WRAPPERS, is_node, is_python,
)

# The programs whose arguments the walk reads into (wrappers, shells, interpreters, ...): one of
# them run under another name was not read.
LOOKED_INTO = frozenset(
    set(WRAPPERS) | set(PRIVILEGED) | set(SHELL_GRAMMARS) | FOREIGN_SHELLS
    | set(INLINE_ANYWHERE) | RUNS_UNREAD | AWKS | SEDS
    | {"python", "python3", "perl", "ruby", "node", "nodejs", "bun", "git", "find", "make", "busybox", "flock",
       "script", "watch", "parallel", "su", "npx", "npm", "pnpm", "yarn", "uv", "uvx"})


def looked_into(name: str) -> bool:
    return name in LOOKED_INTO or is_python(name) or is_node(name)

_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_TTL_S = 30.0
_TABLES: dict[frozenset[str], tuple[float, dict[tuple[int, int], str]]] = {}


def binaries(names: frozenset[str]) -> dict[tuple[int, int], str]:
    """(device, inode) of every binary the names are found as, to the name."""
    now = time.monotonic()
    cached = _TABLES.get(names)
    if cached is not None and now - cached[0] < _TTL_S:
        return cached[1]
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d.startswith("/")] + list(_DIRS)
    table: dict[tuple[int, int], str] = {}
    for name in sorted(names):
        for directory in dict.fromkeys(dirs):
            try:
                st = os.stat(os.path.join(directory, name))
            except OSError:
                continue
            table.setdefault((st.st_dev, st.st_ino), name)
    if len(_TABLES) > 64:
        _TABLES.clear()
    _TABLES[names] = (now, table)
    return table


def binary_at(path: str, table: dict[tuple[int, int], str]) -> str | None:
    """The name of the binary ``path`` (absolute) is, links followed; None when none of them."""
    if not table:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return table.get((st.st_dev, st.st_ino))


def program_names(specifiers: list[str]) -> frozenset[str]:
    """The programs Bash rule specifiers name (``touch *`` -> touch); a name with a wildcard in it
    names no one binary and is left out."""
    names = set()
    for spec in specifiers:
        first = spec.strip().split(" ", 1)[0].split(":", 1)[0]
        if first and "*" not in first and "\\" not in first:
            names.add(basename(first))
    return frozenset(names)
