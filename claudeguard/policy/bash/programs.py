"""What the guard knows about programs: which ones run another command (and with which option
grammar), which run code given inline, which shells read a program from where, and which file
operands a program reads or writes.

Every table here errs one way: a program or an option that is not listed is matched as it is
written (wrappers) or makes the command unreadable (an unknown option of a wrapper, a shell or an
interpreter), never looked through by guesswork.
"""

from __future__ import annotations

from claudeguard.policy.bash.options import Grammar

# -- wrappers: programs that run the command in their operands ---------------------------------

# name -> (grammar, operands between the options and the command). Looked through for every rule:
# the command they run is an invocation of its own; ``timeout 5 ls`` is allowed by ``Bash(ls *)``.
WRAPPERS: dict[str, tuple[Grammar, int]] = {
    "timeout": (Grammar("v", "ks", long_flags="foreground preserve-status verbose",
                        long_values="kill-after signal"), 1),
    "nice": (Grammar("", "n", long_values="adjustment", numeric=True), 0),
    "nohup": (Grammar(), 0),
    "setsid": (Grammar("cfw", long_flags="ctty fork wait"), 0),
    "stdbuf": (Grammar("", "ioe", long_values="input output error"), 0),
    "time": (Grammar("pvaq", "fo", long_flags="portability verbose append quiet", long_values="format output"), 0),
    "command": (Grammar("pvV"), 0),
    "builtin": (Grammar(), 0),
    "exec": (Grammar("cl", "a"), 0),
    "env": (Grammar("i0v", "uCS", long_flags="ignore-environment null debug",
                    long_values="unset chdir split-string",
                    long_optional="block-signal default-signal ignore-signal list-signal-handling"), 0),
    "xargs": (Grammar("0rtpxo", "aEdILnPs", optional="eil",
                      long_flags="null no-run-if-empty verbose interactive exit open-tty",
                      long_values="arg-file delimiter max-lines max-args max-procs max-chars process-slot-var",
                      long_optional="eof replace"), 0),
    "chrt": (Grammar("abdefiorRv", "TPD", long_flags="all-tasks batch deadline fifo idle other rr "
                     "reset-on-fork verbose", long_values="sched-runtime sched-period sched-deadline"), 1),
    "taskset": (Grammar("ac", long_flags="all-tasks cpu-list"), 1),
    "ionice": (Grammar("t", "cn", long_flags="ignore", long_values="class classdata"), 0),
    "unbuffer": (Grammar("p"), 0),
    "noglob": (Grammar(), 0),  # zsh precommand modifiers
    "nocorrect": (Grammar(), 0),
    "caffeinate": (Grammar("dimsu", "tw"), 0),
}
# They change who runs the command, or trace it: the wrapper is an invocation of its own as well
# (``sudo ls`` needs a rule that allows ``sudo ls`` and one that allows ``ls``).
PRIVILEGED: dict[str, tuple[Grammar, int]] = {
    "sudo": (Grammar("AbEHiKklnPSsVe", "CDghprRTtUu",
                     long_flags="askpass background bell edit set-home help login remove-timestamp "
                     "reset-timestamp list non-interactive preserve-groups stdin shell version validate",
                     long_values="close-from chdir group host prompt chroot role type command-timeout "
                     "other-user user", long_optional="preserve-env"), 0),
    "doas": (Grammar("nsL", "uC"), 0),
    "pkexec": (Grammar("", "", long_flags="disable-internal-agent keep-cwd version help", long_values="user"), 0),
    "runuser": (Grammar("lmpfP", "ugGsw", long_flags="login preserve-environment pty",
                        long_values="user group supp-group shell whitelist-environment"), 0),
    "chroot": (Grammar("", "", long_flags="skip-chdir", long_values="userspec groups"), 1),
    "strace": (Grammar("fFcCqrtTvVwxyzZhik", "oepsuEPabIOSX"), 0),
    "ltrace": (Grammar("fcCirStThV", "oepsuaADFlLnx"), 0),
}
# Options that mean "no command is run" (``command -v``, ``chrt -p``, ``ionice -p``).
NO_COMMAND_OPTIONS = {
    "command": ("-v", "-V"), "chrt": ("-p", "--pid", "-m", "--max"), "taskset": ("-p", "--pid"),
    "ionice": ("-p", "-P", "-u", "--pid", "--pgid", "--uid"), "sudo": ("-l", "-v", "-k", "-K", "--list",
                                                                       "--validate", "-V", "--version", "-h"),
}

