"""Rule patterns: ``Bash(specifier)`` as a regex, and how it is tried on an invocation.

Allow rules match an invocation's own readings (``Invocation.allow_texts``: its text, its
unquoted form when that is unambiguous, ``git`` with its global options normalised away); deny
and ask rules match any reading of it (``Invocation.deny_texts``). A command that cannot be
parsed is still cut into crude pieces (``fallback_chunks``) for deny and ask rules, so
unreadable text never escapes them.
"""

from __future__ import annotations

import re

from claudeguard.policy.bash.programs import PRIVILEGED, WRAPPERS
from claudeguard.policy.bash.model import basename, normalize_space
from claudeguard.policy.bash.writes import LazyRe

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.policy.bash.model import Invocation

ASSIGN_RE = LazyRe(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")

_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}
# (literal, open end, None) for a specifier with no "*" but perhaps a trailing " *"; else (_, _, regex)
_Matcher = tuple[str, bool, re.Pattern[str] | None]
_MATCHER_CACHE: dict[str, _Matcher] = {}
_CHUNK_SPLIT = LazyRe(r"\$\(|<\(|>\(|[;&|\n(){}`]")
_BRACE_LIST = LazyRe(r"\{([^{}\s]*,[^{}\s]*)\}")


def compile_pattern(spec: str) -> re.Pattern[str]:
    """A Bash rule specifier as a regex over a part's text (use ``fullmatch``).

    ``*`` matches anything, spaces included; a trailing `` *`` also matches nothing at all (so
    ``ls *`` matches ``ls`` and ``ls -la`` but not ``lsof``); a trailing ``:*`` is the legacy spelling
    of `` *``; ``\\*`` is a literal star and ``\\\\`` a literal backslash.
    """
    cached = _PATTERN_CACHE.get(spec)
    if cached is not None:
        return cached
    pieces, open_end = _pieces(spec)
    pattern = re.compile(".*".join(re.escape(p) for p in pieces) + ("(?: .*)?" if open_end else ""), re.S)
    if len(_PATTERN_CACHE) > 2048:
        _PATTERN_CACHE.clear()
    _PATTERN_CACHE[spec] = pattern
    return pattern


def _pieces(spec: str) -> tuple[list[str], bool]:
    """A specifier as the literal texts between its ``*`` wildcards, and whether it ends in `` *``."""
    s = normalize_space(spec)
    if s.endswith(":*") and not _escaped_at(s, len(s) - 1):
        s = s[:-2].rstrip() + " *"
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "*\\":
            pieces[-1].append(s[i + 1])
            i += 2
            continue
        if c == " " and s.startswith(" *", i) and i + 2 == len(s):
            return ["".join(p) for p in pieces], True
        if c == "*":
            pieces.append([])
        else:
            pieces[-1].append(c)
        i += 1
    return ["".join(p) for p in pieces], False


def _matcher(spec: str) -> _Matcher:
    """How to test normalized text against ``spec``: most rules (no ``*`` but a trailing `` *``) need
    no regex, which saves compiling one per rule in every hook process."""
    found = _MATCHER_CACHE.get(spec)
    if found is not None:
        return found
    pieces, open_end = _pieces(spec)
    matcher: _Matcher = (pieces[0], open_end, None) if len(pieces) == 1 else ("", False, compile_pattern(spec))
    if len(_MATCHER_CACHE) > 2048:
        _MATCHER_CACHE.clear()
    _MATCHER_CACHE[spec] = matcher
    return matcher


def _test(matcher: _Matcher, text: str) -> bool:
    """``compile_pattern(spec).fullmatch(text)``, for normalized text."""
    literal, open_end, rx = matcher
    if rx is not None:
        return rx.fullmatch(text) is not None
    return text == literal or (open_end and text.startswith(literal + " "))


def _escaped_at(s: str, index: int) -> bool:
    """Whether the character at ``index`` is preceded by an odd number of backslashes."""
    count = 0
    j = index - 1
    while j >= 0 and s[j] == "\\":
        count += 1
        j -= 1
    return count % 2 == 1


def escape_pattern(text: str) -> str:
    """The specifier that matches exactly ``text`` (for grant rules)."""
    return text.replace("\\", "\\\\").replace("*", "\\*")


def pattern_matches(spec: str, text: str) -> bool:
    return _test(_matcher(spec), normalize_space(text))


def part_allowed_by(spec: str, part: Invocation) -> bool:
    """Allow-style match: one of the invocation's own readings."""
    matcher = _matcher(spec)
    return any(_test(matcher, t) for t in part.allow_texts)


def part_denied_by(spec: str, part: Invocation) -> bool:
    """Deny/ask-style match: any reading of the invocation (wrappers, quotes, paths removed)."""
    matcher = _matcher(spec)
    return any(_test(matcher, t) for t in part.deny_texts)


def fallback_chunks(command: str) -> list[str]:
    """Crude pieces of a command that could not be parsed, for deny and ask rules only (brace
    lists such as ``{rm,-rf,/}`` are read as the words bash makes of them)."""
    out: list[str] = []
    command = _BRACE_LIST.sub(lambda m: " " + m.group(1).replace(",", " ") + " ", command)
    for chunk in _CHUNK_SPLIT.split(command):
        words = re.sub(r"[\"'\\]", "", chunk).split()
        # Drop leading assignments and wrapper words with their option-looking arguments.
        while words and (ASSIGN_RE.match(words[0]) or basename(words[0]) in WRAPPERS
                         or basename(words[0]) in PRIVILEGED or words[0] in ("eval", "exec", "!")
                         or words[0].startswith("-")
                         or re.fullmatch(r"[0-9.]+[smhd]?", words[0])):
            out.append(" ".join(words))
            words = words[1:]
        if words:
            out.append(" ".join(words))
            if "/" in words[0]:
                out.append(" ".join([basename(words[0])] + words[1:]))
    return list(dict.fromkeys(w for w in out if w))
