"""Is a program a Claude Code CLI, and which version, however it was installed (issue 36).

The npm layout has a ``package.json`` beside the binary (``@anthropic-ai/claude-code``, or the
platform package ``@anthropic-ai/claude-code-linux-x64`` whose ``claude`` is the same binary);
the native installer's (``~/.local/bin/claude`` -> ``~/.local/share/claude/versions/2.1.330``)
and a copy an IDE bundles have none. For those the binary itself is asked, once: a native
binary that carries Claude Code's marks (``MARKS``, looked for without running it) is run with
``--version``, and an answer of the form ``2.1.330 (Claude Code)`` is believed. The answer, and
"not a Claude Code CLI" for a large binary without the marks, is cached in the user's state dir
(``cli-versions.json``, 0600 in the 0700 dir) under the binary's stat key (device, inode, size,
mtime, ctime): a replaced or touched binary is asked again. A program that is not a Claude Code
CLI (a stand-in script, ``/bin/true``) is never run here: its version is unknown.

Where the version decides something (the argv table, who asks in -p, the box's treatment of
hooks, verification) this module is the one reader. On the launcher's pass-through path it
costs a stat and a small JSON read (CPython's scanner, as ``cli_tables.load`` reads): no
``json``, no ``re``, no process, but on the first run of a new binary.
"""

from __future__ import annotations

import os

from claudeguard.json_read import parse

PACKAGES = ("@anthropic-ai/claude-code", "@anthropic-ai/claude-code-")  # the CLI, and its platform packages
VERSIONS_FILE = "cli-versions.json"
# A native build of Claude Code is a Bun executable of 200-400 MB that holds both: the suffix of
# its own `--version` line and its package's name. Smaller files are not looked into.
MARKS = (b"(Claude Code)", b"@anthropic-ai/claude-code")
MIN_NATIVE_SIZE = 16 << 20
NATIVE_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")  # ELF, Mach-O 64, fat Mach-O
ASK_TIMEOUT_S = 30.0  # the binary's own --version: ~0.1 s; a loaded machine gets room
KEEP = 64  # binaries the cache remembers


def package_version(real_cli: str | None) -> str | None:
    """The version the npm ``package.json`` above the resolved binary names (the CLI's package
    or its platform package's), else None. os and the JSON scanner only."""
    if not real_cli:
        return None
    path = os.path.realpath(real_cli)
    for _ in range(4):
        path = os.path.dirname(path)
        try:
            with open(os.path.join(path, "package.json"), "rb") as fh:
                raw = fh.read(1 << 20)
            data = parse(raw.decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        name = data.get("name") if isinstance(data, dict) else None
        if (isinstance(name, str) and (name == PACKAGES[0] or name.startswith(PACKAGES[1]))
                and isinstance(data.get("version"), str)):
            return str(data["version"])
    return None


def stat_key(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _cache_path() -> str:
    from claudeguard.paths import state_dir_text

    return os.path.join(state_dir_text(), VERSIONS_FILE)


def _read_cache() -> dict[str, object]:
    """The cache's entries; empty when missing, unreadable, a link, not ours or writable by others."""
    try:
        fd = os.open(_cache_path(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or (st.st_mode & 0o170000) != 0o100000:
            return {}
        raw = os.read(fd, 1 << 20)
        data = parse(raw.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    finally:
        os.close(fd)
    entries = data.get("binaries") if isinstance(data, dict) else None
    return entries if isinstance(entries, dict) else {}


def cached(key: list[int]) -> tuple[bool, str | None]:
    """(known, version) for the binary with stat ``key``: known False when the cache does not hold it."""
    hit = _read_cache().get(f"{key[0]}:{key[1]}")
    if not isinstance(hit, dict) or hit.get("key") != key:
        return False, None
    version = hit.get("cli_version")
    return True, version if isinstance(version, str) else None


def _remember(key: list[int], path: str, version: str | None) -> None:
    """Cache what the binary said (best effort: an unwritable state dir is asked again next time)."""
    import json

    from claudeguard.errors import GuardError
    from claudeguard.files import write_atomic
    from claudeguard.paths import private_dir, state_dir_text

    entries = _read_cache()
    entries[f"{key[0]}:{key[1]}"] = {"key": key, "cli_version": version, "path": path}
    kept = dict(list(entries.items())[-KEEP:])
    try:
        private_dir(state_dir_text())
        write_atomic(_cache_path(), json.dumps({"binaries": kept}, indent=1, sort_keys=True) + "\n")
    except (OSError, GuardError):
        pass


def has_marks(path: str, size: int) -> bool:
    """A native binary that carries Claude Code's marks (read, never run)."""
    if size < MIN_NATIVE_SIZE:
        return False
    import mmap

    try:
        with open(path, "rb") as fh:
            if not fh.read(4).startswith(NATIVE_MAGIC):
                return False
            with mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as data:
                return all(data.find(mark) >= 0 for mark in MARKS)
    except (OSError, ValueError):
        return False


def ask(path: str) -> str | None:
    """``path --version``, believed only in the CLI's own form (``2.1.330 (Claude Code)``)."""
    import subprocess

    from claudeguard.procs import capture

    try:
        proc = capture([path, "--version"], env=dict(os.environ, CLAUDEGUARD_DISABLE="1"), timeout=ASK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = proc.stdout.strip().split(" ", 1) if proc.returncode == 0 else []
    if len(words) == 2 and words[1] == "(Claude Code)" and _looks_like_version(words[0]):
        return words[0]
    return None


def _looks_like_version(word: str) -> bool:
    head = word.split("-", 1)[0].split("+", 1)[0].split(".")
    return len(head) == 3 and all(p.isdigit() and p.isascii() for p in head)


def cli_version(real_cli: str | None, *, ask_binary: bool = True) -> str | None:
    """The Claude Code version of the program at ``real_cli``; None for a program that is not a
    Claude Code CLI (or cannot be read). ``ask_binary`` False: only what is known without running
    anything (the package.json, the cache). Read once a plan (``plan.once``)."""
    if not real_cli:
        return None
    from claudeguard.plan.once import remembered

    return remembered(("cli_version", real_cli, ask_binary), (), lambda: _cli_version(real_cli, ask_binary))


def _cli_version(real_cli: str, ask_binary: bool) -> str | None:
    found = package_version(real_cli)
    if found:
        return found
    path = os.path.realpath(real_cli)
    key = stat_key(path)
    if key is None:
        return None
    known, version = cached(key)
    if known or not ask_binary:
        return version
    if key[2] < MIN_NATIVE_SIZE:
        return None  # a script or a small program: not a native Claude Code, nothing to remember
    version = ask(path) if has_marks(path, key[2]) else None
    if stat_key(path) == key:  # not replaced while it was read
        _remember(key, path, version)
    return version


def is_claude_cli(path: str) -> bool:
    """An executable regular file that is a Claude Code CLI: its package says so, or the binary
    itself does (``cli_version``); never by its name."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return False
    return cli_version(path) is not None