# Programs that run commands the guard does not read (in a terminal multiplexer, later, in
# another namespace): asked whenever the guard must read what runs.
RUNS_UNREAD = frozenset({"tmux", "screen", "dtach", "abduco", "at", "batch", "systemd-run", "nsenter", "unshare",
                         "firejail", "bwrap", "proot", "fakeroot", "sg", "newgrp", "machinectl", "xterm",
                         "gnome-terminal", "konsole", "open", "xdg-open"})

# Package runners: where the command they run starts. name -> (subcommands that run a command;
# None: the program itself runs one), options taking a value.
_RUNNERS: dict[str, tuple[frozenset[str] | None, frozenset[str]]] = {
    "npx": (None, frozenset({"-p", "--package", "--prefix", "--cache", "--userconfig"})),
    "pnpx": (None, frozenset({"-p", "--package"})),
    "bunx": (None, frozenset({"-p", "--package"})),
    "uvx": (None, frozenset({"--from", "--with", "-w", "--python", "-p", "--index", "--index-url"})),
    "npm": (frozenset({"exec", "x"}), frozenset({"-p", "--package", "--prefix", "-w", "--workspace"})),
    "pnpm": (frozenset({"exec", "dlx"}), frozenset({"-C", "--dir", "--filter", "-F"})),
    "yarn": (frozenset({"exec", "dlx"}), frozenset({"-p", "--package"})),
    "bun": (frozenset({"x"}), frozenset()),
    "uv": (frozenset({"run"}), frozenset({"--with", "-w", "--python", "-p", "--project", "--directory", "--package",
                                          "--extra", "--group", "--env-file", "--index", "--index-url", "--from"})),
    "poetry": (frozenset({"run"}), frozenset({"-C", "--directory", "-P", "--project"})),
    "pdm": (frozenset({"run"}), frozenset({"-p", "--project"})),
    "hatch": (frozenset({"run"}), frozenset()),
    "pipx": (frozenset({"run"}), frozenset({"--spec", "--python", "--index-url"})),
    "bundle": (frozenset({"exec"}), frozenset({"--gemfile"})),
    "conda": (frozenset({"run"}), frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})),
    "mamba": (frozenset({"run"}), frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})),
}


def runner_start(values: list[str]) -> int | str | None:
    """For a package runner: the index where the command it runs starts; "-c CMD" for a shell
    string it runs; a reason when an option hides where the command starts; None when ``values``
    is not a runner running a command (``npm test`` runs a package script)."""
    name = values[0].rsplit("/", 1)[-1] if values else ""
    spec = _RUNNERS.get(name)
    if spec is None:
        return None
    subcommands, valued = spec
    i = 1
    if subcommands is not None:
        while i < len(values) and values[i].startswith("-"):
            i += 2 if values[i] in valued else 1
        if i >= len(values) or values[i] not in subcommands:
            return None
        i += 1
    while i < len(values):
        v = values[i]
        if v == "--":
            return i + 1
        if v in ("-c", "--call") and i + 1 < len(values):
            return "-c " + values[i + 1]
        if not v.startswith("-"):
            return i
        if v.split("=", 1)[0] in valued:
            i += 1 if "=" in v else 2
            continue
        if v.startswith("--") or len(v) == 2:
            i += 1  # a flag, as far as the guard can tell: a value it took would be read as the command
            continue
        return f"option {v} is not known"
    return i


