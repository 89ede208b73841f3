"""The look-through: from simple commands to the parts rules are matched on (``split_command``).

Leading assignments are stripped, but setting a variable that changes which code runs (``PATH``,
``LD_PRELOAD``, ``GIT_SSH_COMMAND``, ...) makes the split "cannot tell".
Wrappers that only change how a command runs (``timeout``, ``nice``, ``nohup``, ``env VAR=x``,
``xargs``, ``command``, ``builtin``, ``exec``, ``time``, ``stdbuf``, ``ionice``) are looked through
for every rule (``WRAPPERS``). Privilege and tracing wrappers (``sudo``, ``doas``, ``strace``,
``watch``, ...) change who or what runs it: they are looked through for deny and ask rules and for
"does it write" only (``DENY_WRAPPERS``). ``sh -c 'script'`` and ``find -exec CMD ;`` are split
into parts of their own. Each ``Part`` carries every reading deny and ask rules must see (quotes
removed, paths reduced to names, privilege wrappers removed, braces expanded) and whether it
writes (``writes``). After a fatal parse error the commands read so far still count, for denies.
"""

from __future__ import annotations

import re

from claudeguard.policy.bash.lexer import ASSIGN_RE, MAX_DEPTH, Cmd, Fatal, Redir, Word, basename, normalize_space
from claudeguard.policy.bash.parser import Parser
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


def split_command(command: object) -> Split:
    """The simple commands of ``command`` (nested ones included), each with its matching forms; a
    command that is not a string splits into nothing, not ok."""
    if not isinstance(command, str):
        return Split([], False, "the command is not a string")
    if "\0" in command:
        return Split([], False, "the command holds a NUL byte")
    return _split(command, 0)


def command_writes(command: str) -> bool:
    """True when any part of ``command`` writes a file, or when the command cannot be read."""
    split = split_command(command)
    return not split.ok or any(p.writes for p in split.parts)


# Variables whose value changes which code a command runs: setting them is never looked through.
_RISKY_ENV = {
    "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH",
    "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE",
    "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
    "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL",
    "GIT_DIR", "GIT_WORK_TREE", "GIT_TEMPLATE_DIR", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND",
    "LESSOPEN", "LESSCLOSE", "BROWSER", "RUSTC_WRAPPER", "RUSTC", "CC", "CXX", "LD", "MAKEFLAGS",
    "HOME", "XDG_CONFIG_HOME", "ZDOTDIR", "TMPDIR",
}
_RISKY_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "NPM_CONFIG_", "PIP_")
_HARMLESS_PAGERS = {"", "cat", "less", "more"}

_Spec = tuple[frozenset[str], frozenset[str], int]  # (flags, options taking a value, positionals)

