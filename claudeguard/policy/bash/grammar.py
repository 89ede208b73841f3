"""The bash grammar: tree-sitter-bash through py-tree-sitter, loaded once per process.

Both wheels are prebuilt (MIT). Their Python packages cost the hook ~20 ms at import
(``tree_sitter`` imports ``typing``; ``tree_sitter_bash`` imports ``importlib.resources`` for a
query file we never read), while their compiled modules alone cost ~1.5 ms (bench/RESULTS.md,
"Bash parsing"). So the two ``_binding`` extension modules are loaded directly from the packages'
directories on ``sys.path``; if that ever fails (a wheel laid out differently), the packages are
imported the ordinary way: slower, same parser. The parser is made on the first parse, never at
import: the launcher's paths do not import this package (bench/importtime.py holds that).
"""

from __future__ import annotations

import _imp
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from types import ModuleType

    from tree_sitter import Parser, Tree

_PARSER: list[Parser] = []
# Every byte of a non-ASCII character becomes an ``a`` before parsing (the same length, so the
# tree's byte offsets still index the real text). Bash's syntax is all ASCII: to it such bytes
# are word characters, as ``a`` is. And tree-sitter-bash's scanner passes characters to ctype's
# ``isalpha``/``isdigit``, whose tables end at 255: a code point past that is read out of bounds
# and, depending on what lies there, crashes the process (found by tests/test_policy_bash.py's
# arbitrary-text property; every ASCII input is in bounds).
_ASCII_ONLY = bytes.maketrans(bytes(range(128, 256)), b"a" * 128)


class _Spec:
    """What ``_imp.create_dynamic`` reads of a module spec (importlib.util would cost ~5 ms)."""

    __slots__ = ("name", "origin")

    def __init__(self, name: str, origin: str) -> None:
        self.name = name
        self.origin = origin


def _binding(package: str) -> ModuleType:
    """``package._binding``, the compiled module, without running ``package/__init__.py``."""
    suffixes = tuple(_imp.extension_suffixes())
    for entry in sys.path:
        directory = os.path.join(entry or ".", package)
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if name.startswith("_binding.") and name.endswith(suffixes):
                spec = _Spec(f"{package}._binding", os.path.join(directory, name))
                module: ModuleType = _imp.create_dynamic(spec)  # type: ignore[arg-type]  # reads .name, .origin only
                _imp.exec_dynamic(module)
                # Registered like an import would: the module must outlive every parser and tree
                # made from it (its types live in it), and a later ``import tree_sitter`` reuses it.
                sys.modules[spec.name] = module
                return module
    raise ImportError(f"no compiled {package}._binding on sys.path")


def _new_parser() -> Parser:
    try:
        core = _binding("tree_sitter")
        bash = _binding("tree_sitter_bash")
        parser: Parser = core.Parser(core.Language(bash.language()))
        return parser
    except (ImportError, OSError, AttributeError, TypeError, ValueError):
        # deferred: the ordinary import costs ~20 ms more on the hook's own-process path
        import tree_sitter
        import tree_sitter_bash

        return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def parser() -> Parser:
    """The process's one parser (made on first use; a Parser is cheap to reuse, not to make)."""
    if not _PARSER:
        _PARSER.append(_new_parser())
    return _PARSER[0]


def parse(source: bytes) -> Tree:
    """The syntax tree of ``source`` (UTF-8; its non-ASCII bytes read as ``a``, see above);
    errors are ERROR and MISSING nodes in it. Not thread-safe: callers hold one lock."""
    return parser().parse(source.translate(_ASCII_ONLY))