# -- shells ------------------------------------------------------------------------------------

# The option grammar of each POSIX-style shell: short options taking a value, long options taking
# one, long flags (None: any ``--name``, as zsh). ``c`` anywhere in a cluster means "run the first
# operand"; ``s`` means "read the program from stdin".
SHELL_GRAMMARS: dict[str, tuple[str, frozenset[str], frozenset[str] | None]] = {
    "bash": ("oO", frozenset({"rcfile", "init-file"}), frozenset(
        "debug debugger dump-po-strings dump-strings help login noediting noprofile norc posix pretty-print "
        "protected restricted verbose version".split())),
    "sh": ("oO", frozenset(), frozenset()),
    "dash": ("o", frozenset(), frozenset()),
    "ash": ("o", frozenset(), frozenset()),
    "zsh": ("o", frozenset({"emulate"}), None),
    "ksh": ("oRT", frozenset(), frozenset()),
    "mksh": ("oRT", frozenset(), frozenset()),
    "yash": ("o", frozenset(), frozenset()),
    "posh": ("o", frozenset(), frozenset()),
}
# Shells whose -c scripts are not bash: their code is never read.
FOREIGN_SHELLS = frozenset({"fish", "csh", "tcsh", "pwsh", "powershell", "nu", "xonsh", "elvish", "rc", "es"})

# -- interpreters: code given inline -----------------------------------------------------------

PYTHON = Grammar("bBdEhiIOqsSuvVxRP", "WXcm", long_flags="help version help-env help-xoptions help-all",
                 long_values="check-hash-based-pycs")
# node, nodejs and bun take hundreds of long flags: any --name is a flag except these.
NODE_VALUES = frozenset({"eval", "print", "require", "import", "loader", "experimental-loader", "input-type",
                         "conditions", "env-file", "title", "inspect-port", "stack-size", "max-old-space-size",
                         "test-reporter", "test-name-pattern", "watch-path", "redirect-warnings", "icu-data-dir"})
NODE_SHORT = Grammar("ivhc", "eprC")
PERL = Grammar("acfhnpsStTuUvVwWX", "eEI", optional="dDFimMx", digits="0lC")
RUBY = Grammar("acdhlnpsSvwyU", "eIrCEF", optional="iKTWx", digits="0")
# name -> the options whose value is code; any other interpreter's own options are not parsed, so
# these are looked for in every argument (a false "asks" is the cost, never a miss).
INLINE_ANYWHERE: dict[str, tuple[str, ...]] = {
    "php": ("-r", "-B", "-R", "-E"), "lua": ("-e",), "luajit": ("-e",), "Rscript": ("-e", "--expr"),
    "R": ("-e",), "osascript": ("-e",), "julia": ("-e", "-E", "--eval", "--print"), "expect": ("-c",),
    "ipython": ("-c",), "ipython3": ("-c",), "groovy": ("-e",), "scala": ("-e",), "jshell": (),
    "pwsh": ("-c", "-Command", "-command", "-EncodedCommand", "-e", "-ec"), "powershell": ("-c", "-Command"),
    "csh": ("-c",), "tcsh": ("-c",), "fish": ("-c", "--command", "-C", "--init-command"),
    "deno": ("eval", "-e", "--eval"), "tclsh": (), "wish": (), "irb": (), "gdb": ("-ex", "--eval-command", "-x"),
    "vim": ("-c", "+", "--cmd", "-S"), "nvim": ("-c", "+", "--cmd", "-S"), "vi": ("-c", "+"),
    "emacs": ("--eval", "-l", "--load", "-f", "--funcall", "--batch"),
}
# Programs whose own command language can run a shell command: the text that does it.
SHELL_ESCAPES: dict[str, tuple[str, ...]] = {
    "sqlite3": (".shell", ".system", ".sh ", ".once", ".output", ".import"), "psql": ("\\!", "\\o", "\\copy"),
    "mysql": ("\\!", "system ", "\\T"), "mariadb": ("\\!", "system "), "duckdb": (".shell", ".system", ".sh "),
    "ed": ("!",), "ex": ("!",), "gnuplot": ("system", "!"), "bc": (), "dc": ("!",),
}
# Python modules that run code given in their arguments.
PYTHON_CODE_MODULES = frozenset({"timeit", "pdb", "code", "trace", "runpy"})


