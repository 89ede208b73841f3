"""Gitignore-style path rules for Read/Edit (and Glob/Grep), matched without touching the disk.

A rule's specifier names a base directory and a pattern below it:
``//abs/path`` (from ``/``), ``~/p`` (from home), ``/p`` (from the rule's root: the directory of
the config file it came from), ``./p`` or ``p`` (from the cwd). In the pattern ``*`` stays within
one path segment, ``**`` crosses segments, ``?`` and ``[...]`` are single characters and ``\\x`` is a
literal ``x``. A pattern without a slash matches at any depth below its base, as in .gitignore. A
pattern that matches a directory covers everything inside it. Paths of tool calls are made
absolute against the cwd and ``..`` is resolved lexically (symlinks are not followed).
"""

from __future__ import annotations

import posixpath
import re

__all__ = ["normalize_path", "path_rule_matches", "glob_static_prefix", "escape_path", "split_spec",
           "compile_pattern"]

_GLOB_CHARS = "*?["


def normalize_path(path: str, *, cwd: str, home: str) -> str:
    """``path`` absolute, with ``~`` expanded and ``.``/``..`` resolved lexically."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    if not path.startswith("/"):
        path = cwd.rstrip("/") + "/" + path
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")  # POSIX keeps a leading "//"; here it means "/"
    return path


def split_spec(spec: str, *, cwd: str, home: str, root: str) -> tuple[str, str, bool]:
    """(base directory, pattern relative to it, anchored?) for a rule specifier."""
    if spec.startswith("//"):
        base, pat, anchored = "/", spec[2:], True
    elif spec == "~" or spec.startswith("~/"):
        base, pat, anchored = home, spec[2:], True
    elif spec.startswith("/"):
        base, pat, anchored = root or cwd, spec[1:], True
    elif spec == "." or spec.startswith("./"):
        base, pat, anchored = cwd, spec[2:], True
    else:
        base, pat = cwd, spec
        anchored = "/" in pat.rstrip("/")
    # Leading "../" and "./" segments move the base (lexically), as a path would.
    while True:
        if pat.startswith("../") or pat == "..":
            base = posixpath.dirname(base.rstrip("/")) or "/"
            pat = pat[3:]
            anchored = True
        elif pat.startswith("./"):
            pat = pat[2:]
        else:
            break
    pat = pat.rstrip("/") or "**"
    base = normalize_path(base, cwd=cwd, home=home)
    return base, pat, anchored


_REGEX_CACHE: dict[tuple[str, bool], re.Pattern[str]] = {}


def compile_pattern(pat: str, anchored: bool) -> re.Pattern[str]:
    """The regular expression of a rule's pattern (``split_spec``), matched against a path relative
    to the rule's base; a directory that matches covers everything below it."""
    key = (pat, anchored)
    rx = _REGEX_CACHE.get(key)
    if rx is not None:
        return rx
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        at_segment_start = i == 0 or pat[i - 1] == "/"
        if at_segment_start and pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if at_segment_start and pat.startswith("**", i) and i + 2 == n:
            if i == 0:
                out.append(".*")
            else:
                out[-1:] = ["(?:/.*)?"]  # replaces the "/" before it: "dir/**" covers "dir" too
            i += 2
            continue
        c = pat[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(pat[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pat[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    body = "".join(out)
    if not anchored:
        body = "(?:.*/)?" + body
    try:
        rx = re.compile(body, re.S)
    except re.error:
        rx = re.compile(re.escape(pat))
    if len(_REGEX_CACHE) > 2048:
        _REGEX_CACHE.clear()
    _REGEX_CACHE[key] = rx
    return rx


def path_rule_matches(spec: str, path: str, *, cwd: str, home: str, root: str) -> bool:
    """Whether the file ``path`` (as given by a tool call) falls under the rule specifier ``spec``."""
    if spec in ("*", "//**", "//"):
        return True
    cwd = normalize_path(cwd, cwd="/", home=home)
    target = normalize_path(path, cwd=cwd, home=home)
    base, pat, anchored = split_spec(spec, cwd=cwd, home=home, root=root)
    if target == base:
        rel = ""
    elif base == "/":
        rel = target[1:]
    elif target.startswith(base + "/"):
        rel = target[len(base) + 1:]
    else:
        return False
    rx = compile_pattern(pat, anchored)
    if rx.fullmatch(rel):
        return True
    # A pattern that matches a directory covers everything below it.
    pos = rel.find("/")
    while pos >= 0:
        if rx.fullmatch(rel[:pos]):
            return True
        pos = rel.find("/", pos + 1)
    return False


def glob_static_prefix(pattern: str) -> str:
    """The directory part of a glob pattern before its first wildcard (``src/**/*.py`` -> ``src``)."""
    segments = pattern.split("/")
    fixed: list[str] = []
    for seg in segments[:-1]:
        if any(c in seg for c in _GLOB_CHARS + "{"):
            break
        fixed.append(seg)
    prefix = "/".join(fixed)
    if pattern.startswith("/") and not prefix:
        return "/"
    return prefix


def escape_path(path: str) -> str:
    """``path`` with pattern characters escaped, for an exact-file rule."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", path)
