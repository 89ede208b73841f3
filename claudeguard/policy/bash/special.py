"""Programs the walk reads by rules of their own: ``find``, ``git``, ``make``, ``awk`` and ``sed``.

``find``: its start points are read; ``-exec``/``-ok`` run a command of their own (walked as
one, with find's words kept for deny and ask rules), ``-fprint`` and ``-delete`` write.
``git``: its global options are normalised away for a second reading (``git -C x status`` is
also ``git status``); configuration that runs code (``-c alias.x=!cmd``, ``core.pager``,
hooks, ``config`` that sets such a key, ``submodule foreach``, ``rebase --exec``) is an unknown
no allow rule covers, and ``--output`` writes. ``make``, ``awk`` and ``sed`` run code written in
their arguments: ``make --eval`` and variables that hold commands, ``awk``'s ``system()``,
pipes and ``getline``, ``sed``'s ``e`` and ``w`` commands.
"""

from __future__ import annotations

import re

from claudeguard.policy.bash.model import Target, basename, lit, short, std_name
from claudeguard.policy.bash.options import parse as parse_options
from claudeguard.policy.bash.programs import (
    AWK, GIT_CODE_OPTIONS, GIT_CODE_SHORT, GIT_CODE_SUBCOMMANDS, GIT_GLOBAL, GIT_HARMLESS_KEYS, GIT_HARMLESS_VALUES,
    MAKE_RISKY, SED,
)
from claudeguard.policy.bash.record import add, note
from claudeguard.policy.bash.shells import is_shell, script_index

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.policy.bash.model import Ctx, Findings, Stream, Walk, Word


def find(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
         outer: list[list[Word]], level: int) -> Stream:
    """``find START... EXPRESSION``: what it reads, what its ``-exec`` runs, what it writes."""
    values = [w.value for w in argv]
    i = 1
    while i < len(values) and values[i] in ("-H", "-L", "-P") or (i < len(values) and values[i].startswith(
            ("-D", "-O")) and values[i] not in ("-D", "-O")):
        i += 1
    starts = []
    while i < len(values) and not values[i].startswith(("-", "(", "!", ")", ",")):
        starts.append(argv[i])
        i += 1
    index = add(walk.out, argv, writes, reads, ctx, outer)
    inv = walk.out.invocations[index]
    for w in starts or [lit(".")]:
        inv.reads.append(Target(w.value if w.literal else None, ctx.cwd, "operand", f"find {w.src}"))
    while i < len(values):
        v = values[i]
        if v in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(values) and values[j] not in (";", "+"):
                j += 1
            if j >= len(values):
                note(walk.out, index, f"runs find {v} without its ';'", coverable=False)
                return None
            inner = argv[i + 1:j]
            if not inner:
                note(walk.out, index, f"runs find {v} without a command", coverable=False)
            elif "{}" in inner[0].value:
                note(walk.out, index, f"runs the files it finds: find {v} {{}}", coverable=False)
            else:
                head = std_name(inner[0].value)
                if head is not None and is_shell(basename(head)):
                    at = script_index(basename(head), [w.value for w in inner])
                    if isinstance(at, int) and "{}" in inner[at].value:
                        note(walk.out, index, f"puts file names into a shell script: find {v}", coverable=False)
                        i = j + 1
                        continue
                walk.run(inner, 0, ctx, None, [], [], outer + [argv[:i + 1]], level)
            i = j + 1
            continue
        if v in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(values):
            w = argv[i + 1]
            inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "option", f"find {v} {w.src}"))
            i += 3 if v == "-fprintf" else 2
            continue
        if v == "-delete":
            for w in starts or [lit(".")]:
                inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "option", "find -delete"))
        i += 1
    inv.changes = inv.changes or bool(inv.writes)
    return ("data", "find")


