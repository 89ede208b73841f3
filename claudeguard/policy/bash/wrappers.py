"""The look-through: which leading words only change how a command runs, and what they wrap.

Wrappers that only change how a command runs (``timeout``, ``nice``, ``nohup``, ``env VAR=x``,
``xargs``, ``command``, ``builtin``, ``exec``, ``time``, ``stdbuf``, ``ionice``) are looked through
for every rule (``WRAPPERS``). Privilege and tracing wrappers (``sudo``, ``doas``, ``strace``,
``watch``, ...) change who or what runs it: they are looked through for deny and ask rules and for
"does it write" only (``DENY_WRAPPERS``). ``sh -c 'script'`` is found by ``shell_script``; the
script itself is split by ``split``. Setting a variable that changes which code runs (``PATH``,
``LD_PRELOAD``, ``GIT_SSH_COMMAND``, ...) is never looked through (``assignment_risk``).
"""

from __future__ import annotations

import re

from claudeguard.policy.bash.lexer import ASSIGN_RE, Word

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

Spec = tuple[frozenset[str], frozenset[str], int]  # (flags, options taking a value, positionals)

# Wrappers looked through for every rule.
WRAPPERS: dict[str, Spec] = {
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
DENY_WRAPPERS: dict[str, Spec] = {
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
SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh"}
OTHER_SHELLS = ("fish", "csh", "tcsh", "pwsh", "nu", "xonsh")  # their -c scripts are not analysed
_STD_DIRS = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/opt/homebrew/bin/")


def std_name(word: str) -> str | None:
    """The command name if ``word`` is a bare name or a path in a standard system directory."""
    if "/" not in word:
        return word
    for d in _STD_DIRS:
        if word.startswith(d) and "/" not in word[len(d):]:
            return word[len(d):]
    return None


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def skip_options(words: list[Word], k: int, spec: Spec, name: str) -> int | None:
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


def assignment_risk(value: str) -> str | None:
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


def shell_script(words: list[Word]) -> Word | str | None:
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
