"""Where a reading call really reaches, with its globs expanded and its links followed (issue 32).

The gate leaves a plain reading inside the working folder to the CLI (``gate.decide.cli_asks``):
a Read there, ``cat``/``grep``/``ls`` of files there. The CLI judges the words it was given, and
a word that looks inside can reach outside: ``cat h/.ssh/*`` with a link ``h`` the repository
ships, ``grep -R key .`` through such a link. So before the gate calls a reading "inside", each
operand is expanded as the shell would (a word with ``*``, ``?`` or ``[`` against the disk; one
that matches nothing stays as written) and resolved with its links followed, and a recursive
read walks what it would walk (bounded) for a link that leads outside. Anything that reaches
outside, or that cannot be walked within the bound, is not "inside": the gate asks about it as
it does about a direct read outside. A quoted word with a wildcard is expanded too: that can only
cost a question.
"""

from __future__ import annotations

import os
import time

MAX_ENTRIES = 5000
MAX_SECONDS = 0.05
_GLOB = "*?["


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def expand(word: str, cwd: str) -> list[str]:
    """The absolute paths ``word`` stands for: its glob matches (hidden files too: a shell with
    dotglob, or ``.e*``, reads them), else the word itself."""
    full = os.path.join(cwd, os.path.expanduser(word))
    if not any(c in word for c in _GLOB):
        return [full]
    import glob

    try:
        found = glob.glob(full, include_hidden=True)
    except TypeError:  # Python 3.10: no include_hidden (a pattern starting with "." still matches)
        found = glob.glob(full)
    return found or [full]


def _walk_stays_inside(top: str, root: str) -> bool:
    """No link below ``top`` leads outside ``root``, within the walk's bound (False beyond it)."""
    deadline = time.monotonic() + MAX_SECONDS
    entries = 0
    todo = [top]
    while todo:
        here = todo.pop()
        try:
            with os.scandir(here) as it:
                listed = list(it)
        except OSError:
            continue
        entries += len(listed)
        if entries > MAX_ENTRIES or time.monotonic() > deadline:
            return False
        for entry in listed:
            try:
                if entry.is_symlink():
                    if not inside(os.path.realpath(entry.path), root):
                        return False
                elif entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
            except OSError:
                continue
    return True


def stays_inside(words: list[str], cwd: str, *, recursive: bool = False) -> bool:
    """Do all of ``words`` (operands of a reading command or tool) reach only inside ``cwd``, globs
    expanded and links followed, and, for a ``recursive`` read, everything below them?"""
    root = os.path.realpath(cwd)
    for word in words:
        for path in expand(word, cwd):
            real = os.path.realpath(path)
            if not inside(real, root):
                return False
            if recursive and os.path.isdir(real) and not _walk_stays_inside(real, root):
                return False
    return True


def recursive_read(words: list[str]) -> bool:
    """Does this plain reading command read directories recursively (``grep -r``/``-R``, ``rg``,
    ``ls -R``)?"""
    if not words:
        return False
    program = os.path.basename(words[0])
    if program == "rg":
        return True
    for word in words[1:]:
        if word in ("--recursive", "--dereference-recursive") or word.startswith("--directories"):
            return True
        if word.startswith("-") and not word.startswith("--"):
            flags = word[1:]
            if program == "grep" and ("r" in flags or "R" in flags or "d" in flags):
                return True
            if program == "ls" and "R" in flags:
                return True
    return False
