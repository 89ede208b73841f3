"""Git's index, read as git writes it: what it says the box must hold (issue 32).

Two things: the repositories nested in the project and registered in the index (git's code
paths, below), and whether a path the user's Read deny rules hide is tracked (its content is then
in git's object store, where ``git show HEAD:.env`` reads it: ``tracked_under``; the box hides
the object store then, ``plan/sandbox.layout``).

A directory with its own ``.git`` that the project's index records as a gitlink (mode 160000:
``git add sub``, ``git submodule add`` of a local repository) is a submodule to git: the user's
next ``git status`` in the project runs ``git status`` in it, and with it whatever that
repository's config names (``core.fsmonitor``, hooks). Where that git dir lies in the work tree
(an embedded repository, not one absorbed into ``.git/modules``), it is the agent's to write.

- At the box's build (``plan.code_paths``): the registered embedded repositories are git dirs like
  any other: their code files read-only in the box, the CLI's writes to them denied; their list
  is kept in the session dir (``nested-known``).
- After a boxed command that changed the index (the box script runs this file as a script, with
  ``python -I -S``: the standard library only, nothing of the project's on ``sys.path``): a
  registered embedded repository not in that list was made or registered by the agent during
  the session, so its ``.git`` is moved aside (``.git.held-by-claudeguard``: nothing lost, and
  git sees an unpopulated submodule it does not enter), one line on stderr says so, and the
  repository is listed in ``nested-held``, so that a ``.git`` put back is moved aside again.

The index is read as git writes it (versions 2 to 4; SHA-1 or SHA-256 object names); one that
cannot be read is ``None``: the box refuses to start on it (``UnreadableGit``), and after a
command nothing is moved (git cannot read it either, and enters no submodule).
"""

from __future__ import annotations

import os
import struct
import sys

GITLINK = 0o160000
HELD_SUFFIX = ".git.held-by-claudeguard"
SCRIPT = os.path.abspath(__file__)  # what the box script runs after a command (plan/sandbox.py)
KNOWN_FILE = "nested-known"
HELD_FILE = "nested-held"


def _hash_len(common: str) -> int:
    try:
        with open(os.path.join(common, "config"), encoding="utf-8", errors="replace") as fh:
            text = fh.read().lower()
    except OSError:
        return 20
    return 32 if "objectformat" in text and "sha256" in text else 20


# A gitlink's mode as the index stores it (big-endian): an index without these four bytes has none.
_GITLINK_BYTES = struct.pack(">I", GITLINK)


# The last index read, by its file's identity and change time: a session's plan asks for it three
# times (the box's layout, and the protected paths for the session file and for the CLI's flags),
# and a repository's index may be megabytes.
_last: tuple[tuple[str, int, int, int, int], bytes] | None = None
_last_links: tuple[bytes, int, list[str]] | None = None  # gitlinks' answer for _last's bytes


def _read(index: str) -> bytes | None:
    """The index's bytes; b"" when there is none, None when it cannot be read or is no index."""
    global _last
    try:
        with open(index, "rb") as fh:
            st = os.fstat(fh.fileno())
            key = (index, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if _last is not None and _last[0] == key:
                return _last[1]
            data = fh.read()
    except FileNotFoundError:
        return b""
    except OSError:
        return None
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    _last = (key, data)
    return data


def gitlinks(index: str, hash_len: int = 20) -> list[str] | None:
    """The paths the index at ``index`` records as gitlinks; [] when there is no index, None when
    it cannot be read. An index with no gitlink's mode anywhere in it is not walked: ~1 ms for
    20,000 entries, against ~30 for the walk (a session's box is built at every start)."""
    global _last_links
    data = _read(index)
    if data is None:
        return None
    if _last_links is not None and _last_links[0] is data and _last_links[1] == hash_len:
        return list(_last_links[2])  # the same index as the last call's (``_read``'s cache)
    if not data or (_GITLINK_BYTES not in data and _valid_header(data)):
        links: list[str] = []
    else:
        found = _entries(data, hash_len)
        if found is None:
            return None
        links = [name for name, mode in found if mode == GITLINK]
    _last_links = (data, hash_len, links)
    return list(links)


def _valid_header(data: bytes) -> bool:
    return struct.unpack(">I", data[4:8])[0] in (2, 3, 4)


def entries(index: str, hash_len: int = 20) -> list[tuple[str, int]] | None:
    """(path, mode) of every entry of the index at ``index``; [] when there is none, None when
    it cannot be read."""
    data = _read(index)
    if data is None:
        return None
    return _entries(data, hash_len) if data else []


def _entries(data: bytes, hash_len: int) -> list[tuple[str, int]] | None:
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        return None
    out: list[tuple[str, int]] = []
    pos, previous = 12, b""
    fixed = 40 + hash_len  # the stat fields, the mode, uid, gid, size, then the object name
    try:
        for _ in range(count):
            start = pos
            mode = struct.unpack(">I", data[pos + 24:pos + 28])[0]
            flags = struct.unpack(">H", data[pos + fixed:pos + fixed + 2])[0]
            pos += fixed + 2
            if version >= 3 and flags & 0x4000:
                pos += 2  # the extended flags
            if version == 4:
                # git's offset varint: how much of the previous path to drop
                byte = data[pos]
                pos += 1
                strip = byte & 0x7F
                while byte & 0x80:
                    byte = data[pos]
                    pos += 1
                    strip = ((strip + 1) << 7) | (byte & 0x7F)
                end = data.index(b"\0", pos)
                name = previous[:len(previous) - strip] + data[pos:end]
                pos = end + 1
            else:
                end = data.index(b"\0", pos)
                name = data[pos:end]
                pos = start + ((end - start + 8) & ~7)  # padded with 1-8 NULs to a multiple of 8
            previous = name
            out.append((name.decode("utf-8", "surrogateescape"), mode))
    except (struct.error, ValueError, IndexError):
        return None
    return out


def tracked_under(root: str, gitdir: str, common: str, paths: list[str]) -> str | None:
    """The first of ``paths`` (absolute) that the index of the work tree at ``root`` tracks, or
    tracks something inside; None when none is (or the index cannot be read: the box refuses to
    start on that, ``code_paths``)."""
    inside = [os.path.relpath(p, root) for p in paths if (p + os.sep).startswith(root.rstrip(os.sep) + os.sep)]
    if not inside:
        return None
    data = _read(os.path.join(gitdir, "index"))
    if not data:
        return None
    if data[4:8] != b"\0\0\0\4" and not any(rel.encode() + b"\0" in data or rel.encode() + b"/" in data
                                            for rel in inside):
        return None  # versions 2 and 3 keep whole names: one that is nowhere in it is not tracked
    found = _entries(data, _hash_len(common)) or []
    for rel in inside:
        below = rel + "/"
        if any(name == rel or name.startswith(below) for name, _ in found):
            return os.path.join(root, rel)
    return None


def git_dir_of(repo: str) -> str | None:
    """The git dir of the repository at ``repo``: its ``.git`` dir, or the dir a ``.git`` file names."""
    dot = os.path.join(repo, ".git")
    if os.path.isdir(dot) and not os.path.islink(dot):
        return dot
    try:
        with open(dot, encoding="utf-8") as fh:
            line = fh.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(repo, line[len("gitdir:"):].strip()))


