"""Load the checked-in argv table of one exact Claude Code version (``data/<version>.json``, made
by ``derive``). It sits on the launcher's start path: ``os`` and ``json`` only, one file read.
``bench/cli_tables_load.py`` measures it.
"""

from __future__ import annotations

import os

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
    import json

    table: dict[str, Any] = json.loads(raw)
    return table


def versions() -> list[str]:
    """The versions that have a checked-in table, oldest first."""
    try:
        names = os.listdir(DATA_DIR)
    except FileNotFoundError:
        return []
    found = [n[:-5] for n in names if n.endswith(".json") and _exact(n[:-5])]
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))
