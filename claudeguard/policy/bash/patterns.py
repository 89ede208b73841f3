"""Rule patterns: ``Bash(specifier)`` as a regex, and how it is tried on a part.

Allow rules match a part's own text, or its unquoted form when that is unambiguous; deny and ask
rules match any reading of it (``Part.deny_texts``). A command that cannot be parsed is still cut
into crude pieces (``fallback_chunks``) for deny and ask rules, so unreadable text never escapes
them.
"""

from __future__ import annotations

import re

from claudeguard.policy.bash.lexer import ASSIGN_RE, LazyRe, basename, normalize_space
from claudeguard.policy.bash.wrappers import DENY_WRAPPERS, WRAPPERS, Part

_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}
_CHUNK_SPLIT = LazyRe(r"\$\(|<\(|>\(|[;&|\n(){}`]")


def compile_pattern(spec: str) -> re.Pattern[str]:
    """A Bash rule specifier as a regex over a part's text (use ``fullmatch``).

    ``*`` matches anything, spaces included; a trailing `` *`` also matches nothing at all (so
    ``ls *`` matches ``ls`` and ``ls -la`` but not ``lsof``); a trailing ``:*`` is the legacy spelling
    of `` *``; ``\\*`` is a literal star and ``\\\\`` a literal backslash.
    """
    cached = _PATTERN_CACHE.get(spec)
    if cached is not None:
        return cached
    s = normalize_space(spec)
    if s.endswith(":*") and not _escaped_at(s, len(s) - 1):
        s = s[:-2].rstrip() + " *"
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in "*\\":
            out.append(re.escape(s[i + 1]))
            i += 2
            continue
        if c == " " and s.startswith(" *", i) and i + 2 == len(s):
            out.append("(?: .*)?")
            break
        out.append(".*" if c == "*" else re.escape(c))
        i += 1
    pattern = re.compile("".join(out), re.S)
    if len(_PATTERN_CACHE) > 2048:
        _PATTERN_CACHE.clear()
    _PATTERN_CACHE[spec] = pattern
    return pattern


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
    return compile_pattern(spec).fullmatch(normalize_space(text)) is not None


def part_allowed_by(spec: str, part: Part) -> bool:
    """Allow-style match: the part's own text, or its unquoted form when that is unambiguous."""
    rx = compile_pattern(spec)
    if rx.fullmatch(normalize_space(part.text)):
        return True
    return part.plain_ok and rx.fullmatch(normalize_space(part.plain)) is not None


def part_denied_by(spec: str, part: Part) -> bool:
    """Deny/ask-style match: any reading of the part (wrappers, quotes, paths removed)."""
    rx = compile_pattern(spec)
    return any(rx.fullmatch(t) for t in part.deny_texts)


def fallback_chunks(command: str) -> list[str]:
    """Crude pieces of a command that could not be parsed, for deny and ask rules only."""
    out: list[str] = []
    for chunk in _CHUNK_SPLIT.split(command):
        words = re.sub(r"[\"'\\]", "", chunk).split()
        # Drop leading assignments and wrapper words with their option-looking arguments.
        while words and (ASSIGN_RE.match(words[0]) or basename(words[0]) in WRAPPERS
                         or basename(words[0]) in DENY_WRAPPERS or words[0].startswith("-")
                         or re.fullmatch(r"[0-9.]+[smhd]?", words[0])):
            out.append(" ".join(words))
            words = words[1:]
        if words:
            out.append(" ".join(words))
            if "/" in words[0]:
                out.append(" ".join([basename(words[0])] + words[1:]))
    return list(dict.fromkeys(w for w in out if w))
