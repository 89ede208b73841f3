"""What a Claude Code memory file brings into the conversation by itself: its ``@``-imports.

The CLI reads its memory files (CLAUDE.md, .claude/CLAUDE.md, CLAUDE.local.md, .claude/rules/*.md)
at its start, for the cwd and each directory above it and for the user, and those of a directory
below the cwd once a file tool reaches into it; with them what they import (``@path``, five hops
deep). No tool call and no hook sees those reads. 2.1.330 and later hold them to their ``Read``
deny rules (the guard hands the CLI its own and the user's) and take a link to a file outside the
project as outside it. 2.1.197 does neither: a repository's CLAUDE.md with ``@.env``, or with
``@docs/notes.md`` where notes.md is a link to the guard's runtime dir, brings that file into the
model's context whatever the rules say (tests/test_memory_import_real.py). For such a CLI the
guard finds those imports itself: the plan refuses a session whose start would read one
(``plan/memory_check.py``), and the hook denies a file tool's call that would make the CLI read
one below the cwd (``gate.decide.policy_decision``).

The syntax is 2.1.197's (``IMPORT``: ``@`` after a line's start or a space, up to the next space,
``\\ `` a space within it, ``#...`` cut off; ``./``, ``~/``, ``/abs`` or a name). This reads more
than the CLI does (code blocks and spans too, and every import followed, an external one also
when the user never let the CLI follow those): a false find refuses or denies, it never allows.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from claudeguard.policy.decide import Policy

# A directory's memory files as 2.1.197 reads them (AGENTS.md only from later CLIs, which hold
# their rules themselves) and its rules dir.
NAMES = ("CLAUDE.md", os.path.join(".claude", "CLAUDE.md"), "CLAUDE.local.md")
RULES_DIR = os.path.join(".claude", "rules")
IMPORT = r"(?:^|\s)@((?:[^\s\\]|\\ )+)"  # 2.1.197's own pattern
MAX_HOPS = 5  # the CLI's own: a memory file and four levels of imports below it
MAX_BYTES = 1 << 20  # more than the CLI reads of one file (40,000 characters)
MAX_FILES = 512  # files read for one answer: past it the guard cannot say, so it says no


KEPT = "the policy keeps from reading"


class Found:
    """An import (or a memory file) the policy denies reading: where, what, and why."""

    __slots__ = ("file", "line", "target", "why")

    def __init__(self, file: str, line: int, target: str, why: str) -> None:
        self.file = file
        self.line = line  # 0: the memory file itself; -1: too many files to read
        self.target = target
        self.why = why

    def line_text(self) -> str:
        """``file:line: imports target, which ...`` (or the memory file itself)."""
        if self.line == -1:
            return f"{self.file}: {self.why}: the guard cannot tell what they bring in"
        if self.line == 0:
            return f"{self.file}: a memory file the CLI reads by itself, which {KEPT} ({self.why})"
        return f"{self.file}:{self.line}: imports {self.target}, which {KEPT} ({self.why})"


def memory_files(directory: str, names: tuple[str, ...] = NAMES, rules_dir: str = RULES_DIR) -> list[str]:
    """The memory files of ``directory`` that exist (links followed, as the CLI follows them)."""
    out = [path for path in (os.path.join(directory, name) for name in names) if os.path.isfile(path)]
    rules = os.path.join(directory, rules_dir)
    if os.path.isdir(rules):
        seen: set[str] = set()
        # Every one (a file left out would be an import left unread): first_denied's MAX_FILES
        # bounds what is read, and says no past it.
        for root, dirs, found in os.walk(rules, followlinks=True):
            real = os.path.realpath(root)
            if real in seen:
                dirs[:] = []  # a link back up: no deeper
                continue
            seen.add(real)
            out += [os.path.join(root, n) for n in sorted(found) if n.endswith(".md")]
    return out


def user_memory_files(home: str) -> list[str]:
    """The user's own: ``~/.claude/CLAUDE.md`` and ``~/.claude/rules``."""
    return memory_files(os.path.join(home, ".claude"), ("CLAUDE.md",), "rules")


