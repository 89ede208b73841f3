"""Trust in a file's exact content (the direnv / mise model): what a repository brings may loosen
the guard, or run as code, only once the user trusted that content.

``claudeguardctl config trust [FILE]`` records the file's real path and the SHA-256 of its bytes
in the user's state dir (``trust.json`` in ``config.find.state_dir``: never in a project, and a
file no tool of a guarded session may write, ``policy.protect``), and keeps a copy of the content
(``trusted/<sha256>``). A changed file is untrusted again: its digest no longer matches; but the
deny and ask rules of the content the user trusted keep binding, from the copy, until the user
trusts the new content or revokes the trust (``config untrust``): an agent that rewrites or
removes a trusted config does not unmake it for the next run (``config.load``). A directory (a
plugin dir) is trusted by the digest of its whole tree: every file's relative path and bytes,
every link's target.

What trust governs: a project ``.claudeguard.toml`` (and a profile or ``CLAUDEGUARD_CONFIG`` /
``--guard-config`` file inside the project) may always tighten; its loosening applies only once
trusted (``config.load``); repository code the CLI would run (project hooks, ``statusLine``,
``apiKeyHelper``, ``.mcp.json`` servers, plugins, agent files' hooks and ``permissionMode``) runs
only once trusted (``plan.repo_code``). Under lockdown no file but the user's own may loosen,
trusted or not.
"""

from __future__ import annotations

import json
import os

from claudeguard.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from hashlib import _Hash
    from typing import Mapping

TRUST_FILE = "trust.json"
COPIES_DIR = "trusted"  # the content of each trusted file, by its SHA-256: what keeps binding (load.py)
MAX_COPY_BYTES = 1 << 20
FORMAT = 1
MAX_TREE_FILES = 5000  # a plugin dir with more is not hashed (untrusted: trust it by its files' parent)


def trust_path(env: Mapping[str, str] | None = None) -> str:
    from claudeguard.config.find import state_dir

    return os.path.join(state_dir(env), TRUST_FILE)


def key(path: str) -> str:
    """The record's key: the real, absolute path."""
    return os.path.realpath(os.path.abspath(path))


def _sha256(data: bytes = b"") -> _Hash:
    import hashlib  # here: a session whose watch hashes no file never pays its import (~3 ms)

    return hashlib.sha256(data)


def digest(path: str) -> str | None:
    """SHA-256 of a file's bytes, or of a directory's tree; None when it cannot be read."""
    try:
        if os.path.isdir(path):
            return _tree_digest(path)
        h = _sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 16), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def _tree_digest(root: str) -> str | None:
    h = _sha256(b"claudeguard-tree\0")
    count = 0
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            full = os.path.join(base, name)
            rel = os.path.relpath(full, root)
            count += 1
            if count > MAX_TREE_FILES:
                return None
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            if os.path.islink(full):
                h.update(b"L" + os.readlink(full).encode("utf-8", "surrogateescape") + b"\0")
                continue
            with open(full, "rb") as fh:
                h.update(b"F" + _sha256(fh.read()).digest())
    return h.hexdigest()


class Records:
    """The user's trust records (a plain class: read once per launch)."""

    __slots__ = ("path", "files")

    def __init__(self, path: str, files: dict[str, str]) -> None:
        self.path = path
        self.files = files  # real path -> sha256

    def trusted(self, path: str, sha: str | None = None) -> bool:
        """Is the file's current content (or ``sha``) the content the user trusted?"""
        want = self.files.get(key(path))
        if want is None:
            return False
        got = sha if sha is not None else digest(path)
        return got is not None and got == want


def load(env: Mapping[str, str] | None = None) -> Records:
    """The records; a missing or unreadable store trusts nothing (fail closed)."""
    path = trust_path(env)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return Records(path, {})
    files = data.get("files") if isinstance(data, dict) else None
    out: dict[str, str] = {}
    for name, rec in (files or {}).items() if isinstance(files, dict) else ():
        sha = rec.get("sha256") if isinstance(rec, dict) else None
        if isinstance(name, str) and isinstance(sha, str):
            out[name] = sha
    return Records(path, out)


