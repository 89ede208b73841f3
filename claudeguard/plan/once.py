"""One reading a plan: what the making of one session's plan asks for several times (the CLI's
settings sources, the CLI's version) is read once while the plan is made, and forgotten when it
is done.

A plan asked the settings sources six times (the settings check, the permission mode twice, the
CLI's own sandbox twice, the transcript) and the CLI's version four: each read the
files again (~1 ms a plan, on the path to the CLI's start), and a file changed in between could
have given the parts of one plan different answers. Inside ``with one_plan():`` every part sees
the first reading. Outside one (the settings watch, which must see each change; ``doctor``; any
later plan), every call reads afresh, as before. Only the thread that opened the scope uses it.
A key names what a reading depends on: the run's argv as read (``ClaudeArgs.identity``, which
changes when ``reread`` reads it again for another CLI), the cwd, the files' own names.
"""

from __future__ import annotations

import _thread

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

# (the thread that opened the scope, its readings: key -> (the object the key's id names, value))
_SCOPE: list[tuple[int, dict[tuple[object, ...], tuple[tuple[object, ...], object]]]] = []


def one_plan() -> _Scope:
    """The scope of one plan's readings: ``with one_plan():`` (nested: the outer one's are kept)."""
    return _Scope()


class _Scope:

    __slots__ = ("_opened",)

    def __enter__(self) -> None:
        self._opened = not _SCOPE
        if self._opened:
            _SCOPE.append((_thread.get_ident(), {}))

    def __exit__(self, *exc: object) -> None:
        if self._opened:
            _SCOPE.clear()


def remembered(key: tuple[object, ...], keep: tuple[object, ...], compute: Callable[[], T]) -> T:
    """``compute()``, once a plan for ``key``. ``keep``: the objects whose ``id`` is part of the
    key (a ClaudeArgs, a Config), held with the value so that no other object can come to have
    those ids while the scope lasts."""
    if not _SCOPE or _SCOPE[0][0] != _thread.get_ident():
        return compute()
    readings = _SCOPE[0][1]
    hit = readings.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], keep, strict=True)):
        return hit[1]  # type: ignore[return-value]  # stored by this function for this key: a T
    value = compute()
    readings[key] = (keep, value)
    return value
