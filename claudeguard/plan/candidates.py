"""Claude Code CLIs installed where claudeguard does not look by itself (issue 36): what the
launcher's "not found" error and ``claudeguardctl doctor`` offer, each with the exact config
line that makes it the real CLI.

Where a new user's CLI often is, though not on the PATH a script or cron sees: the copy
``claudeguardctl demo`` installed into claudeguard's cache (``~/.cache/claudeguard/cli/<version>``),
the native installer's (``~/.local/bin/claude`` and ``~/.local/share/claude/versions/<version>``),
npm's global one (``$NPM_CONFIG_PREFIX``, ``~/.npm-global``, ``~/.local``, ``/usr/local``,
``/usr``), and the platform package's binary beside each npm install. Only a Claude Code CLI
counts (``plan.cli_version``: its package or its own answer); nothing here runs anything else.
"""

from __future__ import annotations

import os

from claudeguard.plan.cli_version import cli_version

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Iterator

NPM_MODULE = os.path.join("lib", "node_modules", "@anthropic-ai")


def _newest_first(names: list[str]) -> list[str]:
    """Version-named entries, the newest first (2.1.330 before 2.1.99)."""
    def key(name: str) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else -1 for p in name.split("-", 1)[0].split("."))

    return sorted(names, key=key, reverse=True)


def _cache_dirs() -> Iterator[str]:
    home = os.path.expanduser("~")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    root = os.path.join(cache, "claudeguard", "cli")
    try:
        names = _newest_first(os.listdir(root))
    except OSError:
        return
    for name in names:
        yield os.path.join(root, name, "node_modules", ".bin", "claude")


def _native() -> Iterator[str]:
    home = os.path.expanduser("~")
    yield os.path.join(home, ".local", "bin", "claude")
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    versions = os.path.join(data, "claude", "versions")
    try:
        names = _newest_first(os.listdir(versions))
    except OSError:
        return
    for name in names:
        yield os.path.join(versions, name)


def _npm_global() -> Iterator[str]:
    home = os.path.expanduser("~")
    prefixes = [os.environ.get("NPM_CONFIG_PREFIX") or "", os.path.join(home, ".npm-global"),
                os.path.join(home, ".local"), "/usr/local", "/usr"]
    for prefix in (p for p in prefixes if p):
        yield os.path.join(prefix, "bin", "claude")
        platforms = os.path.join(prefix, NPM_MODULE)
        try:
            names = sorted(os.listdir(platforms))
        except OSError:
            continue
        for name in names:
            if name.startswith("claude-code-"):
                yield os.path.join(platforms, name, "claude")


def candidates(skip: str | None = None) -> list[tuple[str, str]]:
    """(path, version) of each Claude Code CLI found in those places, one per binary, in that
    order; ``skip``: the one already in use. (claudeguard's own launchers are small scripts,
    never a Claude Code CLI by ``cli_version``.)"""
    seen = {os.path.realpath(skip)} if skip else set()
    found = []
    for path in (*_cache_dirs(), *_native(), *_npm_global()):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        version = cli_version(path)
        if version is not None:
            found.append((path, version))
    return found


def config_line(path: str) -> str:
    """The line that names ``path`` as the real CLI, at the top of the user's config file (a
    dotted key: before any table header it is ``[claude] path``)."""
    return f"claude.path = {_toml_string(path)}"


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def offer(skip: str | None = None) -> str | None:
    """One sentence offering the CLIs found (the first with its exact config line), or None."""
    found = candidates(skip)
    if not found:
        return None
    from claudeguard.config.find import user_config_file

    path, version = found[0]
    more = "" if len(found) == 1 else f" (also: {', '.join(f'{p} ({v})' for p, v in found[1:])})"
    return (f"found Claude Code {version} at {path}: add the line `{config_line(path)}` at the top of "
            f"{user_config_file()}, or set CLAUDEGUARD_CLAUDE={path}{more}")
