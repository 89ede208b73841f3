"""The channel directory and the files of one request, always opened relative to a checked
directory fd with O_NOFOLLOW.

Per request ``<id>`` (see docs/design.md ("The approval channel") for who creates, writes, reads and removes each):
``<id>.sock`` (the waiter's listening socket: answers), ``<id>.json`` (the published request;
present = listed), ``<id>.done`` (the end marker, created once with O_EXCL: its content says how
the request ended), ``<id>.go``/``<id>.drop`` (a held request's owner speaking).
"""

from __future__ import annotations

import json
import os
import stat
import time

from claudeguard.errors import GuardError, InsecurePathError
from claudeguard.procs import process_start

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (docs/design.md, "Type-only imports")
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

# .go/.drop: a held request's owner speaking; .fifo/.lock: a request of claudeguard 0.2 and
# earlier (answered through a FIFO), left by a crash: swept like any other file of a request.
SUFFIXES = (".json", ".sock", ".done", ".go", ".drop", ".fifo", ".lock")
ORPHAN_AGE_S = 10.0  # a file without its .json this old is left over from a crash
FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def _check_fd(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    uid = os.getuid()
    if st.st_uid != uid:
        raise InsecurePathError(f"{path}: owned by uid {st.st_uid}, not by you (uid {uid})")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise InsecurePathError(f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets others in; expected 0700")


class ChannelDir:
    """An open, verified handle on ``<runtime>/channel`` (and lazily its ``bells`` sub-dir)."""

    def __init__(self) -> None:
        from claudeguard.paths import runtime_dir

        try:
            self.path = runtime_dir("channel")
            # Check the fd we will actually use, not only the path (no swap between check and use).
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | FLAGS)
        except OSError as exc:
            where = exc.filename or "runtime dir"
            raise GuardError(f"approval channel {where}: {exc.strerror or exc}") from None
        try:
            _check_fd(self.fd, self.path)
        except BaseException:
            os.close(self.fd)
            raise
        self._bells = -1

    def close(self) -> None:
        for fd in (self._bells, self.fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self._bells = -1

    def __enter__(self) -> "ChannelDir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def bells_fd(self, create: bool = True) -> int:
        """The ``bells`` sub-dir where each ``wait_for_new`` caller keeps its doorbell FIFO;
        -1 when it does not exist and ``create`` is false (no console ever listened)."""
        if self._bells < 0:
            if create:
                try:
                    os.mkdir("bells", 0o700, dir_fd=self.fd)
                except FileExistsError:
                    pass
            try:
                fd = os.open("bells", os.O_RDONLY | os.O_DIRECTORY | FLAGS, dir_fd=self.fd)
            except FileNotFoundError:
                if create:
                    raise
                return -1
            try:
                _check_fd(fd, self.path / "bells")
            except BaseException:
                os.close(fd)
                raise
            self._bells = fd
        return self._bells

    # -- single files -------------------------------------------------------------------------

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def write_json_atomic(self, name: str, data: Mapping[str, object]) -> None:
        """Write ``name`` whole or not at all: readers never see a half-written request."""
        tmp = f".{name}.tmp"
        payload = json.dumps(data, default=str, ensure_ascii=False).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FLAGS, 0o600, dir_fd=self.fd)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        try:
            os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.unlink(tmp)
            raise

    def read_json(self, name: str) -> dict[str, object] | None:
        """The parsed file, or None when it is gone; ValueError when it is not ours or not JSON."""
        try:
            fd = os.open(name, os.O_RDONLY | FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                raise ValueError(f"{name}: not a regular file of yours")
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = json.loads(b"".join(chunks))
        if not isinstance(data, dict):
            raise ValueError(f"{name}: not a JSON object")
        return data

    def create_marker(self, rid: str, reason: str) -> bool:
        """Create ``<id>.done`` once; True if we created it (our ending counts), False if it existed."""
        try:
            fd = os.open(f"{rid}.done", os.O_WRONLY | os.O_CREAT | os.O_EXCL | FLAGS, 0o600, dir_fd=self.fd)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"{reason} {os.getpid()} {time.time():.3f}\n".encode())
        finally:
            os.close(fd)
        return True

    def read_marker(self, rid: str) -> str | None:
        """How the request ended (answered|timeout|withdrawn|error|gone), or None while it is open."""
        try:
            fd = os.open(f"{rid}.done", os.O_RDONLY | FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        try:
            text = os.read(fd, 256).decode(errors="replace")
        finally:
            os.close(fd)
        # An empty marker is one being written right now: it still means "ended".
        return text.split(" ", 1)[0].strip() or "answered"

    def remove_request(self, rid: str) -> None:
        """Remove every file of a request; the .json goes first so the listing drops it at once."""
        for suffix in SUFFIXES:
            self.unlink(rid + suffix)
        self.unlink(f".{rid}.json.tmp")

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def age_s(self, name: str) -> float | None:
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return time.time() - st.st_mtime


def request_id_of(name: str) -> str | None:
    """``abc.json`` -> ``abc``; also for ``.abc.json.tmp``; None for names that are not ours."""
    if name.startswith(".") and name.endswith(".json.tmp"):
        return name[1 : -len(".json.tmp")]
    for suffix in SUFFIXES:
        if name.endswith(suffix) and not name.startswith("."):
            return name[: -len(suffix)]
    return None


# -- is the waiter still there? ----------------------------------------------------------------


def waiter_alive(record: Mapping[str, object]) -> bool:
    waiter = record.get("waiter")
    if not isinstance(waiter, dict):
        return False
    pid = waiter.get("pid")
    if not isinstance(pid, int):
        return False
    return process_start(pid) == waiter.get("start")