# Wrappers looked through for every rule.
WRAPPERS: dict[str, _Spec] = {
    "timeout": (frozenset({"--foreground", "--preserve-status", "-v", "--verbose"}),
                frozenset({"-k", "--kill-after", "-s", "--signal"}), 1),
    "nice": (frozenset(), frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), frozenset(), 0),
    "noglob": (frozenset(), frozenset(), 0),  # zsh precommand modifiers
    "nocorrect": (frozenset(), frozenset(), 0),
    "builtin": (frozenset(), frozenset(), 0),
    "command": (frozenset({"-p"}), frozenset(), 0),
    "exec": (frozenset({"-c", "-l"}), frozenset({"-a"}), 0),
    "time": (frozenset({"-p", "-v", "--verbose", "--portability", "-a", "--append", "-q", "--quiet"}),
             frozenset({"-f", "--format", "-o", "--output"}), 0),
    "stdbuf": (frozenset(), frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-t", "--ignore"}), frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "env": (frozenset({"-i", "-", "--ignore-environment", "-0", "--null", "-v", "--debug"}),
            frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "xargs": (frozenset({"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-p", "--interactive",
                         "-x", "--exit", "-o", "--open-tty", "-e", "-i", "-l"}),
              frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args",
                         "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var", "--eof",
                         "--replace", "--max-lines"}), 0),
}
# Looked through for deny/ask rules and for "does it write" only: they change who runs it.
DENY_WRAPPERS: dict[str, _Spec] = {
    "sudo": (frozenset({"-A", "-b", "-E", "-H", "-i", "-k", "-K", "-n", "-P", "-S", "-s", "-e", "--preserve-env",
                        "--login", "--shell", "--non-interactive", "--background", "--askpass", "--stdin"}),
             frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R", "--user", "--group",
                        "--host", "--prompt", "--chdir", "--role", "--type", "--other-user", "--close-from",
                        "--command-timeout", "--chroot"}), 0),
    "doas": (frozenset({"-n", "-s"}), frozenset({"-u", "-C"}), 0),
    "setsid": (frozenset({"-c", "-f", "-w", "--ctty", "--fork", "--wait"}), frozenset(), 0),
    "unbuffer": (frozenset({"-p"}), frozenset(), 0),
    "watch": (frozenset({"-b", "-c", "-d", "-e", "-g", "-t", "-x", "-p", "--beep", "--color", "--differences",
                         "--errexit", "--chgexit", "--no-title", "--exec", "--precise"}),
              frozenset({"-n", "--interval", "-q"}), 0),
    "strace": (frozenset({"-f", "-ff", "-c", "-C", "-q", "-qq", "-t", "-tt", "-ttt", "-T", "-v", "-x", "-xx",
                          "-y", "-yy", "-k", "-i", "-r", "-w", "-z", "-Z", "-n"}),
               frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-O", "-S", "-X"}), 0),
    "ltrace": (frozenset({"-f", "-c", "-C", "-i", "-r", "-S", "-t", "-tt", "-ttt", "-T"}),
               frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-A", "-D", "-F", "-l", "-L", "-n", "-x"}), 0),
    "chrt": (frozenset({"-a", "-b", "-d", "-f", "-i", "-o", "-r", "-R", "-v", "--all-tasks", "--batch",
                        "--fifo", "--idle", "--other", "--rr"}), frozenset(), 1),
    "taskset": (frozenset({"-a", "-c", "--all-tasks", "--cpu-list"}), frozenset(), 1),
    "caffeinate": (frozenset({"-d", "-i", "-m", "-s", "-u"}), frozenset({"-t", "-w"}), 0),
    "flock": (frozenset({"-s", "-x", "-n", "-o", "-e", "-u", "--shared", "--exclusive", "--nonblock", "--close"}),
              frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), 1),
    "chroot": (frozenset(), frozenset({"--userspec", "--groups"}), 1),
    "repeat": (frozenset(), frozenset(), 1),  # zsh: repeat N cmd
}
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh"}
_OTHER_SHELLS = ("fish", "csh", "tcsh", "pwsh", "nu", "xonsh")  # their -c scripts are not analysed
_STD_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/opt/homebrew/bin/")


def _std_name(word: str) -> str | None:
    """The command name if ``word`` is a bare name or a path in a standard system directory."""
    if "/" not in word:
        return word
    for d in _STD_DIRS:
        if word.startswith(d) and "/" not in word[len(d):]:
            return word[len(d):]
    return None


def _skip_options(words: list[Word], k: int, spec: _Spec, name: str) -> int | None:
    """Index of the wrapped command after the wrapper at ``k``, or None when it cannot be told."""
    flags, takes_value, positionals = spec
    j = k + 1
    while j < len(words):
        w = words[j]
        if not w.static:
            return None
        v = w.value
        if v == "--":
            j += 1
            break
        if name == "env" and ASSIGN_RE.match(v):
            break
        if not v.startswith("-") or v == "-" and name != "env":
            break
        if v in flags:
            j += 1
        elif v in takes_value:
            j += 2
        elif v.startswith("--") and "=" in v and v.split("=", 1)[0] in takes_value:
            j += 1
        elif not v.startswith("--") and v[:2] in takes_value:
            j += 1  # value attached: -n10, -oL
        elif name == "nice" and re.fullmatch(r"-[0-9]+", v):
            j += 1
        elif name == "xargs" and v[:2] in ("-e", "-i", "-l"):
            j += 1
        elif name in ("sudo", "strace", "ltrace", "watch") and not v.startswith("--") and all(
                "-" + c in flags for c in v[1:]):
            j += 1  # clustered flags: -nE
        else:
            return None
    if name == "env":
        while j < len(words) and words[j].static and ASSIGN_RE.match(words[j].value):
            j += 1
    j += positionals
    return j if j < len(words) else None