def not_trusted(paths: list[str]) -> list[str]:
    """``paths`` less those whose current content the user trusted (the records read only when
    there is a path to ask about)."""
    if not paths:
        return []
    records = load()
    return [path for path in paths if not records.trusted(path)]


def record(paths: list[str], env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Trust each path's current content; returns (real path, sha256) per path. One line of
    error (UsageError) for a path that cannot be read; nothing is written then."""
    import time

    from claudeguard.files import make_dirs, write_atomic

    done: list[tuple[str, str]] = []
    for path in paths:
        if not os.path.exists(path):
            raise UsageError(f"{path}: no such file to trust")
        sha = digest(path)
        if sha is None:
            raise UsageError(f"{path}: cannot be read (or a tree of more than {MAX_TREE_FILES} files); not trusted")
        done.append((key(path), sha))
    store = trust_path(env)
    try:
        with open(store, encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    found = data.get("files")
    files: dict[str, object] = found if isinstance(found, dict) else {}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for real, sha in done:
        files[real] = {"sha256": sha, "trusted": now, "kind": "dir" if os.path.isdir(real) else "file"}
    make_dirs(os.path.dirname(store))  # the state dir and its missing parents 0700
    for real, sha in done:
        _keep_copy(store, real, sha)
    write_atomic(store, json.dumps({"format": FORMAT, "files": files}, indent=1, sort_keys=True), durable=True)
    return done


def _keep_copy(store: str, path: str, sha: str) -> None:
    """Keep the trusted content of a file (a config's rules keep binding from it once the file is
    changed or removed, config.load); a directory or a file over ``MAX_COPY_BYTES`` is not kept."""
    from claudeguard.files import make_dirs, write_atomic

    if os.path.isdir(path):
        return
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_COPY_BYTES + 1)
    except OSError:
        return
    if len(data) > MAX_COPY_BYTES or _sha256(data).hexdigest() != sha:
        return  # too big, or changed since it was hashed: nothing kept
    copies = os.path.join(os.path.dirname(store), COPIES_DIR)
    make_dirs(copies)
    write_atomic(os.path.join(copies, sha), data)


def trusted_copy(sha: str, env: Mapping[str, str] | None = None) -> str | None:
    """The text of the trusted content with this SHA-256, as kept when it was trusted; None when
    none was kept (a directory, a big file, a record from before copies were kept)."""
    if not sha or not all(c in "0123456789abcdef" for c in sha):
        return None
    path = os.path.join(os.path.dirname(trust_path(env)), COPIES_DIR, sha)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if _sha256(data).hexdigest() != sha:
        return None  # not what was trusted: believe nothing of it
    return data.decode("utf-8", "replace")


def revoke(paths: list[str], env: Mapping[str, str] | None = None) -> list[str]:
    """Forget the user's trust in each path (``config untrust``): its loosening no longer applies,
    its code no longer runs, and a changed or removed file's trusted rules no longer bind. The
    real paths whose record was removed."""
    from claudeguard.files import write_atomic

    store = trust_path(env)
    try:
        with open(store, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return []
    gone = [key(p) for p in paths if key(p) in files]
    for real in gone:
        del files[real]
    if gone:
        write_atomic(store, json.dumps({"format": FORMAT, "files": files}, indent=1, sort_keys=True), durable=True)
    return gone


def in_project(root: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The files and dirs the user trusted that lie inside the project at ``root`` (their real
    paths, as the records keep them): read-only in the box, and no writing tool's (issue 32)."""
    if root == "/" or not os.path.exists(trust_path(env)):
        return []
    top = os.path.realpath(root)
    return [p for p in load(env).files if p == top or p.startswith(top.rstrip("/") + "/")]


def command_for(path: str) -> str:
    """The command that trusts ``path`` (for the one-line notes)."""
    import shlex

    return f"claudeguardctl config trust {shlex.quote(path)}"