def is_python(name: str) -> bool:
    """python, python3, python3.12, pypy3 ..."""
    for stem in ("python", "pypy"):
        if name.startswith(stem):
            rest = name[len(stem):]
            return all(c.isdigit() or c == "." for c in rest)
    return False


def is_node(name: str) -> bool:
    return name in ("node", "nodejs", "bun") or (name.startswith("node") and name[4:].isdigit())


AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
AWK = Grammar("bcCgMnNOPrsStV", "Fvfeil", optional="dDLop",
              long_flags="characters-as-bytes traditional copyright gen-pot bignum non-decimal-data "
              "use-lc-numeric optimize posix re-interval no-optimize sandbox lint-old version help",
              long_values="field-separator assign file source exec include load",
              long_optional="dump-variables debug lint pretty-print profile")
SEDS = frozenset({"sed", "gsed"})
SED = Grammar("nrEsuz", "efl", optional="i",
              long_flags="quiet silent debug posix regexp-extended separate sandbox unbuffered null-data "
              "zero-terminated follow-symlinks help version",
              long_values="expression file line-length", long_optional="in-place")

# -- git ---------------------------------------------------------------------------------------

# Options before git's subcommand that are normalised away before matching (``git -C dir status``
# is matched as ``git status``): name -> takes a value.
GIT_GLOBAL = {
    "-C": True, "--git-dir": True, "--work-tree": True, "--namespace": True, "--super-prefix": True,
    "--no-pager": False, "-P": False, "-p": False, "--paginate": False, "--bare": False,
    "--no-replace-objects": False, "--literal-pathspecs": False, "--glob-pathspecs": False,
    "--noglob-pathspecs": False, "--icase-pathspecs": False, "--no-optional-locks": False,
    "--no-advice": False, "--html-path": False, "--man-path": False, "--info-path": False,
    "--version": False, "--help": False,
}
# ``git -c KEY=VALUE`` keys that run nothing (any other key may name a program, an alias, a hook
# directory ...). A trailing dot is a prefix.
GIT_HARMLESS_KEYS = (
    "color.", "advice.", "user.name", "user.email", "author.", "committer.", "init.defaultbranch",
    "core.quotepath", "core.autocrlf", "core.safecrlf", "core.abbrev", "core.filemode", "core.ignorecase",
    "log.", "format.pretty", "column.", "status.", "gc.auto", "maintenance.auto", "safe.directory",
    "pull.rebase", "pull.ff", "merge.ff", "push.default", "fetch.prune", "i18n.", "diff.noprefix",
    "diff.mnemonicprefix", "diff.renames", "diff.relative", "core.longpaths", "protocol.version",
)
GIT_HARMLESS_VALUES = {"core.pager": ("", "cat", "less", "less -R", "less -FRX"),
                       "commit.gpgsign": ("false",), "tag.gpgsign": ("false",), "core.fsmonitor": ("false",)}
# Subcommand options whose value is a program or a shell command.
GIT_CODE_OPTIONS = ("--upload-pack", "--receive-pack", "--exec", "--extcmd", "--tool", "--config", "--template")
GIT_CODE_SHORT = {"fetch": ("-u",), "clone": ("-u", "-c"), "pull": ("-u",), "ls-remote": ("-u",),
                  "rebase": ("-x",), "difftool": ("-x", "-t"), "mergetool": ("-t",), "archive": ()}
GIT_CODE_SUBCOMMANDS = {"filter-branch": "git filter-branch", "filter-repo": "git filter-repo"}

