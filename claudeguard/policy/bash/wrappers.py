"""Wrappers: programs that run the command in their operands, read with their option grammars.

``timeout``, ``env``, ``nice``, ``sudo``, ``xargs`` ... (``programs.WRAPPERS``, ``PRIVILEGED``)
are unwrapped by their grammars (``options``): the command they run is an invocation of its
own, with the wrapper's words kept for deny and ask rules (``outer``). An option a grammar does
not know, or one computed at run time, could swallow the command's word: an unknown. A wrapper
run by a path outside the system directories (``./env``) is an invocation of its own and is
unwrapped as well. Package runners (``npx``, ``npm exec``, ``uv run`` ...) run a command that
needs no allow rule beyond the runner's. ``flock``, ``script``, ``watch``, ``busybox``,
``coproc``, ``parallel`` and ``su`` run a command or a shell string their own way.
"""

from __future__ import annotations

from claudeguard.policy.bash.model import Target, Word, basename, std_name
from claudeguard.policy.bash.options import Grammar
from claudeguard.policy.bash.options import parse as parse_options
from claudeguard.policy.bash.programs import NO_COMMAND_OPTIONS, PRIVILEGED, WRAPPERS, risky_assignment
from claudeguard.policy.bash.record import add, note, unknown_at
from claudeguard.policy.bash.shells import is_shell, script_index

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from claudeguard.policy.bash.model import Ctx, Findings, Stream, Walk
    from claudeguard.policy.bash.options import Parsed


def wrapper(walk: Walk, name: str, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target],
            reads: list[Target], outer: list[list[Word]], level: int, as_path: int | None = None) -> Stream:
    """``argv`` run by wrapper ``name``: its options read with its grammar, then the command it
    runs. ``as_path``: the invocation of a wrapper run by a path (``./env``), already recorded."""
    values = [w.value for w in argv]
    privileged = name in PRIVILEGED
    spec, positionals = PRIVILEGED[name] if privileged else WRAPPERS[name]
    index = as_path  # the path's own invocation (./env), or None
    if privileged and as_path is None:
        index = add(walk.out, argv, writes, reads, ctx, outer)
    # the options must be literal: a word computed at run time could be any option
    limit = next((i for i, w in enumerate(argv[1:], 1) if not w.literal), len(argv))
    parsed = parse_options(values[:limit], spec, 1)
    if isinstance(parsed, str) and name == "nice" and len(values) > 1 and values[1].startswith("-"):
        parsed = parse_options(values[:limit], WRAPPERS["nice"][0], 1)
    if isinstance(parsed, str):
        unknown_at(walk.out, index, f"runs a command through {name}, whose {parsed}", argv, writes, reads, ctx, outer)
        return None
    if any(parsed.has(o) for o in NO_COMMAND_OPTIONS.get(name, ())):
        if index is None:
            add(walk.out, argv, writes, reads, ctx, outer)
        return None
    at = parsed.index
    if at < len(argv) and at >= limit:
        unknown_at(walk.out, index, f"runs a command through {name} with options computed at run time",
                   argv, writes, reads, ctx, outer)
        return None
    inner_writes: list[Target] = []
    inner_reads: list[Target] = []
    cwd = ctx
    if name == "env":
        if parsed.has("-S", "--split-string"):
            unknown_at(walk.out, index, "splits a string into a command: env -S", argv, writes, reads, ctx, outer)
            return None
        cwd, at = _env(walk.out, parsed, argv, at, ctx)
    elif name == "time":
        out_file = parsed.value("-o", "--output")
        if out_file is not None:
            inner_writes.append(Target(out_file, ctx.cwd, "option", f"time -o {out_file}"))
    elif name == "xargs":
        arg_file = parsed.value("-a", "--arg-file")
        if arg_file is not None:
            inner_reads.append(Target(arg_file, ctx.cwd, "operand", f"xargs -a {arg_file}"))
    elif name == "sudo" and parsed.has("-e", "--edit") and index is not None:
        inv = walk.out.invocations[index]  # sudoedit: its operands are the files it edits
        inv.writes += [Target(w.value if w.literal else None, ctx.cwd, "operand", "sudo -e") for w in argv[at:]]
        inv.changes = True
        return None
    at += positionals
    if at > len(argv):
        unknown_at(walk.out, index, f"runs {name} without the command it needs", argv, writes, reads, ctx, outer)
        return None
    if at == len(argv):
        if name == "exec" or name not in ("env", "nice", "time", "command", "builtin"):
            if index is None:
                index = add(walk.out, argv, writes + inner_writes, reads + inner_reads, ctx, outer)
                if name == "exec" and stdin is not None and stdin is not ctx.stdin:
                    # every later command reads from there: a shell among them reads data
                    note(walk.out, index, "makes later commands read from a file or here-document: exec <",
                         coverable=False)
            elif inner_writes:
                walk.out.invocations[index].writes.extend(inner_writes)
            return None
        if index is None:
            add(walk.out, argv, writes + inner_writes, reads + inner_reads, ctx, outer)
        return ("data", name)
    wrapper = argv[:at]
    if name == "xargs":
        return _xargs(walk, parsed, argv, at, cwd, writes + inner_writes, reads + inner_reads, outer + [wrapper],
                      level)
    return walk.run(argv, at, cwd, stdin, writes + inner_writes, reads + inner_reads, outer + [wrapper], level)