def embedded(root: str, gitdir: str, common: str) -> list[tuple[str, str]] | None:
    """(repository, its git dir) of each gitlink of the work tree at ``root`` whose git dir is not
    absorbed into the project's ``modules/`` (which the box keeps read-only); None when the
    index cannot be read."""
    links = gitlinks(os.path.join(gitdir, "index"), _hash_len(common))
    if links is None:
        return None
    modules = os.path.join(common, "modules") + os.sep
    out = []
    for link in links:
        if link.startswith("/") or ".." in link.split("/"):
            continue  # git refuses such a path in its index; one written by hand names no repository of the tree
        repo = os.path.normpath(os.path.join(root, link))
        inner = git_dir_of(repo)
        if inner is not None and not (inner + os.sep).startswith(modules):
            out.append((repo, inner))
    return out


def _open_dir(root: str, relative: str) -> int:
    """A descriptor of ``root``/``relative``, no link followed on the way (a command of another
    box could swap a directory for a link while this runs)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in relative.split(os.sep):
            if part in ("", "."):
                continue
            if part == "..":
                raise OSError(f"{relative}: outside the project")
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _move_aside(root: str, repo: str) -> str | None:
    """Rename ``repo``/.git to a free ``.git.held-by-claudeguard[.N]``; the new name, or None."""
    try:
        fd = _open_dir(root, os.path.relpath(repo, root))
    except OSError:
        return None
    try:
        names = set(os.listdir(fd))
        target = HELD_SUFFIX
        n = 1
        while target in names:
            n += 1
            target = f"{HELD_SUFFIX}.{n}"
        os.rename(".git", target, src_dir_fd=fd, dst_dir_fd=fd)
        return os.path.join(repo, target)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_list(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            return [line.rstrip("\n") for line in fh if line.strip()]
    except OSError:
        return []


def after_command(root: str, gitdir: str, common: str, session_dir: str) -> list[str]:
    """What a boxed command registered or put back: each such repository's ``.git`` moved aside;
    the lines to say."""
    known = set(_read_list(os.path.join(session_dir, KNOWN_FILE)))
    held_file = os.path.join(session_dir, HELD_FILE)
    held = _read_list(held_file)
    found = embedded(root, gitdir, common) or []
    suspects = [repo for repo, _ in found if repo not in known]
    # A repository moved aside earlier whose .git is back (a rename, a new git init): aside again.
    suspects += [repo for repo in held if repo not in suspects and os.path.lexists(os.path.join(repo, ".git"))]
    lines = []
    for repo in suspects:
        moved = _move_aside(root, repo)
        if moved is None:
            lines.append(f"claudeguard: {repo} is a repository this session registered in the project's index, "
                         f"and its .git could not be moved aside: do not run git in the project before you "
                         f"have read {repo}/.git/config")
            continue
        if repo not in held:
            held.append(repo)
        lines.append(f"claudeguard: moved {repo}/.git aside to {moved}: this command registered a repository it "
                     f"can write in the project's index, and your next git status would run what its config names "
                     f"(core.fsmonitor, hooks) outside the sandbox; read its config before you move it back")
    if suspects:
        tmp = held_file + ".tmp"
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write("".join(r + "\n" for r in held))
        os.replace(tmp, held_file)
    return lines


def main(argv: list[str]) -> int:
    """``git_index.py ROOT GITDIR COMMONDIR SESSION_DIR``: the box script's check after a command."""
    if len(argv) != 4:
        print("claudeguard: git_index.py ROOT GITDIR COMMONDIR SESSION_DIR", file=sys.stderr)
        return 2
    for line in after_command(*argv):
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
