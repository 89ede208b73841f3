"""The tool names a Claude Code CLI knows, read from its binary's embedded JavaScript.

The CLI keeps the map of the legacy names its permission rules still accept
(``{Task:"Agent",KillShell:"TaskStop",...}``) and, from 2.1.330 on, right before it the sorted
list of its own tools (``var x=["Agent","Artifact",...],y={Task:"Agent",...}``). ``derive``
writes them into each version's table (``tools``); ``installed_names`` reads them from the CLI
installed here, for a CLI newer than every table: a tool it adds is not refused in a config rule
(``policy.rules.tool_problem`` asks it only for a name no table knows). Stdlib only, imported
only on that path.
"""

from __future__ import annotations

import mmap
import os
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Mapping

_ALIASES = re.compile(rb'\{(Task:"Agent"(?:,[A-Za-z_$][\w$]*:"[A-Za-z_][\w]*")*)\}')
_ALIAS = re.compile(rb'([A-Za-z_$][\w$]*):"([A-Za-z_][\w]*)"')
_NAME_LIST = re.compile(rb'=\[((?:"[A-Za-z_][\w]*",)*"[A-Za-z_][\w]*")\],[A-Za-z_$][\w$]*=$')
_SEEN: dict[tuple[str, int, int], set[str]] = {}  # a binary read once per process, by path, size and mtime


def read_tools(m: mmap.mmap | bytes) -> dict[str, object]:
    """``{"names": [...], "aliases": {legacy: tool}}`` of one CLI binary (names empty where the
    binary keeps no list: 2.1.197)."""
    at = m.find(b'{Task:"Agent",')
    if at == -1:
        return {"names": [], "aliases": {}}
    found = _ALIASES.match(m, at)
    aliases = dict(sorted((k.decode(), v.decode()) for k, v in _ALIAS.findall(found.group(1)))) if found else {}
    before = _NAME_LIST.search(m[max(0, at - 8000):at])
    names = sorted({n.decode() for n in re.findall(rb'"([^"]+)"', before.group(1))}) if before else []
    return {"names": names, "aliases": aliases}


def names_in_binary(path: str) -> set[str]:
    """Every tool name the binary at ``path`` knows (its list, its legacy names and their
    targets); empty for a file that is no Claude Code CLI (our own launcher, a shim)."""
    try:
        st = os.stat(path)
    except OSError:
        return set()
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key in _SEEN:
        return _SEEN[key]
    found: set[str] = set()
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            tools = read_tools(m)
    except (OSError, ValueError):  # unreadable, or empty (mmap of 0 bytes)
        tools = {}
    names, aliases = tools.get("names"), tools.get("aliases")
    if isinstance(names, list):
        found.update(str(n) for n in names)
    if isinstance(aliases, dict):
        found.update(str(k) for k in aliases)
        found.update(str(v) for v in aliases.values())
    _SEEN[key] = found
    return found


def installed_names(env: Mapping[str, str] | None = None) -> set[str]:
    """The tool names of the Claude Code CLI installed here: ``CLAUDEGUARD_CLAUDE``, else the
    first ``claude`` on PATH whose binary names its tools (claudeguard's own launcher and shims
    name none, and are passed over)."""
    env = os.environ if env is None else env
    candidates = [env["CLAUDEGUARD_CLAUDE"]] if env.get("CLAUDEGUARD_CLAUDE") else []
    candidates += [os.path.join(d, "claude") for d in (env.get("PATH") or "").split(os.pathsep) if d]
    seen: set[str] = set()
    for path in candidates:
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real) or not os.access(real, os.X_OK):
            continue
        seen.add(real)
        found = names_in_binary(real)
        if found:
            return found
    return set()
