"""Shells re-entered and interpreters: code a command runs that the walk reads again, or asks about.

A shell's ``-c`` string (its options read with that shell's grammar: ``c`` anywhere in a
cluster, ``-o VALUE``, bash's long options) and the text a shell reads on stdin (a
here-document, ``echo ... | sh``) are walked again as the program they are (``Walk.code``), as
are ``eval``'s literal words, ``source /dev/stdin``, ``trap`` and ``alias`` bodies. A shell
running a script file is not read (the OS sandbox holds it). Code given inline to an
interpreter (``python3 -c``, ``node -e``, ``perl -e``, a pager's shell escape) cannot be read:
it is an unknown tied to the interpreter's invocation, which an allow rule with a specifier that
matches it still covers (``Bash(python3 *)``).
"""

from __future__ import annotations

from claudeguard.policy.bash.model import Target
from claudeguard.policy.bash.options import parse as parse_options
from claudeguard.policy.bash.programs import (
    INLINE_ANYWHERE, NODE_SHORT, NODE_VALUES, PERL, PYTHON, PYTHON_CODE_MODULES, RUBY, SHELL_ESCAPES, SHELL_GRAMMARS,
    is_node, is_python, risky_assignment,
)
from claudeguard.policy.bash.record import add, note

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.policy.bash.model import Ctx, Findings, Stream, Walk, Word


def is_shell(name: str) -> bool:
    """A shell whose options the guard knows (``programs.SHELL_GRAMMARS``)."""
    return name in SHELL_GRAMMARS


def shell(walk: Walk, name: str, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target],
          reads: list[Target], outer: list[list[Word]]) -> Stream:
    """A shell: the script it runs (``-c``, or its stdin when the line shows it) is walked again."""
    index = add(walk.out, argv, writes, reads, ctx, outer)
    values = [w.value if w.literal else "\0" for w in argv]
    found = script_index(name, values)
    if isinstance(found, str):
        note(walk.out, index, f"runs {name} with options the guard cannot read ({found})")
        return None
    if found is None:  # no -c: the program is a script file, or stdin
        operand = _shell_operand(name, values)
        if operand is not None:
            return ("data", name)
        if stdin is None:
            return ("data", name)
        if stdin[0] == "text":
            walk.out.invocations[index].implicit = True
            walk.code(stdin[1], ctx, f"{name} reading stdin")
        else:
            note(walk.out, index, f"runs code the guard cannot read: {stdin[1]} piped into {name}")
        return ("data", name)
    script = argv[found] if found < len(argv) else None
    if script is None or not script.literal:
        note(walk.out, index, f"runs code the guard cannot read: {name} -c with a script computed at run time")
        return None
    walk.out.invocations[index].implicit = True
    walk.code(script.value, ctx, f"{name} -c")
    return ("data", name)


def script_index(name: str, values: list[str]) -> int | str | None:
    """For ``name [options] -c SCRIPT``: the index of SCRIPT; None without ``-c``; a reason when
    an option is not the shell's."""
    shorts, long_values, long_flags = SHELL_GRAMMARS.get(name, SHELL_GRAMMARS["sh"])
    command = False
    i = 1
    while i < len(values):
        arg = values[i]
        if arg == "\0":
            if command:
                break  # the script, computed at run time
            return "options computed at run time"
        if arg in ("--", "-"):
            i += 1
            break
        if arg.startswith("--"):
            long, eq, _ = arg[2:].partition("=")
            if long in long_values:
                i += 1 if eq else 2
                continue
            if eq or (long_flags is not None and long not in long_flags):
                return f"option {arg} is not known"
            i += 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        i += 1
        for c in arg[1:]:
            if c == "c":
                command = True
            elif c in shorts:
                i += 1
            elif not c.isalnum():
                return f"option {arg} is not known"
    if not command:
        return None
    return i if i < len(values) else "-c without a script"


