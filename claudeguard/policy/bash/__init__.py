"""What a Bash command line runs, and how permission rules match it.

This is a security boundary: ``Bash(git status *)`` must never allow ``git status; rm -rf ~``,
and ``Bash(touch *)`` denied must hold however ``touch`` is spelled. The command is parsed by
tree-sitter-bash (a maintained grammar, not a hand-written lexer) and walked the way bash runs it;
every invocation it finds (nested ones, and the ones inside ``sh -c``, here-documents a shell
reads, wrappers, ``find -exec``) is matched on its own. What the guard cannot read is reported,
never guessed: the decision asks about it (``policy.decide``).

The modules, each importing only the ones above it (by their own names: never through this
package, which imports them):

- ``grammar``   the parser: tree-sitter-bash, loaded on first use.
- ``options``   option grammars: where a program's operands start.
- ``programs``  what the guard knows of programs: wrappers, shells, interpreters, file operands.
- ``writes``    does a command write (read-only agent types are denied those).
- ``model``     what the walk finds (``Split``, ``Invocation``, ``Target``) and its own state.
- ``words``     a word's value after quote removal; the substitutions in it.
- ``record``    one invocation recorded with the readings rules match.
- ``redirects`` redirections, here-documents, and the files a program reads and writes.
- ``shells``    shells re-entered (``sh -c``, a shell reading stdin, ``eval``, ``source``) and
                interpreters (``python3 -c``).
- ``wrappers``  programs that run a command: ``timeout``, ``env``, ``sudo``, ``xargs``, runners.
- ``special``   programs read by rules of their own: ``find``, ``git``, ``make``, ``awk``, ``sed``.
- ``command``   a simple command's words, assignments and redirections.
- ``walk``      the walk: ``split_command`` -> ``Split`` of ``Invocation``s, files and unknowns.
- ``patterns``  ``Bash(specifier)`` patterns and how allow and deny rules try them.
- ``resolve``   a program run by a path, or copied, that is a binary a deny or ask rule names.
- ``judge``     the decision for one Bash call.
"""

from __future__ import annotations

from claudeguard.policy.bash.model import MAX_BYTES, MAX_DEPTH, Invocation, Split, Target, normalize_space
from claudeguard.policy.bash.patterns import (
    compile_pattern, escape_pattern, fallback_chunks, part_allowed_by, part_denied_by, pattern_matches,
)
from claudeguard.policy.bash.walk import command_writes, split_command

__all__ = [
    "Invocation",
    "Split",
    "Target",
    "split_command",
    "command_writes",
    "compile_pattern",
    "pattern_matches",
    "part_allowed_by",
    "part_denied_by",
    "escape_pattern",
    "normalize_space",
    "fallback_chunks",
    "MAX_BYTES",
    "MAX_DEPTH",
]