def _env(out: Findings, parsed: Parsed, argv: list[Word], at: int, ctx: Ctx) -> tuple[Ctx, int]:
    """``env -C DIR`` and ``env NAME=VALUE ...``: the directory the command runs in, and where
    the command starts after the assignments (a risky one is an unknown)."""
    cwd = ctx
    chdir = parsed.value("-C", "--chdir")
    if chdir is not None:
        cwd = ctx.copy()
        cwd.cd([chdir])
    while at < len(argv) and "=" in argv[at].value and _is_name(argv[at].value.split("=", 1)[0]):
        var, _, value = argv[at].value.partition("=")
        if risky_assignment(var, value if argv[at].literal else None):
            out.unknown(f"sets {var}, which changes what a command runs")
        at += 1
    return cwd, at


def runner(walk: Walk, argv: list[Word], at: int | str, ctx: Ctx, stdin: Stream, writes: list[Target],
           reads: list[Target], outer: list[list[Word]], level: int) -> Stream:
    """``npx CMD``, ``npm exec -- CMD``, ``uv run CMD``, ``bundle exec CMD`` ...: the runner is
    an invocation of its own; the command it runs meets deny and ask rules, and needs no
    allow rule of its own beyond the runner's (``Bash(npx *)`` already allows anything)."""
    index = add(walk.out, argv, writes, reads, ctx, outer)
    if isinstance(at, str):
        if at.startswith("-c "):  # npx -c 'CMD', npm exec -c 'CMD': a shell string
            first = len(walk.out.invocations)
            walk.code(at[3:], ctx, "npm exec -c")
            for inv in walk.out.invocations[first:]:
                inv.implicit = True
        else:
            note(walk.out, index, f"runs a command through {argv[0].value}, whose {at}")
        return None
    if at >= len(argv):
        return None
    if not all(w.literal for w in argv[1:at]):
        note(walk.out, index, f"runs a command through {argv[0].value} with options computed at run time")
        return None
    first = len(walk.out.invocations)
    out = walk.run(argv, at, ctx, stdin, [], [], outer + [argv[:at]], level)
    for inv in walk.out.invocations[first:]:
        inv.implicit = True
    return out


