"""The channel's doorbells: FIFOs that tell a ``console`` a request was posted.

A ring carries no authority (the console lists the channel again and answers through the
request's socket like any answerer), so a FIFO any process of the user may write does here.
FIFO facts this relies on: opening for writing with O_NONBLOCK fails with ENXIO when no one
holds the read end; a FIFO opened O_RDWR never blocks on open and never reads EOF.
"""

from __future__ import annotations

import errno
import os
import select
import time


def wait_readable(fd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    # Round up so a remaining 0.3 ms does not become a 0 ms busy loop.
    return bool(poller.poll(max(0, int(timeout * 1000 + 0.999))))


# -- doorbells: how a `console` learns of new requests without polling the directory --------


def make_bell(bells_fd: int) -> tuple[int, str]:
    """Create this caller's doorbell and return (read fd, name). It is created under a temporary
    name and opened before it is renamed into view, so a ringer never finds it without a reader
    (and never takes a bell being set up for an abandoned one)."""
    name = os.urandom(8).hex()  # what secrets.token_hex does, without its imports (hmac, hashlib)
    tmp = f".{name}.tmp"
    os.mkfifo(tmp, 0o600, dir_fd=bells_fd)
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=bells_fd)
        os.rename(tmp, f"{name}.bell", src_dir_fd=bells_fd, dst_dir_fd=bells_fd)
    except BaseException:
        _unlink(bells_fd, tmp)
        raise
    return fd, f"{name}.bell"


def ring_all(bells_fd: int) -> None:
    """Ring every doorbell once; a bell nobody listens to any more (ENXIO) is removed."""
    for name in os.listdir(bells_fd):
        if not name.endswith(".bell"):
            continue
        try:
            fd = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=bells_fd)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                _unlink(bells_fd, name)  # its console died without cleaning up
            continue
        try:
            os.write(fd, b"!")
        except OSError:
            pass  # full (the console is busy and already has rings to read) or gone
        finally:
            os.close(fd)


def drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def clean_stale_bells(bells_fd: int, older_than: float = 60.0) -> None:
    now = time.time()
    for name in os.listdir(bells_fd):
        if name.startswith(".") and name.endswith(".tmp"):
            try:
                if now - os.stat(name, dir_fd=bells_fd, follow_symlinks=False).st_mtime > older_than:
                    _unlink(bells_fd, name)
            except FileNotFoundError:
                pass


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