def _shell_operand(name: str, values: list[str]) -> str | None:
    """The script file a shell runs (``bash build.sh``), or None when it reads stdin."""
    shorts, long_values, _ = SHELL_GRAMMARS.get(name, SHELL_GRAMMARS["sh"])
    stdin = False
    i = 1
    while i < len(values):
        arg = values[i]
        if arg in ("--", "-"):
            i += 1
            break
        if arg.startswith("--"):
            i += 2 if arg[2:] in long_values else 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        i += 1
        for c in arg[1:]:
            if c == "s":
                stdin = True
            elif c in shorts:
                i += 1
    if stdin or i >= len(values):
        return None
    return values[i]


def builtin(walk: Walk, prog: str, argv: list[Word], ctx: Ctx, stdin: Stream, index: int) -> None:
    """A shell builtin that runs code or changes what later commands run: ``cd`` moves ``ctx``;
    ``eval``, ``source``, ``trap`` and ``alias`` run code (read again when it is literal);
    ``hash -p``, ``enable -f``, ``mapfile -C`` and a risky ``export`` are unknowns."""
    args = [w.value for w in argv[1:]]
    if prog == "cd":
        ctx.cd(args)
    elif prog == "eval":
        note(walk.out, index, "runs code the guard cannot read: eval", coverable=False)
        if all(w.literal for w in argv[1:]):
            walk.code(" ".join(args), ctx, "eval")
    elif prog in ("source", "."):
        _source(walk, argv, ctx, stdin, index)
    elif prog == "trap":
        _trap(walk, argv, ctx)
    elif prog == "alias":
        for word in argv[1:]:
            if "=" in word.value:
                if word.literal:
                    walk.code(word.value.split("=", 1)[1], ctx, "alias")
                else:
                    walk.out.unknown("defines an alias the guard cannot read", index)
    elif prog == "hash" and "-p" in args:
        walk.out.unknown("makes a name run another program: hash -p", index)
    elif prog == "enable" and any(a.startswith("-") and "f" in a for a in args):
        walk.out.unknown("loads a builtin from a shared object: enable -f", index)
    elif prog in ("mapfile", "readarray") and any(a.startswith("-") and "C" in a for a in args):
        walk.out.unknown(f"runs a callback the guard cannot read: {prog} -C", index)
    elif prog in ("export", "declare", "typeset", "local", "readonly"):
        for word in argv[1:]:
            var, eq, value = word.value.partition("=")
            if eq and risky_assignment(var, value if word.literal else None):
                walk.out.unknown(f"sets {var}, which changes what a command runs")


def _source(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, index: int) -> None:
    """``source FILE`` (``. FILE``): its stdin, when the line shows the text, is walked again; a
    path computed at run time, a process substitution or a descriptor is not read. A script file
    is not read either (the OS sandbox holds it)."""
    if len(argv) < 2:
        return
    target = argv[1]
    node = target.node
    if node is not None and node.type == "process_substitution":
        note(walk.out, index, "runs code the guard cannot read: source of a process substitution")
        return
    if not target.literal:
        note(walk.out, index, f"runs code the guard cannot read: source of a path computed at run time ({target.src})")
        return
    if target.value in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"):
        if stdin is not None and stdin[0] == "text":
            walk.code(stdin[1], ctx, "source /dev/stdin")
        else:
            note(walk.out, index, "runs code the guard cannot read: source of its stdin")
    elif target.value.startswith(("/dev/fd/", "/proc/")):
        note(walk.out, index, f"runs code the guard cannot read: source {target.value}")


def _trap(walk: Walk, argv: list[Word], ctx: Ctx) -> None:
    """``trap CODE SIGNAL...``: the code runs later, on a signal; it is walked now."""
    values = [w.value for w in argv]
    if len(values) < 3 or values[1].startswith("-"):
        return
    if not argv[1].literal:
        walk.out.unknown("sets a trap the guard cannot read")
    else:
        walk.code(values[1], ctx, "trap")


