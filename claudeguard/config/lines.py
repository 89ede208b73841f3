"""Find the line of a key or of a list element in TOML text, for ``path:line`` messages.

tomllib gives values but no positions, and tomlkit is too slow for the start-up path, so this
scans the text once: it follows table headers and (dotted) keys, and records the line of every
key and of every string element of an array. Good enough for messages; never used for values.
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Union

    # A key's place in the file: its table and key names, and for an element of a string array
    # also its index and text.
    KeyPath = tuple[Union[str, int], ...]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*=""")
_STRING = re.compile(r'''"((?:[^"\\]|\\.)*)"|'([^']*)\'''')
_PART = re.compile(r'''"([^"]*)"|'([^']*)'|([A-Za-z0-9_\-]+)''')


def _split_key(text: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g is not None) for m in _PART.finditer(text))


def _unescape(raw: str) -> str:
    try:
        text: str = json.loads(f'"{raw}"')
        return text
    except ValueError:
        return raw


def locate(text: str) -> dict[KeyPath, int]:
    """Map key paths to 1-based lines. Array string elements get ``path + (index, value)``."""
    found: dict[KeyPath, int] = {}
    table: tuple[str, ...] = ()
    array_path: tuple[str, ...] | None = None
    array_index = 0
    depth = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        rest = line
        if array_path is None:
            header = _HEADER.match(line)
            if header:
                table = _split_key(header.group(1))
                found.setdefault(table, lineno)
                continue
            key = _KEY.match(line)
            if not key:
                continue
            path = table + _split_key(key.group(1))
            found.setdefault(path, lineno)
            rest = line[key.end():].lstrip()
            if not rest.startswith("["):
                continue
            array_path, array_index, depth = path, 0, 0
        # Inside an array value: record each string element and track brackets to find its end.
        pos = 0
        while pos < len(rest):
            ch = rest[pos]
            if ch == "#":
                break
            if ch in "\"'":
                m = _STRING.match(rest, pos)
                if not m:
                    break
                value = _unescape(m.group(1)) if m.group(1) is not None else m.group(2)
                found.setdefault(array_path + (array_index, value), lineno)
                array_index += 1
                pos = m.end()
                continue
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    array_path = None
                    break
            pos += 1
    return found


def line_of(found: dict[KeyPath, int], path: KeyPath, value: str | None = None,
            index: int | None = None) -> int | None:
    """Line of ``path`` (a key) or, given ``value``/``index``, of that array element."""
    if value is not None and index is not None:
        hit = found.get(path + (index, value))
        if hit:
            return hit
    if value is not None:
        for key, line in found.items():
            if len(key) == len(path) + 2 and key[: len(path)] == path and key[-1] == value:
                return line
    while path:
        if path in found:
            return found[path]
        # a table only named through dotted keys (`security.x = 1`): the first such key
        below = [line for key, line in found.items() if key[: len(path)] == path]
        if below:
            return min(below)
        path = path[:-1]
    return None
