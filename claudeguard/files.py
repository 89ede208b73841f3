"""The two ways claudeguard writes a file: replace it whole (``write_atomic``), or add one line to
it (``append_line``); the one way it reads a JSON record back (``read_json``); the one way it
makes a directory with its missing parents (``make_dirs``: each one 0700); and the one way the
launcher removes its session dir (``remove_tree``).

All stay off links planted by others; the writers leave a private file (0600 unless the caller
keeps an existing file's mode). Only ``os`` and ``stat`` are imported (``json`` when reading):
the hook, the launcher and the prompt server all write through here (bench/importtime.py holds
their budgets).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from typing import Any, Callable, Union

    StrPath = Union[str, "os.PathLike[str]"]

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomic(path: StrPath, data: str | bytes, *, mode: int = 0o600, keep_mode: bool = False,
                 durable: bool = False) -> None:
    """Replace ``path`` with ``data``: a reader sees the old file or the whole new one.

    The temp file is made beside ``path`` with O_EXCL (it never opens anything already there,
    a link included) under a name no other writer uses, then renamed over ``path``; a link at
    ``path`` is replaced, never followed. ``keep_mode``: an existing regular file keeps its
    permission bits (a config file the user made 0644), else the file gets ``mode``.
    ``durable``: fsync the file and its directory (for files a user keeps; runtime state in
    /tmp skips it). On any error the temp file is removed and the error raised.
    """
    if isinstance(data, str):
        data = data.encode()
    path = os.fspath(path)
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    if keep_mode:
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
        except FileNotFoundError:
            pass
    fd = os.open(tmp, _CREATE, 0o600)
    try:
        try:
            os.fchmod(fd, mode)  # exact, whatever the umask (a kept mode may be wider than 0600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(directory or ".")


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory: the file itself is synced
    finally:
        os.close(fd)


def append_line(path: StrPath, line: bytes) -> None:
    """Append one whole line (ending in ``\\n``) to ``path``, made 0600 if new.

    One O_APPEND write per line, so concurrent writers never interleave within a line. The file
    must be a regular file of ours (never a link: O_NOFOLLOW); one with group/other bits is
    tightened to 0600. A short write (full disk) ends the torn line and raises ENOSPC.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(0, "not a regular file of yours; refusing to write")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o600)  # ours, but made with a loose umask or by hand: tighten it
        written = _write(fd, line)
        if written != len(line):
            # A full disk mid-line: end the torn line so the next record starts clean.
            try:
                os.write(fd, b"\n")
            except OSError:
                pass
            raise OSError(28, f"short write ({written} of {len(line)} bytes)")
    finally:
        os.close(fd)


def _write(fd: int, data: bytes) -> int:
    return os.write(fd, data)  # one call, one O_APPEND write: a whole line or an error


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> None:
    """Remove the dir ``path`` and everything in it, as ``shutil.rmtree(path, ignore_errors=True)``
    does: through dir fds, a link removed and never followed, what cannot be removed left; and
    without a recursion limit (a box's /tmp may hold a tree deeper than Python's stack). Not
    shutil: its import (bz2, lzma, fnmatch) was ~3 ms after every session's end, with nothing
    beside it (bench/RESULTS.md)."""
    stack: list[tuple[int, list[os.DirEntry[str]]]] = []  # each open dir, the entries left in it
    try:
        _enter(stack, path, None)
        while stack:
            fd, entries = stack[-1]
            if not entries:
                stack.pop()
                os.close(fd)
                if stack:  # the dir just emptied, in its parent
                    _ignore(os.rmdir, stack[-1][1].pop().name, stack[-1][0])
                continue
            entry = entries[-1]
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if not (is_dir and _enter(stack, entry.name, fd)):
                _ignore(os.unlink, entry.name, fd)  # a file, a link; a dir that could not be opened stays
                entries.pop()
    finally:
        for fd, _ in stack:
            os.close(fd)
    _ignore(os.rmdir, path, None)


def _enter(stack: list[tuple[int, list[os.DirEntry[str]]]], name: str, dir_fd: int | None) -> bool:
    """Open the dir ``name`` (never through a link) and put it and its entries on ``stack``."""
    try:
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    except OSError:
        return False  # not a dir, unreadable, too deep for the fds left: left as it is
    try:
        stack.append((fd, list(os.scandir(fd))))
    except OSError:
        os.close(fd)
        return False
    return True


def _ignore(remove: Callable[..., None], name: str, dir_fd: int | None) -> None:
    try:
        remove(name, dir_fd=dir_fd)
    except OSError:
        pass


def make_dirs(path: StrPath) -> None:
    """Make ``path`` and each missing parent 0700, top down (``os.makedirs`` gives only the last
    one its mode: the state dir made as the log dir's parent was 0755, and the guard's own check
    of it then failed). What exists is left as it is: ``paths.private_dir`` checks the dirs
    that must be private."""
    path = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made by a concurrent process meanwhile


def read_json(path: StrPath) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None: missing, unreadable, a link (never followed), not
    JSON, or not an object. For records other processes replace whole (``write_atomic``)."""
    import json  # lazy: the launcher's pass-through path stays without json

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