def git(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
        outer: list[list[Word]], level: int) -> Stream:
    """``git [global options] SUBCOMMAND ...``: a second reading without the global options; what
    runs code the guard cannot read; what ``--output`` and ``-o`` write."""
    values = [w.value for w in argv]
    i = 1
    problems: list[str] = []
    git_dir = ctx
    while i < len(values) and values[i].startswith("-"):
        v = values[i]
        if not argv[i].literal:
            problems.append("options computed at run time")
            break
        opt, eq, attached = v.partition("=")
        if v == "-c" or v.startswith("-c") and not v.startswith("--"):
            pair = v[2:] if len(v) > 2 else (values[i + 1] if i + 1 < len(values) else "")
            if len(v) == 2:
                i += 1
            key, _, value = pair.partition("=")
            if not _git_key_harmless(key.lower(), value):
                problems.append(f"git -c {key}")
            i += 1
            continue
        if opt in ("--config-env", "--exec-path") and (eq or opt == "--config-env"):
            problems.append(f"git {opt}")
            i += 1 if eq else 2
            continue
        if opt in GIT_GLOBAL:
            takes = GIT_GLOBAL[opt]
            given = attached if eq else (values[i + 1] if takes and i + 1 < len(values) else None)
            if opt == "-C" and given is not None:
                git_dir = git_dir.copy()
                git_dir.cd([given])
            i += 1 if (eq or not takes) else 2
            continue
        if opt == "--exec-path":
            i += 1
            continue
        problems.append(f"git {opt}: an option the guard does not know")
        break
    sub = values[i] if i < len(values) else None
    rest = values[i + 1:] if sub is not None else []
    normal = ["git"] + values[i:]
    inner_writes: list[Target] = []
    if sub is not None:
        if sub == "config":
            setting = _git_config_set(rest)
            if setting is not None and not _git_key_harmless(setting.lower(), ""):
                problems.append(f"git config {setting} (configuration a later git command runs)")
        if sub in GIT_CODE_SUBCOMMANDS:
            problems.append(GIT_CODE_SUBCOMMANDS[sub])
        if (sub == "submodule" and "foreach" in rest) or (sub == "bisect" and rest[:1] == ["run"]):
            problems.append(f"git {sub} {'foreach' if sub == 'submodule' else 'run'}")
        for j, a in enumerate(rest):
            opt = a.split("=", 1)[0]
            if opt in GIT_CODE_OPTIONS or a in GIT_CODE_SHORT.get(sub, ()) or (
                    sub in ("rebase",) and opt == "--exec"):
                problems.append(f"git {sub} {opt}")
            if opt == "--output":
                path = a.split("=", 1)[1] if "=" in a else (rest[j + 1] if j + 1 < len(rest) else None)
                inner_writes.append(Target(path, git_dir.cwd, "option", f"git {sub} --output"))
            if a == "-o" and sub in ("format-patch", "archive") and j + 1 < len(rest):
                inner_writes.append(Target(rest[j + 1], git_dir.cwd, "option", f"git {sub} -o"))
    readings = (normal,) if i > 1 else ()
    index = add(walk.out, argv, writes + inner_writes, reads, ctx, outer, readings=readings)
    for problem in problems:
        note(walk.out, index, f"runs code the guard cannot read: {problem}", coverable=False)
    return ("data", "git")


def _git_config_set(args: list[str]) -> str | None:
    """The key ``git config ARGS`` sets (``git config alias.x '!cmd'``), or None when it reads."""
    reading = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--show-origin", "--unset",
               "--unset-all", "--remove-section", "--rename-section", "--edit", "-e", "get", "list")
    if any(a in reading or a.startswith("--get") for a in args):
        return None
    positional = [a for a in args if not a.startswith("-")]
    if positional[:1] == ["set"]:
        positional = positional[1:]
    return positional[0] if len(positional) >= 2 else None


def _git_key_harmless(key: str, value: str) -> bool:
    """Whether setting ``key`` (to ``value``) runs no code: ``programs.GIT_HARMLESS_KEYS``."""
    for harmless in GIT_HARMLESS_KEYS:
        if key == harmless or (harmless.endswith(".") and key.startswith(harmless)):
            return True
    allowed = GIT_HARMLESS_VALUES.get(key)
    return allowed is not None and value in allowed


