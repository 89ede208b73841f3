"""JSON read as ``json.loads`` reads it (strict), without importing ``json``: on the launcher's
start path ``json`` would bring ``re`` (~5 ms of imports before the CLI starts: bench/RESULTS.md,
"Issue 34's budget"). CPython's C scanner (``_json``) does the reading; elsewhere (no ``_json``)
it is ``json.loads``. Writing JSON still takes ``json`` (its encoder needs no ``re``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any


class _Context:
    # what the C scanner reads from its json.JSONDecoder (strict, no hooks, plain numbers)
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, str] = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        raise ValueError(f"not JSON: {name}")


def parse(text: str | bytes) -> Any:
    """JSON text (or UTF-8 bytes) as ``json.loads`` reads it; ValueError when it is not JSON."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        from _json import make_scanner
    except ImportError:  # not CPython: the pure decoder
        import json

        return json.loads(text)
    try:
        start = len(text) - len(text.lstrip())
        scan = make_scanner(_Context())  # type: ignore[arg-type]  # the stub wants a JSONDecoder; it reads only these
        value, end = scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"not JSON at offset {exc.value}") from None
    if text[end:].strip():
        raise ValueError(f"not JSON: extra data at offset {end}")
    return value