def _xargs(walk: Walk, parsed: Parsed, argv: list[Word], at: int, ctx: Ctx, writes: list[Target],
           reads: list[Target], outer: list[list[Word]], level: int) -> Stream:
    replace = parsed.value("-I", "--replace", "-i")
    if parsed.has("-i", "--replace") and replace is None:
        replace = "{}"
    inner = argv[at:]
    if replace is not None:
        head = inner[0].value
        if replace in head:
            unknown_at(walk.out, None, "runs a command whose name xargs reads from its input", argv, writes, reads,
                       ctx, outer)
            return None
        name = std_name(head)
        if name is not None and is_shell(basename(name)) and any(replace in w.value for w in inner[1:]):
            at_script = script_index(basename(name), [w.value for w in inner])
            if isinstance(at_script, int) and replace in inner[at_script].value:
                unknown_at(walk.out, None, f"puts its input into a shell script: xargs {replace}", argv, writes,
                           reads, ctx, outer)
                return None
    if replace is not None and any(replace in w.value for w in inner[1:]):
        # What xargs puts in place of the string is its input, known only at run time: the
        # words that hold it are read as computed ones (a wrapper between xargs and a shell,
        # `xargs -I{} env sh -c '{}'`, hid a script made of the input).
        argv = argv[:at] + [inner[0]] + [Word(w.value, w.src, False, w.glob, w.brace, w.quoted, w.node)
                                         if replace in w.value else w for w in inner[1:]]
    first = len(walk.out.invocations)
    walk.run(argv, at, ctx, ("data", "xargs"), writes, reads, outer, level)
    if replace is None and first < len(walk.out.invocations):
        inv = walk.out.invocations[first]  # xargs appends what it reads to the command
        inv.allow_texts = tuple(a + " \0" for a in inv.allow_texts)
    return ("data", "xargs")


def flock(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
          outer: list[list[Word]], level: int) -> Stream:
    """``flock [options] FILE|FD [command...]``, ``flock ... -c SCRIPT``."""
    values = [w.value for w in argv]
    grammar_ = Grammar("sxenuoF", "wEc", long_flags="shared exclusive nonblock nb unlock close no-fork "
                       "verbose", long_values="timeout wait conflict-exit-code command")
    parsed = parse_options(values, grammar_, 1)
    if isinstance(parsed, str) or any(not w.literal for w in argv[1:parsed.index + 1]
                                      if not isinstance(parsed, str)):
        unknown_at(walk.out, None, f"runs a command through flock, whose {parsed}"
                   if isinstance(parsed, str) else "runs flock with options computed at run time",
                   argv, writes, reads, ctx, outer)
        return None
    at = parsed.index
    script = parsed.value("-c", "--command")
    if at < len(values) and values[at + 1:at + 2] in (["-c"], ["--command"]) and at + 2 < len(values):
        script = values[at + 2]
        if not argv[at + 2].literal:
            unknown_at(walk.out, None, "runs code the guard cannot read: flock -c with a script computed at run time",
                       argv, writes, reads, ctx, outer)
            return None
    if script is not None:
        add(walk.out, argv, writes, reads, ctx, outer)
        walk.code(script, ctx, "flock -c")
        return None
    if at + 1 >= len(values):  # flock FD, or flock FILE alone
        add(walk.out, argv, writes, reads, ctx, outer)
        return None
    return walk.run(argv, at + 1, ctx, stdin, writes, reads, outer + [argv[:at + 1]], level)


def script(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
           outer: list[list[Word]], level: int) -> Stream:
    """``script [options] [file]``: ``-c`` runs a shell string; BSD's takes the command after the file."""
    values = [w.value for w in argv]
    grammar_ = Grammar("aefqhVkpdrF", "cTBIOEmoK", optional="t",
                       long_flags="append return flush force quiet help version",
                       long_values="command log-timing log-io log-in log-out echo output-limit "
                       "logging-format", long_optional="timing")
    parsed = parse_options(values, grammar_, 1)
    if isinstance(parsed, str):
        unknown_at(walk.out, None, f"runs a command through script, whose {parsed}", argv, writes, reads, ctx, outer)
        return None
    at = parsed.index
    index = add(walk.out, argv[:at + 1] if at < len(argv) else argv, writes, reads, ctx, outer)
    if at < len(values):
        w = argv[at]
        walk.out.invocations[index].writes.append(Target(w.value if w.literal else None, ctx.cwd, "option",
                                                         f"script {w.src}"))
    code = parsed.value("-c", "--command")
    if code is not None:
        walk.code(code, ctx, "script -c")
        return None
    if at + 1 < len(values):  # BSD: script [opts] file command ...
        return walk.run(argv, at + 1, ctx, stdin, [], [], outer + [argv[:at + 1]], level)
    return None


