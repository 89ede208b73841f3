"""From a command line to the parts rules are matched on: ``split_command`` and ``command_writes``.

Parses the line (``parser``), then turns each simple command into a ``Part``: leading
assignments and wrappers stripped (``wrappers``), ``sh -c 'script'`` and ``find -exec CMD ;``
split into parts of their own, every reading deny and ask rules must see (quotes removed, paths
reduced to names, privilege wrappers removed, braces expanded), and whether it writes
(``writes``). After a fatal parse error the commands read so far still count, for deny rules.
"""

from __future__ import annotations

import re

from claudeguard.policy.bash.lexer import ASSIGN_RE, MAX_DEPTH, Fatal, LazyRe, Redir, Word, normalize_space
from claudeguard.policy.bash.parser import Cmd, Parser
from claudeguard.policy.bash.wrappers import (
    DENY_WRAPPERS, OTHER_SHELLS, SHELLS, WRAPPERS, assignment_risk, basename, shell_script, skip_options, std_name,
)
from claudeguard.policy.bash.writes import argv_writes, redirect_writes


class Part:
    """One simple command as rules see it.

    Plain slotted classes rather than dataclasses here: the hook imports this module for every
    Bash call, and building a dataclass costs about half a millisecond.
    """

    __slots__ = ("text", "plain", "argv", "writes", "deny_texts", "plain_ok")

    def __init__(self, text: str, plain: str, argv: list[str], writes: bool,
                 deny_texts: tuple[str, ...], plain_ok: bool = True) -> None:
        self.text = text  # source text, wrappers and leading VAR=x stripped, tokens joined by one space
        self.plain = plain  # the same with quotes removed (word values joined by one space)
        self.argv = argv  # word values after stripping (quotes removed, expansions kept as written)
        self.writes = writes  # writes a file: output redirection or a command known to write
        self.deny_texts = deny_texts  # every reading deny and ask rules are tried on
        self.plain_ok = plain_ok  # ``plain`` is unambiguous (no word holds blanks, quotes or operators)

    def __repr__(self) -> str:
        return f"Part(text={self.text!r}, writes={self.writes})"


class Split:
    """The simple commands of one command line; ``ok`` False means "cannot tell"."""

    __slots__ = ("parts", "ok", "reason")

    def __init__(self, parts: list[Part], ok: bool, reason: str | None = None) -> None:
        self.parts = parts
        self.ok = ok
        self.reason = reason

    def __repr__(self) -> str:
        return f"Split(parts={self.parts!r}, ok={self.ok}, reason={self.reason!r})"


def split_command(command: str) -> Split:
    """The simple commands of ``command`` (nested ones included), each with its matching forms."""
    if not isinstance(command, str):
        return Split([], False, "the command is not a string")
    if "\0" in command:
        return Split([], False, "the command holds a NUL byte")
    return _split(command, 0)


def command_writes(command: str) -> bool:
    """True when any part of ``command`` writes a file, or when the command cannot be read."""
    split = split_command(command)
    return not split.ok or any(p.writes for p in split.parts)


class _Built:
    __slots__ = ("parts", "unsure")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.unsure: str | None = None

    def note(self, reason: str) -> None:
        if self.unsure is None:
            self.unsure = reason


def _split(command: str, depth: int) -> Split:
    """Parse, then build parts; after a fatal error the commands read so far still count (for denies)."""
    if depth > MAX_DEPTH:
        return Split([], False, "nested too deeply")
    parser = None
    fatal = None
    try:
        parser = Parser(command, depth)
        parser.parse_list(None)
    except Fatal as exc:
        fatal = str(exc)
    except RecursionError:
        fatal = "nested too deeply"
    built = _Built()
    cmds = parser.cmds if parser is not None else []
    for cmd in cmds:
        try:
            _build(cmd, depth, built)
        except RecursionError:
            built.note("nested too deeply")
    reason = fatal or (parser.unsure if parser is not None else None) or built.unsure
    return Split(built.parts, reason is None, reason)


def _text(words: list[Word], redirs: list[Redir]) -> str:
    return " ".join([w.src for w in words] + [r.src for r in redirs])


def _plain(words: list[str], redirs: list[Redir]) -> str:
    return " ".join(list(words) + [r.plain for r in redirs])


_UNSAFE_PLAIN = LazyRe(r"[\s;&|<>()$`\\\"']")