def make(out: Findings, argv: list[Word], index: int) -> None:
    """``make``: a Makefile read from stdin, ``--eval``, and a variable set on the command line that
    changes the shell or the makefiles, or holds a substitution, run code the guard cannot read."""
    values = [w.value for w in argv]
    for i, v in enumerate(values[1:], 1):
        if v in ("-f", "--file", "--makefile") and values[i + 1:i + 2] in (["-"], ["/dev/stdin"]) or v in (
                "--file=-", "--makefile=-", "-f-", "--file=/dev/stdin"):
            note(out, index, "runs a Makefile read from stdin: make -f -", coverable=False)
            return
    for w in argv[1:]:
        v = w.value
        if v in ("-E", "--eval") or v.startswith(("--eval=", "-E")) and not v.startswith("--"):
            note(out, index, "runs code the guard cannot read: make --eval", coverable=False)
            return
        if "=" in v and not v.startswith("-"):
            name = v.split("=", 1)[0].rstrip(":+?!").strip()
            if (name in MAKE_RISKY or v.split("=", 1)[0].endswith("!") or not w.literal
                    or "$(" in v or "${" in v or "`" in v):
                note(out, index, f"runs code the guard cannot read: make {short(v)}", coverable=False)
                return


def awk(out: Findings, argv: list[Word], index: int) -> None:
    """``awk``: a program from a file, or one that runs commands or writes files (``system()``,
    a pipe, ``getline``, ``print > f``), cannot be read; ``--sandbox`` turns those off."""
    values = [w.value for w in argv]
    parsed = parse_options(values, AWK, 1)
    if isinstance(parsed, str):
        note(out, index, f"runs awk with options the guard cannot read ({parsed})")
        return
    if parsed.has("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec"):
        note(out, index, "runs an awk program the guard cannot read: awk -f")
        return
    if parsed.has("--sandbox"):
        return
    code = [v for name, v in parsed.options if name in ("-e", "--source") and v is not None]
    if not code:
        if parsed.index >= len(values):
            return
        code = [values[parsed.index]]
        if not argv[parsed.index].literal:
            note(out, index, "runs an awk program computed at run time")
            return
    for text in code:
        reason = _awk_risk(text)
        if reason:
            note(out, index, f"runs code the guard cannot read: awk with {reason}")
            return


def sed(out: Findings, argv: list[Word], ctx: Ctx, index: int) -> None:
    """``sed``: a script from a file, or one with an ``e`` or ``w`` command, cannot be read;
    ``-i`` writes its file operands."""
    values = [w.value for w in argv]
    parsed = parse_options(values, SED, 1)
    if isinstance(parsed, str):
        note(out, index, f"runs sed with options the guard cannot read ({parsed})")
        return
    if parsed.has("-f", "--file"):
        note(out, index, "runs a sed script the guard cannot read: sed -f")
        return
    scripts = [v for name, v in parsed.options if name in ("-e", "--expression") and v is not None]
    operands = argv[parsed.index:]
    if not scripts and operands:
        if not operands[0].literal:
            note(out, index, "runs a sed script computed at run time")
            return
        operands = operands[1:]
    if not parsed.has("--sandbox"):
        for text in scripts + [w.value for w in argv[1:]]:
            if _sed_risk(text):
                note(out, index, "runs code the guard cannot read: sed with an e or w command")
                return
    if parsed.has("-i", "--in-place"):
        inv = out.invocations[index]
        for w in operands:
            inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "operand", "sed -i"))


def _awk_risk(program: str) -> str | None:
    """What in an awk program runs a command or writes a file."""
    if re.search(r"\bsystem\s*\(", program):
        return "system()"
    if re.search(r"(?<!\|)\|(?!\|)", program):
        return "a pipe"
    if re.search(r"\bgetline\b", program):
        return "getline"
    if re.search(r"\bprintf?\b[^;{}\n]*>", program):
        return "output to a file"
    return None


def _sed_risk(script: str) -> bool:
    """Whether a sed script holds an ``e`` (run) or ``w``/``W`` (write) command or flag."""
    return bool(re.search(r"(?:^|[;{}\n])\s*(?:[0-9$]+|/[^/]*/)?\s*(?:,\s*(?:[0-9$]+|/[^/]*/))?\s*!?\s*[wWe](?:\s|$)"
                          r"|/[gpIiMmeE0-9]*[wWe](?:\s|$)|^\s*:[^;]*;\s*e", script)
                or re.search(r"s([^\w\s\\])(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpIiMm0-9]*[eEwW]", script))
