"""Load the checked-in argv table of one exact Claude Code version (``data/<version>.json``, made
by ``derive``). It sits on the launcher's start path: ``os`` and the JSON scanner only, one file
read. ``import json`` would cost ~8 ms there (``json.decoder`` compiles regular expressions, so it
pulls in ``re``, which the launcher keeps out); CPython's C scanner behind it (``_json``) reads
the same JSON in ~0.6 ms for the largest table, with ~0.3 ms to import and read the file
(``bench/cli_tables_load.py``, bench/RESULTS.md): ``claudeguard.json_read``.
"""

from __future__ import annotations

import os

from claudeguard.json_read import parse

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _exact(version: str) -> bool:
    # digits.digits.digits: anything else (a path, "latest", "2.1") names no file of ours
    parts = version.split(".")
    return len(parts) == 3 and all(p.isdigit() and p.isascii() for p in parts)


def table_path(version: str) -> str | None:
    """The file of ``version``'s table, or None when the version is not an exact one."""
    return os.path.join(DATA_DIR, version + ".json") if _exact(version) else None


def load(version: str) -> dict[str, Any] | None:
    """The table of exactly ``version`` (e.g. "2.1.330"), or None when none is checked in."""
    path = table_path(version)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None
    table = parse(raw.decode("utf-8"))  # claudeguard.json_read: no ``re``
    if not isinstance(table, dict):
        raise ValueError(f"{path}: not a JSON object")
    return table


def versions() -> list[str]:
    """The versions that have a checked-in table, oldest first."""
    try:
        names = os.listdir(DATA_DIR)
    except FileNotFoundError:
        return []
    found = [n[:-5] for n in names if n.endswith(".json") and _exact(n[:-5])]
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def tool_names() -> set[str]:
    """Every tool name some checked-in table knows: the CLI's own list of its tools, and the
    legacy names its rules map onto them (``Task``, ``KillShell``) with their targets. Each
    table is parsed once per call: only a config rule naming a tool outside the guard's own
    short list asks (``policy.rules.tool_problem``)."""
    found: set[str] = set()
    for version in versions():
        table = load(version) or {}
        tools = table.get("tools")
        if not isinstance(tools, dict):
            continue
        found.update(n for n in tools.get("names") or [] if isinstance(n, str))
        aliases = tools.get("aliases")
        if isinstance(aliases, dict):
            found.update(str(k) for k in aliases)
            found.update(str(v) for v in aliases.values())
    return found
