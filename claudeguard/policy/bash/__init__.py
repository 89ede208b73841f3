"""Split a Bash command line into the simple commands a shell would run, and match rules on them.

This is a security boundary: ``Bash(git status:*)`` must never allow ``git status; rm -rf ~``.
So the splitter reads the command the way bash does (quotes, escapes, line continuations,
comments, ``&&``/``||``/``;``/``|``/``&``/newlines, subshells, braces, ``$(...)``, backticks,
``<(...)``/``>(...)``, heredocs, ``$'...'``) and returns every simple command it finds, including
the ones nested in substitutions. Anything it cannot read with confidence (``eval``, ``case``,
function definitions, a dynamic command word, ``sh -c "$x"``, unbalanced quotes, arithmetic on
variables, ...) marks the whole split as not ``ok``: allow rules never match such a command, while
deny and ask rules are still tried on every form that was extracted (fail closed).

The modules, each importing only the ones above it:

- ``lexer``     tokens; the one quote/``$``/backtick scanning routine (``Lexer.scan``).
- ``writes``    does a redirection or a command (wrappers removed) write.
- ``parser``    the grammar: every simple command, nested ones included.
- ``wrappers``  the look-through (``env``, ``timeout``, ``sudo``, ``sh -c``, ``find -exec``, risky
                assignments) that turns simple commands into ``Part``s: ``split_command``.
- ``patterns``  ``Bash(specifier)`` patterns and how allow and deny rules try them on a part.
"""

from __future__ import annotations

from claudeguard.policy.bash.patterns import (
    compile_pattern, escape_pattern, fallback_chunks, part_allowed_by, part_denied_by, pattern_matches,
)
from claudeguard.policy.bash.lexer import normalize_space
from claudeguard.policy.bash.wrappers import Part, Split, command_writes, split_command

__all__ = [
    "Part",
    "Split",
    "split_command",
    "command_writes",
    "compile_pattern",
    "pattern_matches",
    "part_allowed_by",
    "part_denied_by",
    "escape_pattern",
    "normalize_space",
    "fallback_chunks",
]
