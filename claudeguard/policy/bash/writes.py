"""Does a command write? For one command's argv (wrappers already looked through).

Conservative lists: a command is a writer when it is known to write (``rm``, ``tee``, ``git
commit``, ``sed -i``, ``curl -o``, a package manager's install, ...) or can run arbitrary code
(interpreters, build tools, ``find -exec``), unless its arguments show a read-only use (``git
status``, ``python3 --version``, ``tar -t``). Read-only agent types are denied every writing part.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any


class LazyRe:
    """A regex compiled on first use (import time matters more than the first match)."""

    __slots__ = ("_pattern", "_flags", "_rx")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._rx: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self._pattern, self._flags)
        return getattr(rx, name)


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word else word


_WRITERS = {
    "rm", "rmdir", "mv", "cp", "mkdir", "touch", "tee", "chmod", "chown", "chgrp", "ln", "link", "unlink",
    "dd", "truncate", "install", "shred", "rsync", "scp", "sftp", "patch", "mkfifo", "mknod", "mktemp",
    "split", "csplit", "chattr", "setfacl", "ed", "ex", "vi", "vim", "nvim", "nano", "emacs", "pico",
    "kill", "pkill", "killall", "crontab", "at", "mount", "umount", "sudo", "doas", "su", "ssh",
    "systemctl", "service", "launchctl", "reboot", "shutdown", "useradd", "userdel", "usermod", "passwd",
    "make", "cmake", "ninja", "gradle", "gradlew", "mvn", "ant", "bazel", "gcc", "g++", "cc", "c++",
    "clang", "clang++", "rustc", "javac", "tsc", "webpack", "vite", "esbuild", "rollup", "npx", "pnpx",
    "bunx", "source", ".", "eval", "exec", "open", "xdg-open", "trap", "alias", "nc", "ncat", "socat",
    "rename", "renice", "sponge", "git-lfs", "terraform", "ansible", "ansible-playbook", "helm",
    "firebase", "vercel", "heroku", "gh", "aws", "gcloud", "az", "sqlite3", "mysql", "psql", "redis-cli",
    "mongo", "mongosh",
}
_INTERPRETERS = {
    "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "perl", "ruby",
    "php", "lua", "luajit", "Rscript", "R", "osascript", "java", "tclsh", "wish", "julia", "swift",
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "pwsh", "expect", "irb",
    "ipython", "jshell", "ts-node", "tsx", "groovy", "scala", "kotlin", "dotnet", "go", "cargo",
}
_VERSION_ONLY = {"--version", "-V", "-v", "--help", "-h", "version", "help"}
_GIT_READONLY = {
    "status", "log", "diff", "show", "blame", "annotate", "grep", "ls-files", "ls-tree", "ls-remote",
    "rev-parse", "describe", "shortlog", "cat-file", "rev-list", "show-ref", "for-each-ref", "name-rev",
    "merge-base", "count-objects", "var", "help", "version", "whatchanged", "range-diff", "diff-tree",
    "diff-files", "diff-index", "check-ignore", "check-attr", "check-ref-format", "verify-commit",
    "verify-tag", "cherry", "show-branch", "--version", "--help",
}
_PKG_TOOLS = {"npm", "pnpm", "yarn", "pip", "pip3", "uv", "poetry", "pipenv", "conda", "mamba", "gem",
              "bundle", "composer", "apt", "apt-get", "brew", "dnf", "yum", "pacman", "apk", "port",
              "docker", "podman", "kubectl", "nix", "snap", "flatpak", "rustup", "pipx", "hatch", "pdm"}
_PKG_READONLY = {"list", "ls", "ll", "la", "view", "info", "show", "outdated", "search", "help", "freeze",
                 "check", "version", "--version", "-v", "-V", "--help", "-h", "root", "prefix", "bin", "whoami",
                 "explain", "why", "ps", "images", "inspect", "logs", "get", "describe", "top", "env", "tree",
                 "config", "doctor", "audit", "status", "policy", "depends", "rdepends", "query"}
_COMPRESSORS = {"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4", "compress",
                "uncompress", "zip", "7z", "7za", "rar", "unrar", "lzma", "unlzma", "brotli"}
_SED_WRITE_RE = LazyRe(r"(?:^|[;{}\n])\s*(?:[0-9$]+|/[^/]*/)?\s*[wWe](?:\s|$)|/[gpIiMmeE0-9]*[wWe](?:\s|$)")


def argv_writes(argv: list[str]) -> bool:
    """Whether a command (wrappers already removed) is on the conservative list of writers."""
    if not argv:
        return False
    name = basename(argv[0])
    args = argv[1:]
    if name in _WRITERS:
        return True
    if name in _INTERPRETERS or (name.startswith(("python", "pypy", "node"))
                                 and re.fullmatch(r"python[0-9.]*|pypy[0-9.]*|node[0-9]*", name)):
        if name == "go":
            return not (args and args[0] in ("version", "env", "list", "doc", "help"))
        if name == "cargo":
            return not (args and args[0] in ("--version", "version", "help", "metadata", "tree", "search"))
        return not (args and set(args) <= _VERSION_ONLY)
    if name in ("sed", "gsed"):
        for a in args:
            if a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a[1:]
                                              and not a.startswith("-e") and not a.startswith("-f")):
                return True
        return any(_SED_WRITE_RE.search(a) for a in args if not a.startswith("-"))
    if name in ("awk", "gawk", "mawk", "nawk"):
        return any((">" in a or "system" in a or "|" in a or "inplace" in a) for a in args)
    if name == "find":
        return any(a in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
                   for a in args)
    if name in ("sort", "gsort"):
        return any(a == "-o" or a.startswith("--output") or (a.startswith("-o") and len(a) > 2) for a in args)
    if name in ("uniq", "xxd"):  # a second file operand is the output
        return len([a for a in args if not a.startswith("-")]) >= 2
    if name == "curl":
        return any(a in ("-o", "-O", "--output", "--remote-name", "--remote-name-all", "-D", "--dump-header",
                         "-c", "--cookie-jar", "-T", "--upload-file", "--create-dirs", "-J")
                   or a.startswith(("--output=", "--dump-header=", "--cookie-jar=", "--upload-file="))
                   or (re.fullmatch(r"-[a-zA-Z]+", a) and any(c in a for c in "oODcTJ")) for a in args)
    if name == "wget":
        return not ({"-O-", "--spider", "--output-document=-"} & set(args)
                    or any(a == "-O" and b == "-" for a, b in zip(args, args[1:], strict=False)))
    if name in ("tar", "gtar", "bsdtar"):
        first = args[0] if args else ""
        listing = "--list" in args or (first and not first.startswith("--") and "t" in first.lstrip("-")
                                      and not any(c in first for c in "cxruA"))
        return not listing
    if name == "unzip":
        return not any(a in ("-l", "-t", "-v", "-Z", "-p", "-z") for a in args)
    if name in _COMPRESSORS:
        return not any(a in ("-c", "--stdout", "-l", "--list", "-t", "--test") for a in args)
    if name == "git":
        return _git_writes(args)
    if name in _PKG_TOOLS:
        sub = next((a for a in args if not a.startswith("-")), None)
        if sub is None:
            return not (args and set(args) <= _VERSION_ONLY)
        if sub in ("run", "run-script", "exec", "x", "dlx", "test", "start"):
            return True
        return sub not in _PKG_READONLY or any(a in ("--fix", "fix", "set", "delete", "edit", "rm") for a in args)
    return False


def _git_writes(args: list[str]) -> bool:
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-C", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif a in ("-c", "--exec-path", "--config-env") or a.startswith(("-c", "--config-env")):
            return True  # config on the command line can run programs
        elif a.startswith("-"):
            i += 1
        else:
            break
    if i >= len(args):
        return False
    sub, rest = args[i], args[i + 1:]
    if any(r.startswith("--output") for r in rest):
        return True
    if sub in _GIT_READONLY:
        return False
    positional = [r for r in rest if not r.startswith("-")]
    if sub == "branch":
        writing = {"-d", "-D", "-m", "-M", "-c", "-C", "--delete", "--move", "--copy", "-f", "--force", "-u",
                   "--set-upstream-to", "--unset-upstream", "--edit-description", "--track", "-t"}
        if writing & set(rest):
            return True
        listing = {"-l", "--list", "-a", "--all", "-r", "--remotes", "--contains", "--merged", "--no-merged",
                   "--points-at"}
        return bool(positional) and not (listing & set(rest))
    if sub == "tag":
        if {"-d", "--delete", "-a", "-s", "-f", "-m", "-F", "-u", "--annotate", "--sign", "--force"} & set(rest):
            return True
        return bool(positional) and not ({"-l", "--list"} & set(rest))
    if sub == "remote":
        return bool(positional) and positional[0] not in ("show", "get-url")
    if sub == "stash":
        return not (positional and positional[0] in ("list", "show"))
    if sub == "config":
        if {"--add", "--unset", "--unset-all", "--replace-all", "--edit", "-e", "--rename-section",
                "--remove-section"} & set(rest):
            return True
        reading = any(r.startswith("--get") or r in ("--list", "-l") for r in rest)
        return not reading and len(positional) >= 2
    if sub in ("worktree", "submodule", "notes", "reflog", "lfs"):
        return not (positional and positional[0] in ("list", "show", "status"))
    return True
