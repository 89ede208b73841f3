"""Install pinned versions of the real Claude Code CLI with npm into claudeguard's cache.

Layout: ``<cache_dir>/cli/<version>/node_modules/.bin/claude``. Each version is installed into a
scratch directory next to it and renamed into place when npm succeeds, so a half-finished install
is never mistaken for a working one; a per-version file lock keeps parallel callers (pytest workers,
CI steps) from installing the same version twice at once.

Command: ``python -m claudeguard.testing.cli_install [VERSION ...]`` installs the pinned versions
(or the given ones) when missing and prints one ``VERSION PATH`` line each.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
from typing import Sequence

from claudeguard.errors import GuardError, run_main
from claudeguard.paths import cache_dir
from claudeguard.plan.discovery import version_at_least
from claudeguard.procs import ask_version

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from pathlib import Path

PACKAGE = "@anthropic-ai/claude-code"
PINNED_VERSIONS = ("2.1.197", "2.1.330")
# The first release with Claude Code's own background sessions (`claude --bg`, `claude agents`).
BG_FIRST = "2.1.330"
# Exact versions the real-CLI tests run on instead of the pinned ones (space or comma separated):
# CI sets it to the newest published CLI for its marked subset (.ci/run); by hand, e.g.
# `CLAUDEGUARD_TEST_CLI_VERSIONS=2.1.332 pytest -m real_cli`.
VERSIONS_VAR = "CLAUDEGUARD_TEST_CLI_VERSIONS"
INSTALL_TIMEOUT = 900  # seconds; the package pulls a ~245 MB native binary


def versions_under_test() -> tuple[str, ...]:
    """The versions the real-CLI tests run on: ``VERSIONS_VAR``'s, else the pinned ones."""
    given = tuple(os.environ.get(VERSIONS_VAR, "").replace(",", " ").split())
    return given or PINNED_VERSIONS


def newest_under_test(first: str) -> str:
    """The version a test of a feature that arrived in ``first`` runs on: the newest of
    ``versions_under_test`` that has it, else ``first``."""
    floor = tuple(int(p) for p in first.split("."))
    having = [v for v in versions_under_test() if version_at_least(v, floor)]
    return max(having, key=version_key) if having else first


def bg_version_under_test() -> str:
    """The version the background-session tests run on (``newest_under_test(BG_FIRST)``)."""
    return newest_under_test(BG_FIRST)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in version.split("-")[0].split("."))


def cli_root() -> Path:
    return cache_dir() / "cli"


def _binary(prefix: Path) -> Path:
    return prefix / "node_modules" / ".bin" / "claude"


def cli_path(version: str) -> Path | None:
    """The installed ``claude`` of ``version``, or None when it is not (completely) installed."""
    path = _binary(cli_root() / version)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def install_cli(version: str, *, quiet: bool = True) -> Path:
    """Install ``PACKAGE@version`` (exact) unless already there; return the binary's path.

    Raises GuardError (one line) when npm is missing or the install fails.
    """
    if not re.fullmatch(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?", version):
        raise GuardError(f"not an exact Claude Code version: {version!r} (expected e.g. {PINNED_VERSIONS[-1]})")
    found = cli_path(version)
    if found:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise GuardError(f"cannot install Claude Code {version}: npm not found on PATH (install Node.js 18+)")
    root = cli_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        found = cli_path(version)  # someone else may have finished while we waited
        if found:
            return found
        scratch = root / f".{version}.tmp-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        cmd = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", str(scratch),
               f"{PACKAGE}@{version}"]
        try:
            # Not procs.capture: npm's output goes to the terminal unless quiet.
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, text=True, timeout=INSTALL_TIMEOUT,
                                  stdout=subprocess.PIPE if quiet else None,
                                  stderr=subprocess.STDOUT if quiet else None)
        except subprocess.TimeoutExpired:
            shutil.rmtree(scratch, ignore_errors=True)
            raise GuardError(f"npm install {PACKAGE}@{version} did not finish within {INSTALL_TIMEOUT}s") from None
        if proc.returncode != 0 or not _binary(scratch).is_file():
            shutil.rmtree(scratch, ignore_errors=True)
            last = (proc.stdout or "").strip().splitlines()[-1:] if quiet else []
            detail = f": {last[0]}" if last else ""
            raise GuardError(f"npm install {PACKAGE}@{version} failed (exit {proc.returncode}){detail}")
        _check_runs(_binary(scratch), version, scratch)
        target = root / version
        shutil.rmtree(target, ignore_errors=True)  # an incomplete leftover (cli_path said no)
        # The .bin link is relative, so the tree works after the rename.
        os.rename(scratch, target)
    found = cli_path(version)
    if found is None:
        raise GuardError(f"installed {PACKAGE}@{version} but {_binary(root / version)} is not executable")
    return found


def _check_runs(binary: Path, version: str, scratch: Path) -> None:
    """Refuse an install whose binary does not report ``version`` (e.g. a postinstall step that an
    npm policy skipped left a placeholder behind)."""
    try:
        said = ask_version(str(binary))
    except GuardError as exc:
        said = str(exc)
    if said != version:
        shutil.rmtree(scratch, ignore_errors=True)
        raise GuardError(f"installed {PACKAGE}@{version} does not run: `claude --version` said {said[:100]!r}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m claudeguard.testing.cli_install",
                                     description="Install pinned Claude Code CLIs into claudeguard's cache.")
    parser.add_argument("versions", nargs="*", default=list(PINNED_VERSIONS),
                        help=f"exact versions (default: {' '.join(PINNED_VERSIONS)})")
    parser.add_argument("--verbose", action="store_true", help="show npm's output")
    args = parser.parse_args(argv)

    def run() -> int:
        for version in args.versions:
            print(version, install_cli(version, quiet=not args.verbose), flush=True)
        return 0

    return run_main("cli_install", run)


if __name__ == "__main__":
    sys.exit(main())