def _assignment_risk(value: str) -> str | None:
    """Why ``NAME=value`` may change which code runs (a note for the split), or None."""
    m = ASSIGN_RE.match(value)
    if not m:
        return None
    name = m.group(1)
    if name in ("GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER") and value[m.end():] in _HARMLESS_PAGERS:
        return None
    if name in _RISKY_ENV or name.startswith(_RISKY_ENV_PREFIXES):
        return f"sets {name}"
    return None


def _shell_script(words: list[Word]) -> Word | str | None:
    """For ``sh [opts] -c SCRIPT``: the script word; a reason string when unclear; None if no -c."""
    j = 1
    has_c = False
    while j < len(words):
        w = words[j]
        if not w.static:
            if has_c:
                break  # this is the (dynamic) script
            return "shell options computed at run time"
        v = w.value
        if v == "--":
            j += 1
            break
        if v in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            j += 2
            continue
        if v.startswith("--"):
            j += 1
            continue
        if len(v) > 1 and v[0] in "-+":
            if v[0] == "-" and "c" in v[1:]:
                has_c = True
            j += 1
            continue
        break
    if not has_c:
        return None
    if j >= len(words):
        return "sh -c without a script"
    return words[j]


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


_UNSAFE_IN_PLAIN = frozenset(";&|<>()$`\\\"'")


def _plain_safe(value: str) -> bool:
    """No blank, quote or operator in a word: joined by spaces, the words read back unchanged."""
    return _UNSAFE_IN_PLAIN.isdisjoint(value) and not any(c.isspace() for c in value)


def _build(cmd: Cmd, depth: int, out: _Built) -> None:
    """Turn one simple command into parts (several for ``sh -c`` and ``find -exec``)."""
    words = cmd.words
    extra_readings: list[str] = []
    extra_writes = False
    full = _text(words, cmd.redirs)
    redirs_write = any(redirect_writes(r) for r in cmd.redirs)
    k = 0
    while k < len(words) and "=" in words[k].src and ASSIGN_RE.match(words[k].src):
        risk = _assignment_risk(words[k].value)
        if risk:
            out.note(risk)
        k += 1
    if k < len(words) and "=" in words[k].src and re.match(r"[A-Za-z_][A-Za-z0-9_]*\[", words[k].src):
        out.note("array assignment")
    # Allow-level wrappers.
    deny_starts: list[int] = []
    while k < len(words):
        w = words[k]
        name = _std_name(w.value) if w.static else None
        if name == "command" and k + 1 < len(words) and words[k + 1].value in ("-v", "-V"):
            break
        if name in WRAPPERS:
            j = _skip_options(words, k, WRAPPERS[name], name)
            if j is None:
                if name == "env" and any(x.value in ("-S", "--split-string") or x.value.startswith("--split-string")
                                         for x in words[k + 1:]):
                    out.note("env -S splits a string into a command")
                break
            if name == "env":
                for x in words[k + 1:j]:
                    risk = _assignment_risk(x.value)
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
        j = _skip_options(words, d, spec, name or "")
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
    if inner and inner[0].static and basename(inner[0].value) in _SHELLS:
        script = _shell_script(inner)
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
    if inner and inner[0].static and basename(inner[0].value) in _OTHER_SHELLS:
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
    plain_ok = all(_plain_safe(v) for v in argv)
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
