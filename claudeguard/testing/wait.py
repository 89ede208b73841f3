"""One way for a test to wait: poll a condition with a bound, never sleep and hope."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")


def wait_until(predicate: Callable[[], T | None], timeout: float, what: str = "condition", interval: float = 0.05) -> T:
    """The predicate's first true value, polled every ``interval`` s; AssertionError naming
    ``what`` after ``timeout`` s (the kit's failed expectations are assertions, as in ``tui``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