def watch(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
          outer: list[list[Word]], level: int) -> Stream:
    """``watch [options] command``: run with ``sh -c`` unless ``-x``."""
    values = [w.value for w in argv]
    grammar_ = Grammar("bcCegprtwxh", "nqs", optional="d",
                       long_flags="beep color no-color errexit chgexit precise no-rerun no-title "
                       "no-wrap exec help version", long_values="interval equexit shotsfile",
                       long_optional="differences")
    parsed = parse_options(values, grammar_, 1)
    if isinstance(parsed, str) or parsed.index >= len(values):
        unknown_at(walk.out, None, f"runs a command through watch, whose {parsed}" if isinstance(parsed, str)
                   else "runs watch without a command", argv, writes, reads, ctx, outer)
        return None
    if parsed.has("-x", "--exec"):
        return walk.run(argv, parsed.index, ctx, stdin, writes, reads, outer + [argv[:parsed.index]], level)
    rest = argv[parsed.index:]
    add(walk.out, argv, writes, reads, ctx, outer)
    if not all(w.literal for w in rest):
        walk.out.unknown("runs code the guard cannot read: watch with a command computed at run time")
        return None
    walk.code(" ".join(w.value for w in rest), ctx, "watch")  # watch runs it with sh -c
    return None


def busybox(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
            outer: list[list[Word]], level: int) -> Stream:
    """``busybox APPLET ...``: the applet is the command."""
    if len(argv) < 2 or argv[1].value.startswith("-"):
        add(walk.out, argv, writes, reads, ctx, outer)
        return None
    return walk.run(argv, 1, ctx, stdin, writes, reads, outer + [argv[:1]], level)


def coproc(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
           outer: list[list[Word]], level: int) -> Stream:
    """``coproc [NAME] command``: a compound command is not read."""
    values = [w.value for w in argv]
    if len(values) < 2 or values[1] in ("{", "(") or values[2:3] in (["{"], ["("]):
        unknown_at(walk.out, None, "runs a coproc with a compound command, which the guard does not read",
                   argv, writes, reads, ctx, outer)
        return None
    return walk.run(argv, 1, ctx, stdin, writes, reads, outer + [argv[:1]], level)


def parallel(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
             outer: list[list[Word]], level: int) -> Stream:
    """``parallel [options] command ::: arguments``: the command is a shell string."""
    values = [w.value for w in argv]
    grammar_ = Grammar("kqvX mu", "jS", long_flags="keep-order will-cite bar dry-run verbose "
                       "line-buffer group ungroup quote xargs no-notice halt-on-error",
                       long_values="jobs halt delay timeout retries joblog results")
    parsed = parse_options(values, grammar_, 1)
    seps = (":::", "::::", ":::+", "::::+")
    end = next((i for i, v in enumerate(values) if v in seps), len(values))
    if isinstance(parsed, str) or parsed.index >= end:
        unknown_at(walk.out, None, f"runs commands through parallel, whose {parsed}" if isinstance(parsed, str)
                   else "runs the commands parallel reads from its input", argv, writes, reads, ctx, outer)
        return None
    command = argv[parsed.index:end]
    add(walk.out, argv, writes, reads, ctx, outer)
    if not all(w.literal for w in command):
        walk.out.unknown("runs code the guard cannot read: parallel with a command computed at run time")
        return None
    walk.code(" ".join(w.value for w in command), ctx, "parallel")
    return None


def su(walk: Walk, argv: list[Word], ctx: Ctx, stdin: Stream, writes: list[Target], reads: list[Target],
       outer: list[list[Word]], level: int) -> Stream:
    """``su [options] [user] -c COMMAND``: the command is a shell string."""
    index = add(walk.out, argv, writes, reads, ctx, outer)
    values = [w.value for w in argv]
    for i, v in enumerate(values[1:], 1):
        if v in ("-c", "--command", "-C", "--session-command") or v.startswith("--command="):
            code = v.split("=", 1)[1] if "=" in v else (values[i + 1] if i + 1 < len(values) else None)
            word = argv[i] if "=" in v else (argv[i + 1] if i + 1 < len(argv) else None)
            if code is None or word is None or not word.literal:
                note(walk.out, index, "runs code the guard cannot read: su -c", coverable=False)
            else:
                walk.code(code, ctx, "su -c")
    return None


def _is_name(text: str) -> bool:
    return bool(text) and (text[0].isalpha() or text[0] == "_") and all(c.isalnum() or c == "_" for c in text)