def _build(cmd: Cmd, depth: int, out: _Built) -> None:
    """Turn one simple command into parts (several for ``sh -c`` and ``find -exec``)."""
    words = cmd.words
    extra_readings: list[str] = []
    extra_writes = False
    full = _text(words, cmd.redirs)
    redirs_write = any(redirect_writes(r) for r in cmd.redirs)
    k = 0
    while k < len(words) and ASSIGN_RE.match(words[k].src):
        risk = assignment_risk(words[k].value)
        if risk:
            out.note(risk)
        k += 1
    if k < len(words) and re.match(r"[A-Za-z_][A-Za-z0-9_]*\[", words[k].src) and "=" in words[k].src:
        out.note("array assignment")
    # Allow-level wrappers.
    deny_starts: list[int] = []
    while k < len(words):
        w = words[k]
        name = std_name(w.value) if w.static else None
        if name == "command" and k + 1 < len(words) and words[k + 1].value in ("-v", "-V"):
            break
        if name in WRAPPERS:
            j = skip_options(words, k, WRAPPERS[name], name)
            if j is None:
                if name == "env" and any(x.value in ("-S", "--split-string") or x.value.startswith("--split-string")
                                         for x in words[k + 1:]):
                    out.note("env -S splits a string into a command")
                break
            if name == "env":
                for x in words[k + 1:j]:
                    risk = assignment_risk(x.value)
                    if risk:
                        out.note(risk)
            k = j
            continue
        break
    argv_words = words[k:]
    # Deny-level wrappers (sudo, strace, ...) give further readings for deny and ask rules.
    d = k
    while d < len(words):
        w = words[d]
        name = basename(w.value) if w.static else None
        spec = DENY_WRAPPERS.get(name or "") or WRAPPERS.get(name or "")
        if not spec:
            break
        j = skip_options(words, d, spec, name or "")
        if j is None:
            break
        deny_starts.append(j)
        d = j
    if not argv_words:
        # Only assignments and redirections: bash runs nothing but may still write.
        if not full:
            return
        out.parts.append(Part(full, _plain([w.value for w in words], cmd.redirs), [w.value for w in words],
                              redirs_write, (full,)))
        return
    head = argv_words[0]
    if not head.static:
        out.note("the command name is computed at run time")
    elif head.value.startswith("=") and not head.quoted and len(head.value) > 1:
        out.note("=cmd is a path expansion in zsh")
        extra_readings.append(" ".join([head.value[1:]] + [w.value for w in argv_words[1:]]))
    name = basename(head.value)
    if head.static and name == "eval":
        out.note("eval")
        if all(w.static for w in argv_words[1:]):
            # Never allowed, but deny rules see the evaluated text.
            sub = _split(" ".join(w.value for w in argv_words[1:]), depth + 1)
            extra_readings += [t for p in sub.parts for t in p.deny_texts]
    # sh -c 'script': split the script itself.
    inner_start = deny_starts[-1] if deny_starts else k
    inner = words[inner_start:]
    if inner and inner[0].static and basename(inner[0].value) in SHELLS:
        script = shell_script(inner)
        if script is not None:
            if isinstance(script, str):
                out.note(script)
            else:
                if not script.static:
                    out.note("sh -c with a dynamic string")
                elif inner_start != k:
                    # sudo sh -c '...': not looked through for allow, but deny rules see inside.
                    sub = _split(script.value, depth + 1)
                    extra_readings += [t for p in sub.parts for t in p.deny_texts]
                    extra_writes = not sub.ok or any(p.writes for p in sub.parts)
                else:
                    # The shell is the command: its script's parts replace it.
                    sub = _split(script.value, depth + 1)
                    out.parts.extend(sub.parts)
                    if not sub.ok:
                        out.note(sub.reason or "cannot parse the sh -c script")
                    if redirs_write:
                        redir_text = " ".join(r.src for r in cmd.redirs)
                        out.parts.append(Part(redir_text, _plain([], cmd.redirs), [], True, (redir_text,)))
                    return
    if inner and inner[0].static and basename(inner[0].value) in OTHER_SHELLS:
        if any(w.value == "-c" or w.value.startswith("--command") for w in inner[1:]):
            out.note(f"{basename(inner[0].value)} -c is not analysed")
    argv = [w.value for w in argv_words]
    text = _text(argv_words, cmd.redirs)
    plain = _plain(argv, cmd.redirs)
    readings = [text, plain, full, _plain([w.value for w in words], cmd.redirs)]
    for start in deny_starts:
        rest = words[start:]
        readings += [_text(rest, cmd.redirs), _plain([w.value for w in rest], cmd.redirs)]
        if rest and "/" in rest[0].value:
            readings.append(_plain([basename(rest[0].value)] + [w.value for w in rest[1:]], cmd.redirs))
    if "/" in argv[0]:
        readings.append(_plain([basename(argv[0])] + argv[1:], cmd.redirs))
    if any(w.brace for w in argv_words):
        # {rm,-rf,/} is brace-expanded by bash into "rm -rf /": deny rules see that reading.
        readings.append(" ".join(_brace_expand(w.value) if w.brace else w.value for w in argv_words))
    readings = list(dict.fromkeys(normalize_space(r) for r in readings + extra_readings))
    final = [w.value for w in inner] if inner else argv
    writes = extra_writes or redirs_write or argv_writes(final) or argv_writes(argv)
    plain_ok = not any(_UNSAFE_PLAIN.search(v) for v in argv)
    out.parts.append(Part(text, plain, argv, writes, tuple(readings), plain_ok))
    # find -exec CMD ... ; runs CMD: it is a part of its own.
    if inner and inner[0].static and basename(inner[0].value) == "find":
        _find_exec(inner, depth, out)


def _find_exec(words: list[Word], depth: int, out: _Built) -> None:
    """``find ... -exec CMD ARGS ;`` runs CMD: add it as a part of its own (wrappers and sh -c included)."""
    j = 1
    while j < len(words):
        if words[j].value in ("-exec", "-execdir", "-ok", "-okdir"):
            start = j + 1
            j = start
            while j < len(words) and words[j].value not in (";", "+"):
                j += 1
            if j >= len(words):
                out.note("find -exec without its ';'")
            sub = Cmd()
            sub.words = words[start:j]
            if start < j and words[start].value == "{}":
                out.note("find -exec runs the found file")
                sub.words = []
            if sub.words:
                _build(sub, depth, out)
        j += 1


def _brace_expand(word: str) -> str:
    """One level of ``a{b,c}d`` -> ``abd acd`` (enough for deny readings)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if not m:
        return word
    return " ".join(word[:m.start()] + alt + word[m.end():] for alt in m.group(1).split(","))