def imports_of(path: str, home: str, bases: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """(line, absolute path) of each import in the memory file at ``path``, a relative one taken
    from each of ``bases`` (default: the file's own directory); none if unreadable."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    if "@" not in text:
        return []
    import re  # only for a memory file with an @ in it

    out = []
    bases = bases or (os.path.dirname(path),)
    for number, line in enumerate(text.splitlines(), 1):
        for match in re.finditer(IMPORT, line):
            word = match.group(1).split("#", 1)[0].replace("\\ ", " ")
            if not word or word == "/" or word.startswith("@") or not (
                    word.startswith(("./", "~/", "/")) or re.match(r"[a-zA-Z0-9._-]", word)):
                continue
            if word.startswith("~/"):
                out.append((number, os.path.normpath(os.path.join(home, word[2:]))))
            else:
                out += [(number, os.path.normpath(os.path.join(base, word))) for base in bases]
    return out


def first_denied(files: Iterable[str], denied: Callable[[str], str | None], home: str,
                 itself: Callable[[str], str | None] | None = None, bases: tuple[str, ...] = ()) -> Found | None:
    """The first file one of the memory files ``files`` imports (five hops deep) that ``denied``
    names a reason for, or memory file that ``itself`` does; None when every one may be read.
    ``bases``: where the relative imports of ``files`` themselves are taken from (a skill's: the
    cwd), else each file's directory."""
    seen: set[str] = set()
    todo: list[tuple[str, int]] = [(f, 0) for f in files]
    while todo:
        path, hops = todo.pop(0)
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        if len(seen) > MAX_FILES:
            return Found(path, -1, path, f"more than {MAX_FILES} memory files and imports to read")
        if hops == 0 and itself is not None:
            why = itself(path)
            if why is not None:
                return Found(path, 0, path, why)
        for number, target in imports_of(path, home, bases if hops == 0 else ()):
            why = denied(target)
            if why is not None:
                return Found(path, number, target, why)
            if hops + 1 < MAX_HOPS and os.path.isfile(target):
                todo.append((target, hops + 1))
    return None


def kept_import(policy: Policy, files: list[str], agent_types: Iterable[str | None], cwd: str, home: str, *,
                held: bool, user_files: Iterable[str] = ()) -> Found | None:
    """The first of ``files``' imports the policy keeps from ``agent_types``' reading (or, for a
    CLI that does not hold its own rules, ``held`` False, a memory file it denies). A CLI that
    holds its Read deny rules is given no ask rules (the hook asks): an import of a path an ask
    rule names is read without asking, so that is looked for on every CLI. ``user_files``: the
    user's own memory files (the caller leaves out those the user trusted): what they import is
    the user's choice, so only a deny counts there, and only where the CLI does not hold it."""
    agents = list(agent_types)
    mine = set(user_files)
    theirs = [f for f in files if f not in mine]
    if held:
        if not theirs or not policy.asks_reading():
            return None
        return first_denied(theirs, read_denied(policy, agents, cwd, home, ("ask",)), home)
    itself = read_denied(policy, agents, cwd, home, ("deny",))
    return (first_denied(theirs, read_denied(policy, agents, cwd, home), home, itself=itself)
            or first_denied([f for f in files if f in mine], itself, home, itself=itself))


def read_denied(policy: Policy, agent_types: Iterable[str | None], cwd: str, home: str,
                kinds: tuple[str, ...] = ("deny", "ask")) -> Callable[[str], str | None]:
    """Whether the policy lets ``agent_types`` read a path (its link followed too, as the CLI
    reads it): the reason of a decision of ``kinds`` (an import asks nobody: an ask is a no),
    else None."""
    from claudeguard.policy.decide import decide

    agents = list(agent_types)

    def check(path: str) -> str | None:
        for one in dict.fromkeys((path, os.path.realpath(path))):
            for agent in agents:
                verdict = decide(policy, "Read", {"file_path": one}, agent_type=agent, cwd=cwd, home=home)
                if verdict.decision in kinds:
                    return verdict.reason.removeprefix("claudeguard: ").rstrip(".") or verdict.decision
        return None

    return check


def skill_files(name: str, cwd: str, home: str) -> list[str]:
    """The files a Skill tool call for ``name`` may load (a skill's ``SKILL.md``, a custom
    command's ``.md``; ``a:b`` is ``a/b.md`` of a commands dir): the cwd's and each directory's
    above it, and the user's. Their ``@`` includes are read as the skill is invoked."""
    if not name or "\0" in name:
        return []
    parts = [p for p in name.lstrip("/").split(":") if p and p not in (".", "..") and "/" not in p]
    if not parts:
        return []
    out = []
    bases = [os.path.join(d, ".claude") for d in ancestors(cwd)] + [os.path.join(home, ".claude")]
    for base in dict.fromkeys(bases):
        for path in (os.path.join(base, "skills", parts[-1], "SKILL.md"),
                     os.path.join(base, "commands", *parts[:-1], parts[-1] + ".md")):
            if os.path.isfile(path):
                out.append(path)
    return out


def ancestors(cwd: str) -> list[str]:
    """``cwd`` and each directory above it, up to ``/``: whose memory files (and skills) the CLI
    reads."""
    out = [os.path.normpath(cwd)]
    while (up := os.path.dirname(out[-1])) != out[-1]:
        out.append(up)
    return out


def between(cwd: str, path: str) -> list[str]:
    """The directories below ``cwd`` down to ``path``'s (``path`` itself when it is one), whose
    memory files the CLI reads once a file tool reaches ``path``; none outside ``cwd``."""
    cwd = os.path.normpath(cwd)
    path = os.path.normpath(path)
    if not path.startswith(cwd.rstrip("/") + "/"):
        return []
    top = path if os.path.isdir(path) else os.path.dirname(path)
    out = []
    while top != cwd and top.startswith(cwd.rstrip("/") + "/"):
        out.append(top)
        top = os.path.dirname(top)
    return out[::-1]