def interpreter(out: Findings, prog: str, argv: list[Word], ctx: Ctx, stdin: Stream, index: int) -> None:
    """Code given inline to an interpreter, or its program read from stdin: an unknown tied to
    invocation ``index``; ``perl -i`` writes its operands."""
    values = [w.value for w in argv]
    if is_python(prog):
        parsed = parse_options(values, PYTHON, 1)
        if isinstance(parsed, str):
            note(out, index, f"runs {prog} with options the guard cannot read ({parsed})")
        elif parsed.has("-c"):
            note(out, index, f"runs code the guard cannot read: {prog} -c")
        elif parsed.has("-m"):
            module = parsed.value("-m") or ""
            if module.split(".", 1)[0] in PYTHON_CODE_MODULES:
                note(out, index, f"runs code the guard cannot read: {prog} -m {module}")
        elif (parsed.index >= len(values) or values[parsed.index] == "-") and stdin is not None:
            note(out, index, f"runs code the guard cannot read: {prog} reading its program from stdin")
        return
    if is_node(prog):
        _node(out, prog, values, stdin, index)
        return
    if prog in ("perl", "ruby"):
        parsed = parse_options(values, PERL if prog == "perl" else RUBY, 1)
        if isinstance(parsed, str):
            note(out, index, f"runs {prog} with options the guard cannot read ({parsed})")
        elif parsed.has("-e", "-E"):
            note(out, index, f"runs code the guard cannot read: {prog} -e")
        elif parsed.index >= len(values) and stdin is not None:
            note(out, index, f"runs code the guard cannot read: {prog} reading its program from stdin")
        elif prog == "perl" and parsed.has("-i"):
            inv = out.invocations[index]
            for w in argv[parsed.index + 1:]:
                inv.writes.append(Target(w.value if w.literal else None, ctx.cwd, "operand", "perl -i"))
        return
    escapes = SHELL_ESCAPES.get(prog)
    if escapes is not None and any(e in v for v in values[1:] for e in escapes):
        note(out, index, f"runs code the guard cannot read: {prog} with a shell escape")
        return
    if prog == "man" and any(v in ("-P", "--pager") or v.startswith(("--pager=", "-P")) for v in values[1:]):
        note(out, index, "runs code the guard cannot read: man -P", coverable=False)
        return
    code_options = INLINE_ANYWHERE.get(prog)
    if code_options is not None:
        for v in values[1:]:
            if v in code_options or any(v.startswith(o) and len(o) == 2 and o[0] == "-" and len(v) > 2
                                        and not v.startswith("--") for o in code_options if o != "+"):
                note(out, index, f"runs code the guard cannot read: {prog} {v[:12]}")
                return
            if "+" in code_options and v.startswith("+") and len(v) > 1:
                note(out, index, f"runs code the guard cannot read: {prog} {v[:12]}")
                return
        if stdin is not None:
            note(out, index, f"runs code the guard cannot read: {stdin[1] if stdin[0] == 'data' else 'text'} "
                             f"piped into {prog}")


def _node(out: Findings, prog: str, values: list[str], stdin: Stream, index: int) -> None:
    """``node`` and ``bun``: ``-e``, ``-p``, ``--eval``, ``--print`` run code inline, as does a
    program read from stdin."""
    i = 1
    while i < len(values) and values[i].startswith("-") and values[i] != "-":
        v = values[i]
        if v == "--":
            i += 1
            break
        if v.startswith("--"):
            name = v[2:].split("=", 1)[0]
            if name in ("eval", "print"):
                note(out, index, f"runs code the guard cannot read: {prog} --{name}")
                return
            i += 1 if ("=" in v or name not in NODE_VALUES) else 2
            continue
        parsed = parse_options([v], NODE_SHORT)
        if isinstance(parsed, str):
            note(out, index, f"runs {prog} with options the guard cannot read ({parsed})")
            return
        if parsed.has("-e", "-p"):
            note(out, index, f"runs code the guard cannot read: {prog} {v[:2]}")
            return
        i += 2 if len(v) == 2 and v[1] in "rC" else 1  # -r MODULE, -C CONDITION
    if prog == "bun" and i < len(values) and values[i] in ("-e", "--eval"):
        note(out, index, f"runs code the guard cannot read: {prog} -e")
        return
    if (i >= len(values) or values[i] == "-") and stdin is not None:
        note(out, index, f"runs code the guard cannot read: {prog} reading its program from stdin")