# -- files a command reads or writes -----------------------------------------------------------

# Output files given by an option (the value, or the next word).
OUTPUT_OPTIONS: dict[str, tuple[str, ...]] = {
    "sort": ("-o", "--output"), "gsort": ("-o", "--output"),
    "curl": ("-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
             "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc"),
    "wget": ("-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P",
             "--directory-prefix", "--save-cookies"),
    "cc": ("-o",), "gcc": ("-o",), "g++": ("-o",), "c++": ("-o",), "clang": ("-o",), "clang++": ("-o",),
    "ld": ("-o",), "as": ("-o",), "rustc": ("-o",), "go": ("-o",), "patch": ("-o", "--output", "-r"),
    "time": ("-o", "--output"), "pandoc": ("-o", "--output"),
    "script": ("-T", "-B", "-I", "-O", "--log-timing", "--log-io", "--log-in", "--log-out"),
    "openssl": ("-out", "-keyout"), "gh": ("-o", "--output"),
    "diff": (), "uniq": (), "xxd": (),
}
# getopt-style programs among them: an output option may end a cluster (curl -sSLo F).
CLUSTERED = frozenset({"curl", "wget", "sort", "gsort", "patch", "time"})
# Programs whose file operands they write (or remove, or change).
OPERAND_WRITERS = frozenset({
    "rm", "rmdir", "mkdir", "touch", "chmod", "chown", "chgrp", "truncate", "shred", "unlink", "mkfifo",
    "mknod", "chattr", "setfacl",
})
# Programs that copy or link: the last operand (or -t DIR) is written, the others are read.
COPIERS = frozenset({"cp", "mv", "ln", "link", "install", "rsync", "scp"})
# Programs whose file operands they read (everything that is not an option is taken as a file:
# a pattern or a count read as a path never matches a protected file; a missed file would).
READERS = frozenset({
    "cat", "tac", "head", "tail", "less", "more", "wc", "nl", "cut", "paste", "sort", "uniq", "grep", "egrep",
    "fgrep", "rg", "ag", "diff", "cmp", "comm", "file", "stat", "strings", "xxd", "od", "hexdump", "base64",
    "md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum", "jq", "yq", "source", ".", "bat", "view", "tr",
    "column", "fold", "fmt", "expand", "unexpand", "iconv", "zcat", "gunzip", "bzcat", "xzcat", "tee",
})
PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "jq", "yq"})
SAFE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})

# -- variables ---------------------------------------------------------------------------------

# Setting one of these changes which code a later command runs: never looked through.
RISKY_VARS = frozenset({
    "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH", "GLOBIGNORE",
    "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT",
    "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
    "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL", "GIT_DIR", "GIT_WORK_TREE",
    "GIT_TEMPLATE_DIR", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "LESSOPEN", "LESSCLOSE", "BROWSER",
    "RUSTC_WRAPPER", "RUSTC", "CC", "CXX", "LD", "MAKEFLAGS", "MAKESHELL", "SHELL", "HOME", "XDG_CONFIG_HOME",
    "ZDOTDIR", "TMPDIR", "EXECIGNORE", "HISTFILE", "BASH_LOADABLES_PATH", "LESSKEY", "INPUTRC",
})
RISKY_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "NPM_CONFIG_", "npm_config_", "PIP_", "CLAUDEGUARD_")
HARMLESS_PAGERS = frozenset({"", "cat", "less", "more"})


def risky_assignment(name: str, value: str | None) -> bool:
    """Whether ``NAME=value`` may change which code a later command runs."""
    if name in ("GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER") and value in HARMLESS_PAGERS:
        return False
    return name in RISKY_VARS or name.startswith(RISKY_PREFIXES)


# make: variables that replace the recipe shell or inject makefile text
MAKE_RISKY = frozenset({"SHELL", ".SHELLFLAGS", "MAKESHELL", "MAKEFLAGS", "MFLAGS", "MAKEFILES", "MAKEFILE_LIST"})
