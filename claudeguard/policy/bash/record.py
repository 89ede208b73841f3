"""One invocation recorded: the readings rules match, and the code it runs that cannot be read.

``add`` makes an ``Invocation`` of a program's words: allow rules meet its own readings (as
written, quotes removed when the words read back the same, with its redirections); deny and ask
rules meet every reading (the wrappers around it kept, a path reduced to its name, a brace
expansion expanded), and it is listed before the invocations its own words ran (``echo
$(date)``: echo, then date). ``note`` ties code the guard cannot read to it; ``pipe_output`` is
what it gives the next command of a pipeline, when the line shows it.
"""

from __future__ import annotations

from claudeguard.policy.bash.model import Invocation, basename, normalize_space
from claudeguard.policy.bash.words import brace_expand
from claudeguard.policy.bash.writes import argv_writes

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.policy.bash.model import Ctx, Findings, Stream, Target, Word

_UNSAFE_IN_PLAIN = frozenset(";&|<>()$`\\\"'")


def add(out: Findings, argv: list[Word], writes: list[Target], reads: list[Target], ctx: Ctx,
        outer: list[list[Word]], *, readings: tuple[list[str], ...] = ()) -> int:
    """Record one invocation; its index."""
    words = [w.value for w in argv]
    text = " ".join([w.src for w in argv] + [r[0] for r in ctx.redirs])
    plain = " ".join(words + [r[1] for r in ctx.redirs])
    bare_text = " ".join(w.src for w in argv)
    bare_plain = " ".join(words)
    safe = all(_plain_safe(w) for w in words)
    # Allow rules meet the words alone (what is written is judged as a write) and the
    # command with its redirections (as Claude Code's rules read it).
    allow = [normalize_space(bare_text)] + ([normalize_space(bare_plain)] if safe else [])
    for extra in readings:
        allow.append(normalize_space(" ".join(extra)))
    if ctx.redirs:
        allow.append(normalize_space(text))
        if safe:
            allow.append(normalize_space(plain))
    deny = list(allow)
    deny += [normalize_space(bare_plain), normalize_space(text), normalize_space(plain)]
    if words and "/" in words[0]:
        deny.append(normalize_space(" ".join([basename(words[0])] + words[1:])))
    if words and words[0].startswith("=") and len(words[0]) > 1:
        deny.append(normalize_space(" ".join([words[0][1:]] + words[1:])))  # zsh =cmd
    if any(w.brace for w in argv):
        deny.append(normalize_space(" ".join(brace_expand(w.value) if w.brace else w.value for w in argv)))
    for wrapper in outer:
        full = wrapper + argv
        deny.append(normalize_space(" ".join([w.src for w in full] + [r[0] for r in ctx.redirs])))
        deny.append(normalize_space(" ".join([w.value for w in full] + [r[1] for r in ctx.redirs])))
    for extra in readings:
        deny.append(normalize_space(" ".join(extra)))
    allow_texts = tuple(dict.fromkeys(a for a in allow if a))
    deny_texts = tuple(dict.fromkeys(d.replace(" \0", "") for d in deny + allow if d))
    changes = bool(writes) or argv_writes(words)
    inv = Invocation(words, normalize_space(text), normalize_space(plain), allow_texts, deny_texts, writes, reads,
                     changes, ctx.surface or normalize_space(text))
    inv.runs_path = words[0] if words and "/" in words[0] and argv[0].literal else None
    inv.nested = ctx.nested or bool(outer)
    at = ctx.insert_at
    ctx.insert_at = None  # the command's own invocation goes before the ones its words ran
    found = out.invocations
    if at is None or at >= len(found):
        found.append(inv)
        return len(found) - 1
    found.insert(at, inv)
    out.unknowns = [(r, i + 1 if i is not None and i >= at else i) for r, i in out.unknowns]
    return at


def note(out: Findings, index: int, reason: str, *, coverable: bool = True) -> None:
    """Code invocation ``index`` runs that the guard cannot read. ``coverable``: an allow rule
    with a specifier that matches the invocation still allows it (an interpreter the user
    allowed: ``Bash(python3 *)``); not so for what a wrapper, ``find`` or ``git`` would run."""
    inv = out.invocations[index]
    if inv.unknown is None:
        inv.unknown = reason
    out.unknown(reason, index if coverable else None)


def unknown_at(out: Findings, index: int | None, reason: str, argv: list[Word], writes: list[Target],
               reads: list[Target], ctx: Ctx, outer: list[list[Word]]) -> None:
    """Code the guard cannot read, tied to invocation ``index`` (recorded first when None):
    an allow rule does not cover it."""
    if index is None:
        index = add(out, argv, writes, reads, ctx, outer)
    note(out, index, reason, coverable=False)


def pipe_output(values: list[str], stdin: Stream) -> Stream:
    """What a command writes to a pipe, when the command line shows it: ``echo`` and
    ``printf`` their arguments, a bare ``cat`` its stdin (a here-document)."""
    if not values:
        return None
    name = basename(values[0])
    args = values[1:]
    if name == "echo":
        while args and args[0] in ("-n", "-e", "-E", "-ne", "-en"):
            args = args[1:]
        text = " ".join(args)
        return ("text", text + "\n") if "\\" not in text else ("data", "echo with escapes")
    if name == "printf":
        if args and args[0] == "--":
            args = args[1:]
        if len(args) == 1 and "%" not in args[0] and "\\" not in args[0].replace("\\n", ""):
            return ("text", args[0].replace("\\n", "\n"))
        return ("data", "printf")
    if name == "cat" and (not args or args == ["-"]):
        return stdin
    return ("data", name)


def _plain_safe(value: str) -> bool:
    """No blank, quote or operator in a word: joined by spaces, the words read back unchanged."""
    return _UNSAFE_IN_PLAIN.isdisjoint(value) and not any(c.isspace() for c in value)
