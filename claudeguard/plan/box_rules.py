"""What the user's own deny rules make of the box (issue 32): the paths every program the agent
runs is kept from, resolved on disk when a session's box is built.

The guard's reading of a command (``policy/bash/``) decides what to ask about; it reads words,
and a glob, a recursive read or a copy says other words than the path a rule names. So the rules
are the box's too, enforced by the kernel for whatever runs in it:

- a ``Read(...)`` deny rule of every agent (``[permissions] deny``, and the user's and project's
  layers merged into it): its paths are hidden, a file behind an empty mode-0 file, a directory
  behind an empty mode-0 tmpfs, whatever reads them (``cat .e*``, ``grep -r``, ``cp`` then
  ``cat``, ``git diff --no-index``, a program of the agent's own);
- an ``Edit(...)``/``Write(...)`` deny rule: its paths are read-only in the box.

A rule's path is resolved as the rule is matched (``policy.pathrules``: ``//abs``, ``~/p``,
``/p`` from the rule's file, ``./p`` and ``p`` from the cwd). An exact path is taken as it is,
when it exists. A pattern with wildcards, or one without a slash (it matches at any depth), is
matched on a walk of its base directory, links not followed, a matching directory taken whole;
the walk is bounded (``MAX_ENTRIES`` entries and ``MAX_SECONDS`` for all rules of a session:
measured in bench/RESULTS.md, "The box and the user's rules"). What cannot be resolved within
the bound (a rule over ``//**``, a tree too big), and a bare ``Read`` rule (every file), is said
in one line: the guard's reading of commands still judges those calls, the box does not hide
them. A file a rule names that is made after the session started is not hidden (a new box is
built per session).

In the paths layer with ``plan/sandbox.py``, which calls it; imports only the policy's path rules.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.config.load import Config

MAX_ENTRIES = 20000
MAX_SECONDS = 0.25
READ_RULE_TOOLS = ("Read",)
WRITE_RULE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
_GLOB = "*?["


class BoxRules:
    """The paths the box keeps from its programs because of the user's rules."""

    __slots__ = ("hidden_dirs", "hidden_files", "read_only", "notes", "entries", "seconds")

    def __init__(self) -> None:
        self.hidden_dirs: list[str] = []
        self.hidden_files: list[str] = []
        self.read_only: list[str] = []
        self.notes: list[str] = []  # one line each: a rule the box cannot hold
        self.entries = 0  # directory entries walked
        self.seconds = 0.0


class _Walk:
    """The shared bound of one session's walks."""

    __slots__ = ("entries", "deadline")

    def __init__(self) -> None:
        self.entries = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def spent(self) -> bool:
        return self.entries > MAX_ENTRIES or time.monotonic() > self.deadline


def _has_glob(text: str) -> bool:
    return any(c in text for c in _GLOB)


def _matches(base: str, pat: str, anchored: bool, walk: _Walk) -> list[str] | None:
    """The paths below ``base`` that the pattern names (a directory whole, not walked further);
    None when the walk ran out of its bound."""
    from claudeguard.policy.pathrules import compile_pattern  # the rules' own matcher: one meaning

    if not _has_glob(pat) and anchored:
        path = os.path.join(base, pat) if pat != "**" else base
        return [path] if os.path.lexists(path) else []
    if anchored and pat.endswith("/**") and not _has_glob(pat[:-3]):
        path = os.path.join(base, pat[:-3])
        return [path] if os.path.lexists(path) else []
    rx = compile_pattern(pat, anchored)
    found: list[str] = []
    todo = [base]
    while todo:
        here = todo.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except OSError:
            continue
        walk.entries += len(entries)
        if walk.spent():
            return None
        for entry in entries:
            rel = os.path.relpath(entry.path, base)
            if rx.fullmatch(rel):
                found.append(entry.path)
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
            except OSError:
                continue
    return found


def resolve(cfg: Config, cwd: str, home: str) -> BoxRules:
    """The box's share of ``cfg``'s deny rules for a session in ``cwd``."""
    from claudeguard.policy.pathrules import split_spec
    from claudeguard.policy.rules import parse_rule

    out = BoxRules()
    walk = _Walk()
    started = time.monotonic()
    for entry in cfg.rules.get("permissions.deny", []):
        try:
            rule = parse_rule(entry.rule)
        except ValueError:
            continue  # the config's own check says so
        if rule.tool in READ_RULE_TOOLS:
            hide = True
        elif rule.tool in WRITE_RULE_TOOLS:
            hide = False
        else:
            continue
        if rule.specifier is None:
            if hide:
                out.notes.append(f"claudeguard: the deny rule {entry.rule} ({entry.source}) names every file: the "
                                 f"sandbox cannot hide them all; the guard judges each call")
            continue
        base, pat, anchored = split_spec(rule.specifier, cwd=cwd, home=home, root=entry.root)
        paths = _matches(base, pat, anchored, walk)
        if paths is None:
            out.notes.append(f"claudeguard: the deny rule {entry.rule} ({entry.source}) could not be resolved on "
                             f"disk within {MAX_ENTRIES} entries and {MAX_SECONDS:g} s: the sandbox does not "
                             f"{'hide' if hide else 'protect'} its files; the guard judges each call")
            continue
        for path in paths:
            # A link is bound over at its target (bwrap follows it): reading through the link
            # reads the target.
            real = os.path.realpath(path) if os.path.islink(path) else path
            if not os.path.exists(real):
                continue
            if not hide:
                out.read_only.append(real)
            elif os.path.isdir(real):
                out.hidden_dirs.append(real)
            else:
                out.hidden_files.append(real)
    out.entries = walk.entries
    out.seconds = time.monotonic() - started
    for name in ("hidden_dirs", "hidden_files", "read_only"):
        setattr(out, name, list(dict.fromkeys(getattr(out, name))))
    return out
